#!/usr/bin/python3
"""test_plan_memory.py: -plan's "memory per rank" rows equal the CPU trainer's own. For every
ZeRO level (0-3) and the layouts 1x1x4 (TP x PP x DP), 2x2x2 with -sp 1, 1x2x2 with -vpp 2 and
1x2x2 under -pp-schedule zb-h1 (and one 2x2x2 ZeRO-3 case with LLMC_MPI_CHUNK=1000, whose
chunked collectives need other staging), and the context-parallel layouts -cp 2 (ZeRO 0 and 1),
-tp 2 -cp 2 -sp 1 (ZeRO 2) and -cp 2 -pp 2 (ZeRO 3), where ZeRO shards over the CP x DP group
and the activation slots follow DP alone (the batch does not change with CP), it runs the
trainer with -steps 0 under mpirun, reads
the start-up table's row

    | memory per rank | params A MiB | grads B MiB | optimizer C MiB | activations D MiB | total E MiB |

(the trainer's ledger of what rank 0 allocated), runs `train_gpt -plan` with the same flags,
every layout flag given, and reads its row `memory per rank (stage 0): params A MiB | ...`; the
five figures must be equal. Both are printed with 3 decimals of MiB, so equal means equal to a
KiB. Beside it, what the ZeRO levels must do to the trainer's own figures on 1x1x4: the
optimizer state 1/4 of plain AdamW's at every level, fewer gradient bytes at -zero 2 than at 1;
and what CP must do: -cp 2 -zero 1 holds half of -zero 0's optimizer state (its two CP ranks are
the ZeRO group though DP is 1), the weights of one process, and fewer activation bytes.

The same for the CUDA trainer where its emulated build is there (build/cuda-emu/train_gpt_cu, or
LLMC_TRAIN_GPT_CU): its start-up row counts its device allocations, and its -plan prints
memplan.h's mem_plan_cuda for the same layout, on 1x1x4 ZeRO 0-3 over NCCL, 2x2x2 -sp 1
-vpp 2 ZeRO 3, 1x2x2 zb-h1 over MPI, naive attention, and -cp 2 ZeRO 3.

    python3 tests/test_plan_memory.py          # needs ./train_gpt (make train_gpt), mpirun, make data
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, summary  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train_gpt")
MPIRUN = ["mpirun", "--oversubscribe"] + (["--allow-run-as-root"] if os.getuid() == 0 else [])
# the tiny preset at -seq 32: 8 sequences of 1 per step (m = 4 with DP 2, 2 with DP 4)
BASE = ["-model", "tiny", "-seq", "32", "-V", "8192", "-gb", "8", "-mb", "1", "-ramp", "off", "-threads", "1",
        "-recompute", "0", "-j", ""]
ROW = re.compile(r"params ([0-9.]+) MiB \| grads ([0-9.]+) MiB \| optimizer ([0-9.]+) MiB \| "
                 r"activations ([0-9.]+) MiB \| total ([0-9.]+) MiB")
# name, ranks, layout flags
LAYOUTS = [
    ("1x1x4", 4, ["-tp", "1", "-pp", "1", "-dp", "4", "-sp", "0", "-vpp", "1", "-pp-schedule", "1f1b"]),
    ("2x2x2 -sp 1", 8, ["-tp", "2", "-pp", "2", "-dp", "2", "-sp", "1", "-vpp", "1", "-pp-schedule", "1f1b"]),
    ("1x2x2 -vpp 2", 4, ["-tp", "1", "-pp", "2", "-dp", "2", "-sp", "0", "-vpp", "2", "-pp-schedule", "1f1b"]),
    ("1x2x2 zb-h1", 4, ["-tp", "1", "-pp", "2", "-dp", "2", "-sp", "0", "-vpp", "1", "-pp-schedule", "zb-h1",
                        "-recompute", "selective"]),
]
# context parallelism, -cp pinned as the other layout flags are: name, ranks, flags, ZeRO levels
ONE = ["-sp", "0", "-vpp", "1", "-pp-schedule", "1f1b"]
CP_LAYOUTS = [
    ("-cp 2", 2, ["-tp", "1", "-cp", "2", "-pp", "1", "-dp", "1"] + ONE, [0, 1]),
    ("-tp 2 -cp 2 -sp 1", 4, ["-tp", "2", "-cp", "2", "-pp", "1", "-dp", "1", "-sp", "1", "-vpp", "1",
                              "-pp-schedule", "1f1b"], [2]),
    ("-cp 2 -pp 2", 4, ["-tp", "1", "-cp", "2", "-pp", "2", "-dp", "1"] + ONE, [3]),
]


TRAIN_CU = os.environ.get("LLMC_TRAIN_GPT_CU", os.path.join(ROOT, "build", "cuda-emu", "train_gpt_cu"))
CU_ENV = {"CUEMU_DEVICES": "8", "CUEMU_STREAM_RACES": "0"}
# the CUDA trainer's cases: name, ranks, layout flags (every one given), environment
CU_CASES = [(f"1x1x4 -zero {z} -comm nccl", 4, LAYOUTS[0][2] + ["-zero", str(z), "-comm", "nccl"], {})
            for z in range(4)]
CU_CASES += [
    ("2x2x2 -sp 1 -vpp 2 -zero 3 -comm nccl", 8,
     ["-tp", "2", "-pp", "2", "-dp", "2", "-sp", "1", "-vpp", "2", "-pp-schedule", "1f1b", "-zero", "3",
      "-comm", "nccl"], {}),
    ("1x2x2 zb-h1 -zero 1 -comm mpi", 4, LAYOUTS[3][2] + ["-zero", "1", "-comm", "mpi"], {}),
    ("1x1x4 -zero 1 LLMC_ATTENTION=naive", 4, LAYOUTS[0][2] + ["-zero", "1", "-comm", "nccl"],
     {"LLMC_ATTENTION": "naive"}),
    ("-cp 2 -zero 3 -comm nccl", 2, CP_LAYOUTS[0][2] + ["-zero", "3", "-comm", "nccl"], {}),
]


def run(cmd, env=None):
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS="1", **(env or {})))
    return p.returncode, p.stdout.decode(errors="replace")


def trainer_row(ranks, flags, env, train=TRAIN):
    xs = [a for k in env for a in ("-x", k)]
    rc, out = run(MPIRUN + xs + ["-np", str(ranks), train] + BASE + flags + ["-steps", "0"], env)
    for line in out.splitlines():
        if line.startswith("| memory per rank"):
            m = ROW.search(line)
            if m:
                return [float(x) for x in m.groups()], out
    return None, out if rc else out + "\n(no memory per rank row)"


def plan_rows(ranks, flags, env, train=TRAIN):
    """-plan's rows: {stage: figures}, and which stage it marks as the most"""
    rc, out = run([train, "-plan"] + BASE + flags +
                  ["-cluster", "selene-a100", "-nodes", "1", "-gpus-per-node", str(ranks)], env)
    rows, most = {}, None
    for line in out.splitlines():
        m = re.match(r"\s*memory per rank \(stage (\d+)\): ", line)
        if m and ROW.search(line):
            rows[int(m.group(1))] = [float(x) for x in ROW.search(line).groups()]
            if line.rstrip().endswith("(the most)"):
                most = int(m.group(1))
    return rows, most, out


