#!/usr/bin/env bash
# tests/test_refs.sh: every reference to a file of this repository resolves.
#
# Scans the repository's text files (git ls-files: tracked, plus untracked files that git
# does not ignore, so a new page is checked before it is committed; third_party/,
# binary files and *.png skipped) for
#   - paths that start with llmc/, dev/, doc/, scripts/, tests/, cuemu/, third_party/ or .ci/, and the top-level names
#     train_gpt*.c/.cu, test_*.c/.cu, Makefile, README.md, CONTRIBUTING.md, .gitignore;
#   - markdown links [text](relative/path#anchor), resolved from the linking file's folder;
#     the anchor of a link to a markdown file must be one of its headings (GitHub's slugs);
#   - citations of the product spec outside this repository (the word SPEC, "SPEC.md",
#     "../shared"): the project stands alone, its spec is doc/spec.md.
# A referenced path may be a file or a folder of the tree; "#anchors", ":line" suffixes and
# trailing punctuation are stripped; globs (check_*.cu, *.bin) and {a,b} lists are expanded;
# placeholders in capitals (family_NAME.sh, regress-WHAT.bin) match any name; generated
# outputs that .gitignore names (build/, fixtures/, dev/data/kjv/, out/, runs/, ...) are
# allowed. Prints each dangling reference as FILE:LINE: missing PATH, then the line
# "N passed, M failed" (N references resolved, M did not) and exits 1 when M > 0.
#
# usage: bash tests/test_refs.sh [ROOT]      (ROOT: a checkout; default: this one)
#        VERBOSE=1 also prints every resolved reference as FILE:LINE: ok PATH
set -euo pipefail
ROOT=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
cd "$ROOT"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
exec "$PY" - "$ROOT" <<'PYEOF'
import fnmatch, os, re, subprocess, sys

root = sys.argv[1]
verbose = os.environ.get("VERBOSE", "") not in ("", "0")

def git_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=root, check=True, capture_output=True).stdout
        names = sorted(set(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p))
    except (OSError, subprocess.CalledProcessError):
        # not a git checkout (a copy): every file under root, without .git
        names = []
        for d, subdirs, files in os.walk(root):
            subdirs[:] = [s for s in subdirs if s != ".git"]
            for f in files:
                names.append(os.path.relpath(os.path.join(d, f), root))
    # a file deleted from the work tree but still in the index is not in the tree
    return [n for n in names if os.path.isfile(os.path.join(root, n))]

files = git_files()
tree = set(files)
for f in files:
    d = os.path.dirname(f)
    while d and d not in tree:
        tree.add(d)
        d = os.path.dirname(d)

