// fuzz_record.c: libFuzzer harness for the run record reader (llmc/host/runrecord.h over json.h):
// arbitrary bytes as DIR/config.json's text. A record that parses gives an argv of strings and a
// rewound list the strict -skip-data parser takes; merging the argv with itself must equal the
// argv merged alone (a flag given again replaces the recorded one: the record never grows), and
// the merged record must read back as the same list of strings.
#include "../../llmc/host/runrecord.h"
#include "../../llmc/planner/planner.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > (1 << 16)) return 0;
    int argc = 0;
    char** argv = NULL;
    char rewound[CFG_PATH_LEN];
    char err[CFG_ERR_LEN];
    if (runrecord_parse((const char*)data, size, &argc, &argv, rewound, sizeof(rewound), err, sizeof(err)) != 1)
        return 0;
    int64_t at[CFG_MAX_SKIPS], n[CFG_MAX_SKIPS];
    if (config_skip_ranges(rewound, at, n, err) < 0) __builtin_trap();
    static char once[8192], twice[8192]; // Config.argv_record's size
    PlanRequest plan;
    plan_request_init(&plan);
    char* none[1] = {(char*)"train_gpt"};
    int a = runrecord_merge(once, sizeof(once), 1, none, argc, argv, plan_config_flag, &plan);
    int b = runrecord_merge(twice, sizeof(twice), argc, argv, argc, argv, plan_config_flag, &plan);
    if (a != b || (a == 0 && strcmp(once, twice) != 0)) __builtin_trap();
    if (a == 0) {
        int m = 0;
        char** back = NULL;
        if (runrecord_tokens(once, &m, &back) != 0 || m > argc) __builtin_trap();
        runrecord_free_argv(m, back);
    }
    runrecord_free_argv(argc, argv);
    return 0;
}