def main():
    if not os.access(TRAIN, os.X_OK):
        print("test_plan_memory.py: ./train_gpt is missing: run 'make train_gpt' first", file=sys.stderr)
        return 1
    cases = [(name, ranks, flags + ["-zero", str(z)], {}) for name, ranks, flags in LAYOUTS for z in range(4)]
    cases.append(("2x2x2 -sp 1", 8, LAYOUTS[1][2] + ["-zero", "3"], {"LLMC_MPI_CHUNK": "1000"}))
    cases += [(name, ranks, flags + ["-zero", str(z)], {}) for name, ranks, flags, zs in CP_LAYOUTS for z in zs]
    one, _ = trainer_row(1, ["-tp", "1", "-pp", "1", "-dp", "1"] + ONE + ["-zero", "0"], {})
    got = {}
    for name, ranks, flags, env in cases:
        what = f"{name} -zero {flags[-1]}" + (" " + " ".join(f"{k}={v}" for k, v in env.items()) if env else "")
        mine, tout = trainer_row(ranks, flags, env)
        rows, most, pout = plan_rows(ranks, flags, env)
        if mine is None or 0 not in rows:
            check(False, f"{what}: both print the row (trainer: {mine is not None}, -plan: {0 in rows})")
            print((tout if mine is None else pout)[-1500:])
            continue
        got[what] = mine
        check(mine == rows[0], f"{what}: -plan's stage 0 row {rows[0]} == the trainer's {mine} "
                               "(params, grads, optimizer, activations, total MiB)")
        pp = int(flags[flags.index("-pp") + 1])
        check(most is not None and most < pp and all(sum(rows[most][:4]) >= sum(r[:4]) - 0.01 for r in rows.values()),
              f"{what}: -plan marks the stage whose rank holds the most (stage {most} of {pp})")
    if os.access(TRAIN_CU, os.X_OK):
        for name, ranks, flags, env in CU_CASES:
            env = dict(CU_ENV, **env)
            mine, tout = trainer_row(ranks, flags, env, TRAIN_CU)
            rows, _, pout = plan_rows(ranks, flags, env, TRAIN_CU)
            if mine is None or 0 not in rows:
                check(False, f"train_gpt_cu {name}: both print the row (trainer: {mine is not None}, -plan: {0 in rows})")
                print((tout if mine is None else pout)[-1500:])
                continue
            check(mine == rows[0], f"train_gpt_cu {name}: -plan's stage 0 row {rows[0]} == the trainer's device "
                                   f"allocations {mine} (MiB)")
    else:
        print(f"note: {TRAIN_CU} is missing (make build/cuda-emu/train_gpt_cu): the CUDA trainer's rows NOT compared")
    # what the levels do to the trainer's own figures (1x1x4: the flat buffer splits evenly)
    z = [got.get(f"1x1x4 -zero {k}") for k in range(4)]
    if all(z):
        check(all(abs(z[k][2] - z[0][2] / 4) < 0.002 for k in (1, 2, 3)),
              f"1x1x4: optimizer state at -zero 1/2/3 {[x[2] for x in z[1:]]} MiB = 1/4 of -zero 0's {z[0][2]}")
        check(z[2][1] < z[1][1] and z[2][0] == z[1][0] == z[0][0],
              f"1x1x4: -zero 2 holds fewer gradient bytes than -zero 1 ({z[2][1]} < {z[1][1]} MiB) and the same "
              f"weights as -zero 0 and 1 ({z[2][0]} MiB)")
    c0, c1 = got.get("-cp 2 -zero 0"), got.get("-cp 2 -zero 1")
    check(one is not None and c0 is not None and c1 is not None and abs(c1[2] - c0[2] / 2) < 0.002 and
          c1[0] == c0[0] == one[0] and c0[3] < one[3],
          f"-cp 2: ZeRO-1 optimizer state {c1 and c1[2]} MiB = 1/2 of -zero 0's {c0 and c0[2]} (sharded over the CP "
          f"ranks); weights {c0 and c0[0]} MiB as one process's {one and one[0]}; activations {c0 and c0[3]} < "
          f"{one and one[3]} MiB")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