# .gitignore patterns (the repository's own file; enough of gitignore's rules for it)
ignore = []
try:
    with open(os.path.join(root, ".gitignore"), encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#") or line.startswith("!"):
                continue
            anchored = line.startswith("/") or "/" in line.rstrip("/")
            ignore.append((line.strip("/"), anchored))
except OSError:
    pass

def ignored(path):
    path = path.strip("/")
    parts = path.split("/")
    for pat, anchored in ignore:
        if anchored:
            # the pattern names this path or one of its folders
            n = pat.count("/") + 1
            if len(parts) >= n and fnmatch.fnmatchcase("/".join(parts[:n]), pat):
                return True
        else:
            if any(fnmatch.fnmatchcase(p, pat) for p in parts):
                return True
    return False

SELF = "tests/test_refs.sh"                  # its comments and patterns name examples, not files
def skip_file(f):
    return f == SELF or f.startswith("third_party/") or f.endswith(".png")

def expand_braces(p):
    m = re.search(r"\{([^{}]*)\}", p)
    if not m:
        return [p]
    out = []
    for alt in m.group(1).split(","):
        out.extend(expand_braces(p[:m.start()] + alt + p[m.end():]))
    return out

globcache = {}
def glob_match(pat):
    if pat not in globcache:
        globcache[pat] = any(fnmatch.fnmatchcase(t, pat) for t in tree)
    return globcache[pat]

PLACEHOLDER = re.compile(r"(?<![a-z])[A-Z][A-Z0-9_]*[A-Z0-9](?![a-z])")
def resolves(path):
    """True when path (a file or folder, a glob, a {a,b} list) names something in the tree."""
    path = path.rstrip("/")
    if path in ("", "."):
        return True
    alts = expand_braces(path)
    for a in alts:
        a = os.path.normpath(a)
        if a in tree or ignored(a):
            continue
        if any(c in a for c in "*?[") and (glob_match(a) or ignored(a)):
            continue
        # placeholders in capitals (DIR, NAME, TARGET, NNN) stand for any name
        g = PLACEHOLDER.sub("*", a)
        if g != a and (glob_match(g) or ignored(g)):
            continue
        return False
    return True

def slug(text):
    s = text.strip().lower()
    s = re.sub(r"<[^>]+>", "", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")

anchorcache = {}
def anchors(mdfile):
    if mdfile not in anchorcache:
        seen, out = {}, set()
        try:
            with open(os.path.join(root, mdfile), encoding="utf-8", errors="replace") as fh:
                infence = False
                for line in fh:
                    if line.lstrip().startswith("```"):
                        infence = not infence
                        continue
                    m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                    if m and not infence:
                        s = slug(m.group(1))
                        k = seen.get(s, 0)
                        out.add(s if k == 0 else "%s-%d" % (s, k))
                        seen[s] = k + 1
        except OSError:
            pass
        anchorcache[mdfile] = out
    return anchorcache[mdfile]

# references by path: a repository prefix, or a top-level name, not inside another path
PATHCH = r"[A-Za-z0-9_.*?{},+%<>$\-\[\]/]"
PREFIXED = re.compile(r"(?<![A-Za-z0-9_./~$\-])((?:llmc|dev|doc|scripts|tests|cuemu|third_party|\.ci)/" + PATHCH + r"*)")
TOPLEVEL = re.compile(r"(?<![A-Za-z0-9_./~$\-])((?:train_gpt\w*|test_\w+)\.(?:cu|c)|Makefile|README\.md|CONTRIBUTING\.md|\.gitignore)(?![A-Za-z0-9_])")
MDLINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SPEC_WORD = "SP" + "EC"                      # spelled apart so this file does not cite itself
SPECREFS = re.compile(r"(\b" + SPEC_WORD + r"(?:\s+sections?\s+\d+(?:\.\d+)*|\.md|'s|\b)|\.\./shar" + r"ed\b)")

def clean(p):
    p = p.split("#", 1)[0]
    p = re.sub(r":\d+(?:[-:]\d+)*$", "", p)           # file:line, file:line:col
    while True:
        q = p.rstrip(".,;:!?'\"`>")
        # a closing bracket or brace left at the end without its opening one
        if q.endswith("]") and q.count("[") < q.count("]") or q.endswith("}") and q.count("{") < q.count("}"):
            q = q[:-1]
        if q == p:
            return p
        p = q

def placeholders(p):
    """Make pattern %, <arch>, {name} (a format field, no comma) are wildcards."""
    p = re.sub(r"%[-0-9]*l*[dsuxf]", "*", p)        # printf: resources_sm%d.tsv
    p = p.replace("%", "*")                         # make: fuzz_%.c
    p = re.sub(r"<[^<>/]*>", "*", p)
    p = re.sub(r"\{[^{},]*\}", "*", p)
    return p

passed, failed = 0, []
def report(f, ln, ok, what):
    global passed
    if ok:
        passed += 1
        if verbose:
            print("%s:%d: ok %s" % (f, ln, what))
    else:
        failed.append("%s:%d: missing %s" % (f, ln, what))

for f in files:
    if skip_file(f):
        continue
    try:
        with open(os.path.join(root, f), "rb") as fh:
            data = fh.read()
    except OSError:
        continue
    if b"\0" in data[:8192]:
        continue                                    # binary
    text = data.decode("utf-8", "replace")
    is_md = f.endswith(".md")
    base = os.path.dirname(f)
    for ln, line in enumerate(text.splitlines(), 1):
        rest = line
        # markdown links (any file may hold them; .md files mostly)
        for m in (MDLINK.finditer(line) if is_md else ()):
            target = m.group(1)
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:", target) or target.startswith("//"):
                continue                            # http:, mailto:, ...
            path, _, anchor = target.partition("#")
            if path.startswith("/"):
                rel = os.path.normpath(path.lstrip("/"))
            elif path:
                rel = os.path.normpath(os.path.join(base, path))
            else:
                rel = f                             # #anchor in this file
            if rel.startswith(".."):
                report(f, ln, False, target + " (outside the repository)")
                continue
            ok = resolves(rel)
            if ok and anchor and rel.endswith(".md") and rel in tree:
                if anchor.lower() not in anchors(rel):
                    report(f, ln, False, "%s#%s (no such heading)" % (rel, anchor))
                    continue
            report(f, ln, ok, rel + ("#" + anchor if anchor else ""))
        if is_md:
            rest = MDLINK.sub(lambda m: m.group(0)[: m.group(0).index("](")] + "]", line)
        for rx in (PREFIXED, TOPLEVEL):
            for m in rx.finditer(rest):
                p = clean(m.group(1))
                if not p or "//" in p or "$" in p:
                    continue                        # built in code from pieces ($VAR, $(VAR))
                q = placeholders(p)
                ok = resolves(q)
                if not ok and rx is TOPLEVEL and base:
                    ok = resolves(os.path.join(base, q))   # a bare name beside the file
                report(f, ln, ok, p)
        for m in SPECREFS.finditer(line):
            report(f, ln, False, "%s (outside this repository: cite doc/spec.md)" % m.group(1).strip())

for line in failed:
    print(line)
print("%d passed, %d failed" % (passed, len(failed)))
sys.exit(1 if failed else 0)
PYEOF
