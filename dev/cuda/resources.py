#!/usr/bin/env python3
"""dev/cuda/resources.py: per-kernel GPU resources of train_gpt_cu, checked without a GPU.

  write   regenerate dev/cuda/resources_sm<arch>.tsv from the ptxas -v log of the build
  check   the committed tables are current (same as a regeneration), every kernel is within
          its arch's limits, and the SASS check passes (below)
  sass CUBIN [--expect-fail PREFIX[,PREFIX...]]
          only the SASS check on one binary; --expect-fail: the check must flag every kernel
          whose name starts with PREFIX and no other (the regression runs on the mutants below)
  mutant NAME DIR
          copies the sources tests/cuda/test_attention.cu needs to DIR with one defect put in (MUTANTS
          below); cuda.mk builds it for sm_90 and the SASS check must flag every flash_tc_
          kernel in it: the check is shown to catch what it was written for, and the product
          code carries no test-only switch
  table CUBIN...
          per flash_tc_ kernel of each binary (sm_90): LDSM, LDGSTS, HMMA, generic LD / ST,
          registers and local memory (spills), as a Markdown table (doc/cuda_speed.md)

Inputs: BUILD/train_gpt_cu.ptxas.log (written by cuda.mk's train_gpt_cu rule), the binary
ROOT/train_gpt_cu (cuobjdump -elf for __launch_bounds__, -sass); --arch-from ARCH LOG_DIR BINARY takes
one arch from another build instead (make test: sm_90 from gpu-prebuilt's); together they contain every kernel of
llmc/cuda (the tables say so, else they are not made), BUILD-emu/test_attention
--smem (dynamic shared memory per attention kernel), dev/cuda/launch_threads.tsv (block size
of kernels without __launch_bounds__), dev/cuda/spill_exceptions.tsv (accepted spills).

Limits: registers x threads per block (registers rounded up to 8 per thread, the allocation
unit) <= 65536, registers <= 255, threads <= 1024; static + dynamic shared memory <= the
opt-in maximum per block (sm_80: 163 KiB, sm_90: 227 KiB); no spill stores or loads unless the
kernel is listed with a reason. SASS: every kernel that uses shared memory (static, dynamic, or
a generic pointer into the shared window, SR_SWINHI) must issue shared-memory instructions
(LDS/STS/LDSM/STSM/ATOMS/LDGSTS/...), not only generic LD/ST; the tensor-core attention
(flash_tc_*) must load its fragments with LDSM (ldmatrix), its tiles with LDGSTS (cp.async)
and issue no generic LD/ST at all.
"""
import argparse, glob, os, re, shutil, subprocess, sys

SMEM_OPTIN = {"80": 163 * 1024, "90": 227 * 1024}
HEADER = "kernel\tregs\tspill_st\tspill_ld\tsmem_static\tmax_threads"
COMMENT = ("# kernel: demangled name, no return type or parameter list, template arguments kept "
           "(flash_tc_forward_kernel<128>); smem_static in bytes; max_threads: __launch_bounds__, else "
           "dev/cuda/launch_threads.tsv. Made by `make cuda-resources` from train_gpt_cu's ptxas -v; do not edit.")
SHARED_OP = re.compile(r"^(LDS|STS|LDSM|STSM|ATOMS|LDGSTS|LDSU|UBLKCP|UTMALDG|SYNCS)(\.|$)")
GENERIC_OP = re.compile(r"^(LD|ST|ATOM)(\.|$)")
COUNTED = ("LDSM", "LDGSTS", "HMMA", "LD", "ST", "LDL", "STL")
TC_PREFIX = "flash_tc_"
# name: (file, text, replacement, what it breaks); the text must occur exactly once
MUTANTS = {
    # the plain-CUDA data movement of mma.cuh, the branch the CPU emulation runs, built for the
    # GPU (an #ifdef gone wrong): ldmatrix becomes loads through shuffled generic addresses and
    # cp.async a synchronous copy (mma.sync stays: the build stays short)
    "emulation": ("llmc/cuda/mma.cuh", "#if !LLMC_EMULATED // data movement;", "#if 0 // mutant; data movement;",
                  "mma.cuh's plain-CUDA ldmatrix and cp.async in place of the PTX"),
}


