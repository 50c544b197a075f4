#!/usr/bin/python3
"""ckpt_points.py DIR: puts the test points of tests/attack/ckpt_points.h into the copy of the sources in
DIR (train_gpt.c and llmc/), for the mutant build/mutants/train_gpt_ckpt_points (Makefile). Each point goes
before (or after) an anchor line that must be in its file exactly once; a lost anchor stops the build."""
import os
import sys

# (file, anchor line (stripped), statement, before: 1 / after: 0)
POINTS = [
    ("llmc/host/checkpoint.h", "int ok = write_all(f, hdr->h, sizeof(hdr->h));",
     'ckpt_test_point("before_data", hdr->h[CK_STEP]);', 1),
    ("llmc/host/checkpoint.h", "ok = ok && write_all(f, m, n_opt * sizeof(float));",
     'fflush(f); ckpt_test_point("mid_file", hdr->h[CK_STEP]);', 1),
    ("llmc/host/ckpt_async.h", "double t0 = wall_ms();", 'ckpt_test_point("write", a->step);', 1),
    ("llmc/host/ckpt_rank.h", "if (ok) ok = ckpt_mark_done(tmp) == 0 && ckpt_install(tmp, dir) == 0;",
     'if (ok) ckpt_test_point("before_done", ckpt_name_step(dir));', 1),
]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ckpt_points.py DIR (a copy of train_gpt.c and llmc/)")
    for path, anchor, stmt, before in POINTS:
        full = os.path.join(sys.argv[1], path)
        lines = open(full).read().split("\n")
        hits = [i for i, ln in enumerate(lines) if ln.strip() == anchor]
        if len(hits) != 1:
            sys.exit("error: ckpt_points.py: '%s' is %d times in %s, not once: update tests/attack/ckpt_points.py"
                     % (anchor, len(hits), path))
        i = hits[0]
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        lines.insert(i if before else i + 1, indent + stmt)
        open(full, "w").write("\n".join(lines))
    print("ckpt_points.py: %d test points in %s" % (len(POINTS), sys.argv[1]))


if __name__ == "__main__":
    main()
