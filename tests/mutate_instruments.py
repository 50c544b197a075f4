#!/usr/bin/python3
"""Mutation check for tests/test_instruments.c: break llmc/host/noise.h or llmc/host/spike.h in one place
at a time (a wrong formula, a missing guard, an off-by-one) and confirm that
test_instruments fails each time. Shows that every check can fail.

    /usr/bin/python3 tests/mutate_instruments.py       # from the repository root; ~3 minutes on 2 cores

Prints CAUGHT or MISSED per mutation and the checks that failed; exit 1 if any was missed.
"""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (header, original text, broken text, what the break is)
MUTATIONS = [
    ("noise.h", "/ (b_big - b_small);", "/ b_big;", "G2: wrong denominator"),
    ("noise.h", "(1.0 / b_small - 1.0 / b_big);", "(1.0 / b_small);", "S: wrong denominator"),
    ("noise.h", "st->g2_m / (1.0 - st->beta_pow)", "st->g2_m", "EMA: no bias correction"),
    ("noise.h", "return s / g2;", "return g2 / s;", "B_simple inverted"),
    ("noise.h", "return sumsq * r * r;", "return sumsq * r;", "group rescale linear, not squared"),
    ("noise.h", "if (next > final_gb ||", "if (next > final_gb + inc ||", "ramp: may exceed the final batch"),
    ("noise.h", "if (b_simple >= (double)next) return next;", "if (b_simple >= (double)next) return next + inc;", "ramp: two increments"),
    ("noise.h", "if (b_simple >= (double)next) return next;\n    return cur;",
     "if (b_simple >= (double)next) return next;\n    return b_simple < (double)cur / 2 ? on_grid - inc : cur;", "ramp: shrinks"),
    ("noise.h", "!isfinite(b_simple) || ", "", "ramp: grows on a non-finite B_simple"),
    ("noise.h", "if (b_simple >= (double)next)", "if (b_simple >= (double)cur)", "ramp: grows one increment early"),
    ("spike.h", "g->n >= g->min_samples", "g->n >= 2", "spike: min_samples ignored"),
    ("spike.h", "if (!isfinite(loss) || !isfinite(gnorm))", "if (!isfinite(loss))", "spike: non-finite grad norm not caught"),
    ("spike.h", "g->consecutive >= K;", "g->consecutive >= K - 1;", "spike: stops one skip early"),
    ("spike.h", "loss > ml + z * sl", "fabs(loss - ml) > z * sl", "spike: two-sided"),
    ("spike.h", "if (sl < g->rel_floor * fabs(ml)) sl = g->rel_floor * fabs(ml);", "", "spike: no sd floor"),
    ("spike.h", "g->consecutive++; g->n_spike++;",
     "g->consecutive++; g->n_spike++; g->loss[g->head] = loss; g->gnorm[g->head] = gnorm; g->head = (g->head + 1) % g->W; if (g->n < g->W) g->n++;",
     "spike: skipped values enter the window"),
    ("spike.h", "    g->consecutive = 0;\n    g->n_accepted++;", "    g->n_accepted++;", "spike: accepted step does not reset the count"),
    ("spike.h", "gnorm > mg + z * sg", "gnorm > mg + z * sg * 100", "spike: grad-norm spikes ignored"),
]


def main():
    missed = 0
    cc = os.environ.get("CC", "gcc")
    for header, old, new, what in MUTATIONS:
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "llmc"))
            shutil.copy(os.path.join(ROOT, "tests/test_instruments.c"), d)
            for h in ("noise.h", "spike.h"):
                shutil.copy(os.path.join(ROOT, "llmc", h), os.path.join(d, "llmc", h))
            path = os.path.join(d, "llmc", header)
            src = open(path).read()
            if old not in src:
                print(f"STALE  {what}: '{old[:40]}' is no longer in llmc/{header}: update this list")
                missed += 1
                continue
            open(path, "w").write(src.replace(old, new, 1))
            build = subprocess.run([cc, "-O2", "-std=gnu11", "-w", "tests/test_instruments.c", "-lm", "-o", "t"],
                                   cwd=d, capture_output=True, text=True)
            if build.returncode != 0:
                print(f"NOBUILD {what}: {build.stderr.strip()[:200]}")
                missed += 1
                continue
            run = subprocess.run(["./t"], cwd=d, capture_output=True, text=True)
            fails = [line[5:60] for line in run.stdout.splitlines() if line.startswith("FAIL")]
            if run.returncode != 0 and fails:
                print(f"CAUGHT {what}: {'; '.join(fails)[:160]}")
            else:
                print(f"MISSED {what}")
                missed += 1
    print(f"{len(MUTATIONS) - missed} caught, {missed} missed")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
