// fuzz_flags.c: libFuzzer harness for the command-line parser and validation
// (llmc/host/config.h, with the planner's flags from llmc/planner/planner.h). The input is argv,
// split at newlines; parsing, validation and the layout check must never crash.
#include "../../llmc/host/config.h"
#include "../../llmc/planner/planner.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > 4096) return 0;
    char* buf = (char*)malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    char* argv[130];
    int argc = 0;
    argv[argc++] = (char*)"train_gpt";
    for (char* p = buf; argc < 129;) {
        argv[argc++] = p;
        char* nl = strchr(p, '\n');
        if (nl == NULL) break;
        *nl = '\0';
        p = nl + 1;
    }
    argv[argc] = NULL;
    Config c;
    config_defaults(&c);
    PlanRequest plan;
    plan_request_init(&plan);
    char err[CFG_ERR_LEN];
    if (config_parse(&c, argc, argv, plan_config_flag, &plan, err) == 0 && config_validate(&c, err) == 0) {
        int world = c.world > 0 ? c.world : 1;
        if (config_validate_layout(&c, world, err) == 0) {
            // what startup derives next must be in range
            int dp = c.dp > 0 ? c.dp : world / (c.tp * c.pp * c.cp);
            if ((int64_t)c.tp * c.pp * c.cp * dp != world || c.Vp < c.V || c.Vp % c.vpad != 0) __builtin_trap();
        }
    }
    if (strlen(err) >= CFG_ERR_LEN) __builtin_trap();
    free(buf);
    return 0;
}
