// cuemu/impl/resources.h - the emulated GPU's per-block resource limits:
// CUEMU_ARCH=80 (A100) or 90 (H100, default) sets the dynamic shared memory opt-in
// maximum, and launches are checked against the compiler's register table
// dev/cuda/resources_sm<arch>.tsv (or the file CUEMU_RESOURCES names): threads times
// registers (allocated in units of 8 per thread) must fit the 65536-register file,
// threads must not exceed the kernel's max_threads, static plus dynamic shared memory
// must fit the opt-in maximum. Kernels missing from the table are skipped (one note each).
// Test-only: part of the CPU emulation of CUDA, never linked into the product.
#pragma once
#include "base.h"
#include <cxxabi.h>
#include <dlfcn.h>
#include <set>
#include <string>

namespace cuemu {

struct ArchLimits {
    int arch;
    size_t smem_optin;
    size_t smem_per_sm;
};
inline const ArchLimits& arch_limits() {
    static ArchLimits L = [] {
        const char* s = getenv("CUEMU_ARCH");
        int a = s && s[0] ? atoi(s) : 90;
        if (a == 80) return ArchLimits{80, 163 * 1024, 164 * 1024};
        if (a != 90) fprintf(stderr, "cuemu: CUEMU_ARCH=%s unknown (80|90); using 90\n", s);
        return ArchLimits{90, 227 * 1024, 228 * 1024};
    }();
    return L;
}

struct KernelRes {
    int regs;
    size_t smem_static;
    int max_threads;
};
struct ResTable {
    bool loaded = false;
    std::string path;
    std::map<std::string, KernelRes> k;
    std::set<std::string> noted;
};
inline std::string strip_spaces(const std::string& s) {
    std::string o;
    for (char c : s)
        if (c != ' ' && c != '\t') o += c;
    return o;
}
// Reads the table once; absent: no register checks (one note). Format: '#' comments,
// header "kernel regs spill_st spill_ld smem_static max_threads", tab-separated.
inline ResTable& res_table() {
    static ResTable T;
    if (T.loaded) return T;
    T.loaded = true;
    const char* env = getenv("CUEMU_RESOURCES");
    char def[64];
    snprintf(def, sizeof def, "dev/cuda/resources_sm%d.tsv", arch_limits().arch);
    T.path = env && env[0] ? env : def;
    FILE* f = fopen(T.path.c_str(), "r");
    if (!f) {
        if (env && env[0]) die("CUEMU_RESOURCES=%s cannot be opened", env);
        fprintf(stderr, "cuemu: note: no %s: launch register checks skipped\n", def);
        return T;
    }
    char line[4096];
    bool header = false;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        std::vector<std::string> col;
        std::string cur;
        for (char* p = line; *p && *p != '\n' && *p != '\r'; p++) {
            if (*p == '\t') {
                col.push_back(cur);
                cur.clear();
            } else
                cur += *p;
        }
        col.push_back(cur);
        if (!header) {
            if (col.size() < 6 || col[0] != "kernel" || col[1] != "regs" || col[4] != "smem_static" ||
                col[5] != "max_threads")
                die("%s: header must be kernel<TAB>regs<TAB>spill_st<TAB>spill_ld<TAB>smem_static<TAB>max_threads",
                    T.path.c_str());
            header = true;
            continue;
        }
        if (col.size() < 6) die("%s: line '%s' has %zu columns, expected 6", T.path.c_str(), line, col.size());
        T.k[strip_spaces(col[0])] =
            KernelRes{atoi(col[1].c_str()), (size_t)atoll(col[4].c_str()), atoi(col[5].c_str())};
    }
    fclose(f);
    return T;
}
// The kernel's name as the table writes it: the demangled symbol of the function (so
// template arguments are the real ones: flash_tc_forward_kernel<128>, not <D>) without
// return type and parameter list; the LAUNCH string when the symbol is not exported.
inline std::string kernel_table_name(const void* kernel, const char* launch_name) {
    Dl_info di;
    if (dladdr(kernel, &di) && di.dli_sname && di.dli_saddr == kernel) {
        int st = 0;
        char* d = abi::__cxa_demangle(di.dli_sname, nullptr, nullptr, &st);
        if (st == 0 && d) {
            std::string s = d;
            free(d);
            // drop the parameter list: the last top-level '(' ... ')'
            int depth = 0;
            size_t cut = std::string::npos;
            for (size_t i = s.size(); i-- > 0;) {
                if (s[i] == ')')
                    depth++;
                else if (s[i] == '(') {
                    if (--depth == 0) {
                        cut = i;
                        break;
                    }
                }
            }
            if (cut != std::string::npos) s = s.substr(0, cut);
            // drop the return type: text before the first top-level space
            depth = 0;
            for (size_t i = 0; i < s.size(); i++) {
                if (s[i] == '<')
                    depth++;
                else if (s[i] == '>')
                    depth--;
                else if (s[i] == ' ' && depth == 0) {
                    s = s.substr(i + 1);
                    break;
                }
            }
            return strip_spaces(s);
        }
        free(d);
    }
    std::string n = strip_spaces(launch_name ? launch_name : "");
    if (n.size() >= 2 && n.front() == '(' && n.back() == ')') n = n.substr(1, n.size() - 2);
    return n;
}
// Returns false (after saying why) when the launch exceeds the block's resources.
inline bool check_resources(const void* kernel, const char* name, const char* file, int line,
                            unsigned long long threads, size_t dyn_smem) {
    ResTable& T = res_table();
    if (T.k.empty()) return true;
    std::string n = kernel_table_name(kernel, name);
    auto it = T.k.find(n);
    if (it == T.k.end()) {
        if (T.noted.insert(n).second)
            fprintf(stderr, "cuemu: note: kernel %s is not in %s: its launch resources are not checked\n", n.c_str(),
                    T.path.c_str());
        return true;
    }
    const KernelRes& r = it->second;
    unsigned long long regs = (unsigned long long)((r.regs + 7) / 8 * 8) * threads;
    const char* why = nullptr;
    char buf[256];
    if (regs > 65536) {
        snprintf(buf, sizeof buf, "%llu threads x %d registers (%llu) exceed the 65536 registers of an SM", threads,
                 r.regs, regs);
        why = buf;
    } else if (r.max_threads > 0 && threads > (unsigned long long)r.max_threads) {
        snprintf(buf, sizeof buf, "%llu threads exceed the kernel's max_threads %d", threads, r.max_threads);
        why = buf;
    } else if (r.smem_static + dyn_smem > arch_limits().smem_optin) {
        snprintf(buf, sizeof buf, "%zu bytes static + %zu dynamic shared memory exceed sm_%d's %zu per block",
                 r.smem_static, dyn_smem, arch_limits().arch, arch_limits().smem_optin);
        why = buf;
    }
    if (!why) return true;
    fprintf(stderr, "cuemu: %s:%d: launch of %s: too many resources requested for launch: %s (%s)\n", file, line,
            n.c_str(), why, T.path.c_str());
    return false;
}

} // namespace cuemu