def die(msg):
    print("error: " + msg, file=sys.stderr)
    sys.exit(1)


def tool(name):
    """cuobjdump from PATH, the CUDA toolkit or a PyPI wheel (nvidia-cuda-cuobjdump)"""
    found = shutil.which(name) or shutil.which(name, path="/usr/local/cuda/bin")
    if found:
        return found
    import site
    dirs = site.getsitepackages() + [site.getusersitepackages()] + glob.glob("/usr/local/lib/python3*/dist-packages")
    for d in dirs:
        for c in glob.glob(os.path.join(d, "nvidia", "*", "bin", name)):
            return c
    die(f"{name} not found (PATH, /usr/local/cuda/bin, or pip install nvidia-cuda-cuobjdump: bash dev/install.sh)")


def demangle(names):
    if not names:
        return {}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout.split("\n")
    res = {}
    for m, d in zip(names, out):
        if d.startswith("void "):
            d = d[5:]
        depth = 0
        for i, ch in enumerate(d):  # cut the parameter list: the first '(' outside template brackets
            if ch == "<":
                depth += 1
            elif ch == ">":
                depth -= 1
            elif ch == "(" and depth == 0:
                d = d[:i]
                break
        res[m] = d.strip()
    return res


def parse_ptxas(path):
    """{arch: {mangled: dict(regs, spill_st, spill_ld, smem_static)}} from a ptxas -v log"""
    if not os.path.exists(path):
        die(f"{path} missing: build train_gpt_cu with dev/cuda/cuda.mk (make train_gpt_cu)")
    res, cur, cur_name, props = {}, None, None, None
    for line in open(path, errors="replace"):
        m = re.search(r"Compiling entry function '([^']+)' for 'sm_(\d+)'", line)
        if m:
            cur_name = m.group(1)
            cur = res.setdefault(m.group(2), {}).setdefault(cur_name, dict(regs=0, spill_st=0, spill_ld=0, smem_static=0))
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            props = m.group(1)  # a non-inlined device function has its own: not the kernel's
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur is not None and props == cur_name:
            cur["spill_st"], cur["spill_ld"] = int(m.group(1)), int(m.group(2))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and cur is not None:
            cur["regs"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            cur["smem_static"] = int(s.group(1)) if s else 0
            cur = None  # "Used" closes an entry
    return res


def res_keys(res):
    return {k for a in res.values() for k in a}


def cuobjdump(flag, binary):
    """cuobjdump FLAG BINARY, line by line, as (arch, line): arch is the sm_ number of the section it is in"""
    out = subprocess.run([tool("cuobjdump"), flag, binary], capture_output=True, text=True)
    if out.returncode != 0:
        die(f"cuobjdump {flag} {binary}: {out.stderr.strip()}")
    arch = None
    for line in out.stdout.split("\n"):
        m = re.match(r"\s*(?:arch =|code for) sm_(\d+)", line)
        if m:
            arch = m.group(1)
            continue
        yield arch, line


def parse_elf_max_threads(binary):
    """{arch: {mangled: threads}} from the EIATTR_MAX_THREADS of each kernel (__launch_bounds__)"""
    res, func, want = {}, None, False
    for arch, line in cuobjdump("-elf", binary):
        m = re.match(r"^\.nv\.info\.(\S+)", line)
        if m:
            func = m.group(1)
            continue
        if "EIATTR_MAX_THREADS" in line:
            want = True
            continue
        if want and line.strip().startswith("Value:"):
            v = [int(x, 16) for x in line.split(":", 1)[1].split()]
            n = 1
            for x in v:
                n *= x
            res.setdefault(arch, {})[func] = n
            want = False
    return res


def parse_sass(binary):
    """{arch: {mangled: [shared ops, generic ops, uses the shared window, {op: count of COUNTED}]}}"""
    res, func = {}, None
    for arch, line in cuobjdump("-sass", binary):
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            func = m.group(1)
            res.setdefault(arch, {})[func] = [0, 0, False, dict.fromkeys(COUNTED, 0)]
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if m and func is not None:
            ins = m.group(1).split()
            if ins and ins[0].startswith("@"):
                ins = ins[1:]
            if not ins:
                continue
            r = res[arch][func]
            if SHARED_OP.match(ins[0]):
                r[0] += 1
            elif GENERIC_OP.match(ins[0]):
                r[1] += 1
            if "SR_SWINHI" in m.group(1):
                r[2] = True
            op = ins[0].split(".")[0]
            if op in r[3]:
                r[3][op] += 1
    return res


def read_tsv(path, ncol):
    rows = {}
    for line in open(path):
        if line.startswith("#") or not line.strip() or line.startswith("kernel\t"):
            continue
        f = line.rstrip("\n").split("\t")
        if len(f) < ncol:
            die(f"{path}: bad line: {line.strip()}")
        rows.setdefault(f[0], []).append(f[1:])
    return rows


def dynamic_smem(build):
    exe = build + "-emu/test_attention"
    if not os.path.exists(exe):
        die(f"{exe} missing (make {exe})")
    out = subprocess.run([exe, "--smem"], capture_output=True, text=True, check=True).stdout
    return {k: int(v) for k, v in (l.split("\t") for l in out.strip().split("\n"))}


def launch_literals(root):
    """{kernel base name: {block sizes written as integer literals in LAUNCH(...)}}"""
    lit = {}
    for path in glob.glob(os.path.join(root, "llmc", "cuda", "*.cuh")) + [os.path.join(root, "train_gpt.cu")]:
        text = open(path).read()
        for m in re.finditer(r"\bLAUNCH\(", text):
            args, depth, cur, i = [], 0, "", m.end()
            while i < len(text) and len(args) < 3:  # split the first three arguments at top-level commas
                ch = text[i]
                if ch in "([<" and not (ch == "<" and depth == 0 and not cur.strip()[:1].isalpha()):
                    depth += 1
                elif ch in ")]>":
                    if depth == 0:
                        break
                    depth -= 1
                if ch == "," and depth == 0:
                    args.append(cur.strip()); cur = ""
                else:
                    cur += ch
                i += 1
            if len(args) == 3 and args[2].isdigit():
                lit.setdefault(re.sub(r"[()\s]", "", args[0]).split("<")[0], set()).add(int(args[2]))
    return lit


def llmc_kernels(root):
    """names of the __global__ functions defined in llmc/cuda/*.cuh"""
    found = set()
    for path in glob.glob(os.path.join(root, "llmc", "cuda", "*.cuh")):
        found |= set(re.findall(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(", open(path).read()))
    return found


def inputs(args):
    """[(arches or None for the rest, ptxas log, binary)]: the main build, and --arch-from's arches"""
    more = [({a}, os.path.join(d, "train_gpt_cu.ptxas.log"), b) for a, d, b in args.arch_from or []]
    taken = {a for m in more for a in m[0]}
    for _, log, b in more:
        if not os.path.exists(b) or not os.path.exists(log):
            die(f"--arch-from: {b} or {log} missing (make gpu-prebuilt builds them)")
    return [(None, os.path.join(args.build, "train_gpt_cu.ptxas.log"), os.path.join(args.root, "train_gpt_cu"))] + more, taken


def per_arch(parse, which, taken, path):
    """parse(path) restricted to `which` arches (None: every arch not in `taken`)"""
    return {a: v for a, v in parse(path).items() if (a in which if which else a not in taken)}


def make_tables(args):
    ins, taken = inputs(args)
    ptx, bounds = {}, {}
    for which, log, binary in ins:
        ptx.update(per_arch(parse_ptxas, which, taken, log))
        bounds.update(per_arch(parse_elf_max_threads, which, taken, binary))
    launch = {k: int(v[0][0]) for k, v in read_tsv(os.path.join(args.dir, "launch_threads.tsv"), 2).items()}
    names = demangle(sorted(res_keys(ptx)))
    lit = launch_literals(args.root)
    errors = []
    built = {n.split("<")[0] for n in names.values()}
    for k in sorted(llmc_kernels(args.root) - built):
        errors.append(f"{k} (llmc/cuda) is not in train_gpt_cu's build, so the tables would miss it: launch it from the "
                      "trainer, or drop it")
    for k, n in launch.items():
        base = k.split("<")[0]
        if base in lit and n not in lit[base]:
            errors.append(f"launch_threads.tsv: {k} says {n} threads, its LAUNCH line in the source says {sorted(lit[base])}")
    tables = {}
    for arch in sorted(ptx):
        rows = []
        for m, r in ptx[arch].items():
            k = names[m]
            t = bounds.get(arch, {}).get(m) or launch.get(k)
            if t is None:
                errors.append(f"sm_{arch} {k}: no __launch_bounds__ and no line in dev/cuda/launch_threads.tsv")
                t = 0
            rows.append((k, r["regs"], r["spill_st"], r["spill_ld"], r["smem_static"], t))
        rows.sort()
        tables[arch] = COMMENT + "\n" + HEADER + "\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows)
    return tables, ptx, names, errors


def sass_check(binary, names_for, dyn, static, verbose=False, arch_ok=lambda a: True):
    """prints per-kernel shared/generic counts (of the arches arch_ok takes); returns (failures, list of
    flagged kernels, tc kernels seen)"""
    sass = parse_sass(binary)
    fails, flagged, checked, tc = [], [], [], set()
    for arch in sorted(a for a in sass if arch_ok(a)):
        names = names_for(sorted(sass[arch]))
        for m, (sh, gen, win, ops) in sorted(sass[arch].items(), key=lambda x: names[x[0]]):
            k = names[m]
            is_tc = k.startswith(TC_PREFIX)
            uses = static.get((arch, k), 0) > 0 or dyn.get(k, 0) > 0 or win
            if not uses and not is_tc:
                continue
            why = []
            if uses and sh == 0:
                why.append(f"uses shared memory but issues no shared-memory instruction ({gen} generic LD/ST): "
                           "the shared address space was lost")
            if is_tc:
                tc.add(k)
                if ops["LDSM"] == 0:
                    why.append("no LDSM: fragments not loaded with ldmatrix")
                if ops["LDGSTS"] == 0:
                    why.append("no LDGSTS: tiles not loaded with cp.async")
                if gen:
                    why.append(f"{gen} generic LD/ST (want 0)")
            checked.append(k)
            if why or verbose:
                print(f"  sm_{arch} {k:34s} shared-memory instructions {sh:5d}  LDSM {ops['LDSM']:4d}  "
                      f"LDGSTS {ops['LDGSTS']:4d}  generic LD/ST {gen:5d}  {'FAIL' if why else 'ok'}")
            if why:
                flagged.append(k)
                fails.append(f"sm_{arch} {k}: " + "; ".join(why))
    print(f"  {len(checked)} kernel builds checked; {len(flagged)} flagged")
    return fails, flagged, tc


def res_usage(binary):
    """{arch: {mangled: (registers, stack bytes per thread)}} from cuobjdump -res-usage (spills live on the stack)"""
    res, func = {}, None
    for arch, line in cuobjdump("-res-usage", binary):
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            func = m.group(1)
            continue
        m = re.search(r"REG:(\d+) STACK:(\d+)", line)
        if m and func:
            res.setdefault(arch or "any", {})[func] = (int(m.group(1)), int(m.group(2)))  # a cubin names no arch
            func = None
    return res


def sass_table(binaries, arch="90"):
    """Markdown: per flash_tc_ kernel, one row per binary"""
    cols = "LDSM | LDGSTS | HMMA | LD | ST | regs | stack bytes | LDL + STL (spills)"
    rows = {}
    for binary in binaries:
        sass = parse_sass(binary).get(arch, {})
        usage = res_usage(binary)
        usage = usage.get(arch, usage.get("any", {}))
        names = demangle(sorted(sass))
        for m, (_, _, _, ops) in sass.items():
            k = names[m]
            if k.startswith(TC_PREFIX):
                regs, stack = usage.get(m, (0, 0))
                rows.setdefault(k, []).append((os.path.basename(binary), ops, regs, stack))

    def key(k):  # forward, dK/dV, dQ; then head size
        return (k.split("<")[0], int(re.search(r"<(\d+)>", k).group(1)))
    print(f"| kernel (sm_{arch}) | binary | {cols} |")
    print("| --- | --- |" + " --- |" * len(cols.split("|")))
    for k in sorted(rows, key=key):
        for b, ops, regs, stack in rows[k]:
            print(f"| `{k}` | {b} | {ops['LDSM']} | {ops['LDGSTS']} | {ops['HMMA']} | {ops['LD']} | {ops['ST']} | "
                  f"{regs} | {stack} | {ops['LDL'] + ops['STL']} |")


def make_mutant(root, name, out):
    """the sources of tests/cuda/test_attention.cu copied to out, with mutant `name` applied"""
    if name not in MUTANTS:
        die(f"mutant {name}: unknown (have {', '.join(MUTANTS)})")
    path, text, repl, _ = MUTANTS[name]
    for sub in ("llmc/host", "llmc/cuda", "tests", "tests/cuda"):
        dst = os.path.join(out, sub)
        os.makedirs(dst, exist_ok=True)
        for f in glob.glob(os.path.join(root, sub, "*.h")) + glob.glob(os.path.join(root, sub, "*.cuh")) + \
                glob.glob(os.path.join(root, sub, "test_attention" + ".cu")):
            shutil.copy(f, dst)
    target = os.path.join(out, path)
    src = open(target).read()
    if src.count(text) != 1:
        die(f"mutant {name}: {text!r} occurs {src.count(text)} times in {path}, not once: update MUTANTS")
    open(target, "w").write(src.replace(text, repl))
    print(f"mutant {name} in {out}: {MUTANTS[name][3]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/cuda")
    ap.add_argument("--root", default=".")
    ap.add_argument("cmd", choices=["write", "check", "sass", "mutant", "table"])
    ap.add_argument("cubin", nargs="*")
    ap.add_argument("--expect-fail")
    ap.add_argument("--verbose", action="store_true", help="print the SASS counts of every kernel")
    ap.add_argument("--arch-from", nargs=3, action="append", metavar=("ARCH", "LOG_DIR", "BINARY"),
                    help="take sm_ARCH from LOG_DIR/train_gpt_cu.ptxas.log and BINARY instead of the main build")
    args = ap.parse_args()
    args.dir = os.path.join(args.root, "dev", "cuda")
    if args.cmd == "mutant":
        if len(args.cubin) != 2:
            die("mutant: give NAME and the output directory")
        make_mutant(args.root, args.cubin[0], args.cubin[1])
        return
    if args.cmd == "table":
        if not args.cubin:
            die("table: give the binaries")
        sass_table(args.cubin)
        return
    if args.cmd == "sass":
        if len(args.cubin) != 1:
            die("sass: give the binary to check")
        args.cubin = args.cubin[0]
        dyn = dynamic_smem(args.build)
        fails, flagged, tc = sass_check(args.cubin, demangle, dyn, {}, args.verbose)
        if args.expect_fail:
            # PREFIX[,PREFIX...]: each names kernels the mutant must get flagged (a tc prefix: all of
            # them, not only some), and nothing outside them may be flagged
            prefixes = args.expect_fail.split(",")
            ok = all(any(f.split(" ", 1)[1].startswith(p) for p in prefixes) for f in fails)
            for p in prefixes:
                want = {k for k in flagged if k.startswith(p)}
                every = {k for k in tc if k.startswith(p)} if p.startswith(TC_PREFIX) else want
                ok_p = len(want) > 0 and want == every
                ok = ok and ok_p
                print(f"{'ok  ' if ok_p else 'FAIL'} the SASS check flags {len(want)} of the {len(every)} kernels "
                      f"starting with {p} in {args.cubin}")
            if not all(any(f.split(" ", 1)[1].startswith(p) for p in prefixes) for f in fails):
                print(f"FAIL kernels outside {args.expect_fail} are flagged too")
            print(f"{1 if ok else 0} passed, {0 if ok else 1} failed")
            sys.exit(0 if ok else 1)
        for f in fails:
            print("FAIL " + f)
        print(f"{0 if fails else 1} passed, {1 if fails else 0} failed")
        sys.exit(1 if fails else 0)

    tables, ptx, names, errors = make_tables(args)
    for e in errors:
        print("error: " + e, file=sys.stderr)
    if errors:
        sys.exit(1)
    if args.cmd == "write":
        for arch, text in tables.items():
            path = os.path.join(args.dir, f"resources_sm{arch}.tsv")
            open(path, "w").write(text)
            print(f"wrote {path} ({text.count(chr(10)) - 2} kernels)")
        return
    passed, failed = 0, 0

    def check(ok, msg):
        nonlocal passed, failed
        print(("ok   " if ok else "FAIL ") + msg)
        passed, failed = passed + ok, failed + (not ok)

    dyn = dynamic_smem(args.build)
    exc = read_tsv(os.path.join(args.dir, "spill_exceptions.tsv"), 3)
    static = {}
    for arch, text in sorted(tables.items()):
        path = os.path.join(args.dir, f"resources_sm{arch}.tsv")
        old = open(path).read() if os.path.exists(path) else ""
        if old != text:
            import difflib
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), path, "regenerated"))
        check(old == text, f"{path} is current (else: make cuda-resources, and commit it)")
        bad = []
        for line in text.split("\n")[2:]:
            if not line:
                continue
            k, regs, sst, sld, smem, thr = line.split("\t")
            regs, sst, sld, smem, thr = int(regs), int(sst), int(sld), int(smem), int(thr)
            static[(arch, k)] = smem
            ralloc = (regs + 7) // 8 * 8
            if regs > 255 or ralloc * thr > 65536:
                bad.append(f"{k}: {regs} registers x {thr} threads > 65536 registers per SM")
            if thr > 1024:
                bad.append(f"{k}: {thr} threads per block > 1024")
            total = smem + dyn.get(k, 0)
            if total > SMEM_OPTIN[arch]:
                bad.append(f"{k}: {smem} static + {dyn.get(k, 0)} dynamic bytes of shared memory > {SMEM_OPTIN[arch]} (sm_{arch} opt-in)")
            if (sst or sld) and not any(a[0] in (arch, "all") for a in exc.get(k, [])):
                bad.append(f"{k}: spills ({sst} bytes stored, {sld} loaded) and is not in dev/cuda/spill_exceptions.tsv")
        for b in bad:
            print("     sm_" + arch + " " + b)
        check(not bad, f"sm_{arch}: {text.count(chr(10)) - 2} kernels within registers/threads/shared-memory limits, no unlisted spills")
    print("SASS: kernels that use shared memory must issue shared-memory instructions; flash_tc_ kernels LDSM and "
          "LDGSTS, and no generic LD/ST")
    fails, tc = [], set()
    ins, taken = inputs(args)
    for which, _, binary in ins:
        f, _, t = sass_check(binary, lambda ms: names, dyn, static, args.verbose,
                             lambda a, which=which: a in which if which else a not in taken)
        fails += f
        tc |= t
    for f in fails:
        print("     " + f)
    check(not fails, "SASS: every kernel that uses shared memory issues shared-memory instructions")
    check(len(tc) > 0, f"SASS: {len(tc)} {TC_PREFIX} kernels found and checked for LDSM, LDGSTS, no generic LD/ST")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
