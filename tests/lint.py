#!/usr/bin/env python3
"""tests/lint.py: the house style that a program can check (CONTRIBUTING.md).

C, C++ and CUDA sources (git ls-files *.c *.h *.cu *.cuh *.cpp, third_party/ skipped):
  - no line longer than 120 columns;
  - one statement per line: at most one ';' outside string and character literals,
    comments, the header of a for loop and the body of a lambda;
  - the file is what clang-format 14 (.clang-format) makes of it, when that version is
    installed (`make format` applies it; other versions lay some lines out differently).
Makefiles (Makefile, *.mk): no line longer than 120 columns.

usage: tests/lint.py [ROOT]      --selftest: plant one violation of each kind in a
copy of a clean file and check that each is reported. Prints each violation as
FILE:LINE: what, then "N passed, M failed" (N files clean, M not); exit 1 if M > 0.
"""
import os, re, shutil, subprocess, sys, tempfile

LIMIT = 120
C_EXT = (".c", ".h", ".cu", ".cuh", ".cpp")


def strip_code(line, in_comment):
    """The line without literals and comments; whether a block comment is still open."""
    out, i, n = [], 0, len(line)
    while i < n:
        if in_comment:
            j = line.find("*/", i)
            if j < 0: return "".join(out), True
            i, in_comment = j + 2, False
            continue
        c = line[i]
        if line.startswith("//", i): break
        if line.startswith("/*", i):
            in_comment, i = True, i + 2
            continue
        if c in "\"'":
            j = i + 1
            while j < n and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out), in_comment


def statements(code):
    code = re.sub(r"\bfor\s*\((?:[^()]|\([^()]*\))*\)", "for()", code)      # for (a; b; c)
    code = re.sub(r"\bfor\s*\(.*$", "for(", code)                           # a for header that wraps
    code = re.sub(r"\[[^\[\]]*\]\s*(\([^()]*\))?\s*(->\s*[\w:<> ]+)?\s*\{[^{}]*\}", "L", code)  # lambda bodies
    return code.count(";")


def check_c(path, text):
    bad, in_comment, in_for = [], False, 0
    for no, line in enumerate(text.split("\n"), 1):
        if len(line) > LIMIT: bad.append("%s:%d: %d columns (limit %d)" % (path, no, len(line), LIMIT))
        code, in_comment = strip_code(line, in_comment)
        if code.lstrip().startswith("#"): continue
        if in_for:                                                          # the rest of a wrapped for header
            in_for += code.count("(") - code.count(")")
            if in_for <= 0: in_for = 0
            continue
        if re.search(r"\bfor\s*\(", code):
            depth = code.count("(") - code.count(")")
            if depth > 0:
                in_for = depth
                continue
        if statements(code) > 1: bad.append("%s:%d: more than one statement: %s" % (path, no, line.strip()[:80]))
    return bad


def check_make(path, text):
    return ["%s:%d: %d columns (limit %d)" % (path, no, len(l), LIMIT)
            for no, l in enumerate(text.split("\n"), 1) if len(l) > LIMIT]


CLANG_FORMAT_MAJOR = "14"  # the version the tree is formatted with: another one may lay lines out differently


def clang_format_exe():
    exe = shutil.which("clang-format")
    if exe is None: return None
    v = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version (\d+)\.", v)
    return exe if m and m.group(1) == CLANG_FORMAT_MAJOR else None


def clang_format_diff(root, path, text):
    exe = clang_format_exe()
    if exe is None: return []
    r = subprocess.run([exe, "--style=file", "--assume-filename=" + os.path.join(root, path)], input=text,
                       capture_output=True, text=True, cwd=root)
    if r.returncode != 0 or r.stdout == text: return []
    a, b = text.split("\n"), r.stdout.split("\n")
    first = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    return ["%s:%d: not as clang-format writes it (run make format)" % (path, first + 1)]


def lint(root, files):
    npass = nfail = 0
    for f in files:
        text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
        if f.endswith(C_EXT): bad = check_c(f, text) + clang_format_diff(root, f, text)
        else: bad = check_make(f, text)
        for b in bad: print(b)
        npass += not bad
        nfail += bool(bad)
    return npass, nfail


def tracked(root):
    out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True).stdout.split("\n")
    return [f for f in out if f and not f.startswith("third_party/") and os.path.isfile(os.path.join(root, f))
            and (f.endswith(C_EXT) or os.path.basename(f) == "Makefile" or f.endswith(".mk"))]


def selftest(root):
    """Each planted violation must be reported; the clean original must not be."""
    src = "llmc/host/rand.h"
    clean = open(os.path.join(root, src)).read()
    plants = {
        "a long line": clean + "// " + "x" * LIMIT + "\n",
        "two statements": clean + "static int lint_a_, lint_b_;\nstatic void lint_f_(void) { lint_a_ = 1; lint_b_ = 2; }\n",
        "two statements after a wrapped for": clean + "static void lint_g_(int n) {\n    for (int i = 0;\n         i < n; i++) {\n"
                                              "    }\n    n = 1; n = 2;\n}\n",
    }
    npass = nfail = 0
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(os.path.join(root, ".clang-format"), d)
        os.makedirs(os.path.join(d, os.path.dirname(src)))
        for name, text in [("the clean file", clean)] + list(plants.items()):
            open(os.path.join(d, src), "w").write(text)
            bad = check_c(src, text)
            ok = (not bad) if name == "the clean file" else bool(bad)
            print(("ok   " if ok else "FAIL ") + "lint on %s: %d report(s)" % (name, len(bad)))
            npass += ok
            nfail += not ok
    return npass, nfail


def main():
    args = [a for a in sys.argv[1:] if a != "--selftest"]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if "--selftest" in sys.argv:
        npass, nfail = selftest(root)
    else:
        npass, nfail = lint(root, tracked(root))
        if clang_format_exe() is None:
            print("lint: clang-format %s not found: the layout was NOT compared" % CLANG_FORMAT_MAJOR)
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
