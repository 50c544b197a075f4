# Build, test and quickstart. `make` builds the CPU trainer; `make test` runs every test
# CI runs; `make quickstart` installs, prepares the corpus, builds and trains `tiny`.
CC ?= gcc
CFLAGS ?= -O3 -march=native
# -ffp-contract=off: a*b+c is never silently fused, so the kernels round the same on every
# x86 machine (the GEMM fuses explicitly with fmaf; see llmc/cpu/cpu_gemm.h)
CFLAGS += -ffp-contract=off
# -fno-math-errno: sqrtf need not set errno, so loops with it (AdamW) use vector square roots
# and divides, which round exactly like the scalar ones (IEEE): the bits stay the same
CFLAGS += -fno-math-errno
# -fno-trapping-math: FP exception flags are never read, so loops with comparisons (the
# clamps of llmc/cpu/cpu_math.h's exp) may be if-converted and vectorized; values are unchanged
CFLAGS += -fno-trapping-math
# CPU_WERROR= (empty) allows warnings: dev/gpu_check.sh builds with it under the device's unknown gcc
CPU_WERROR ?= -Werror
CFLAGS += -std=gnu11 -Wall -Wextra $(CPU_WERROR) -Wno-unused-function -Wno-format-truncation
LDLIBS = -lm
PY = /usr/bin/python3

# OpenMP when the compiler has it
OMP := $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo -fopenmp)
CFLAGS += $(OMP)

HEADERS = $(wildcard llmc/host/*.h llmc/cpu/*.h llmc/planner/*.h)

# Open MPI when present: the same binary then runs single-process, or 3D under mpirun
MPICC := $(shell command -v mpicc 2>/dev/null)
ifneq ($(MPICC),)
  TRAIN_CC = OMPI_CC=$(CC) $(MPICC)
  MPI_FLAGS = -DUSE_MPI
else
  TRAIN_CC = $(CC)
  MPI_FLAGS =
endif

.PHONY: lint format gpu-rehearsal torch-device-venv all test check test-bins quickstart data fixtures clean bench \
    attack fuzz asan test-hf cloze

# the CPU emulation of CUDA (tests only): cuemu-test, cuemu-compile
include cuemu/cuemu.mk
# the CUDA trainer (nvcc for sm_80 and sm_90) and its kernel lab
include dev/cuda/cuda.mk

all: train_gpt

train_gpt: train_gpt.c $(HEADERS)
	$(TRAIN_CC) $(CFLAGS) $(MPI_FLAGS) $< $(LDLIBS) -o $@

# the single-process build without MPI (must always compile)
train_gpt_nompi: train_gpt.c $(HEADERS)
	$(CC) $(CFLAGS) $< $(LDLIBS) -o $@

# a mutant of train_gpt.c in which rank 0 skips the tied embedding's all-reduce of step 3: the
# deadlock whose both sides the watchdog must name (tests/attack/family_hang.sh). The build
# fails if the line is gone.
DEADLOCK_LINE = emb_allreduce_sum(comm, gpt_grad(g, PT_WTE, 0)
build/mutants/train_gpt_deadlock: train_gpt.c $(HEADERS)
	@mkdir -p build/mutants
	@[ "$$(grep -cF '$(DEADLOCK_LINE)' $<)" = 1 ] || { echo "error: '$(DEADLOCK_LINE)' is not once in $<"; exit 1; }
	sed 's/$(DEADLOCK_LINE)/if (!(comm->rank == 0 \&\& t->run.step == 2)) &/' $< > build/mutants/train_gpt.c
	$(TRAIN_CC) $(CFLAGS) $(MPI_FLAGS) -I. build/mutants/train_gpt.c $(LDLIBS) -o $@

# a mutant of train_gpt.c with named points in the checkpoint write (tests/attack/ckpt_points.h):
# kill -9 at a chosen point of a chosen save, or a slow write, for tests/attack/family_async.sh.
# A copy of the sources is edited (tests/attack/ckpt_points.py fails if an anchor line is gone).
build/mutants/train_gpt_ckpt_points: train_gpt.c $(HEADERS) tests/attack/ckpt_points.h tests/attack/ckpt_points.py
	@rm -rf build/mutants/ckpt && mkdir -p build/mutants/ckpt && cp -r train_gpt.c llmc build/mutants/ckpt/
	$(PY) tests/attack/ckpt_points.py build/mutants/ckpt
	$(TRAIN_CC) $(CFLAGS) $(MPI_FLAGS) -include tests/attack/ckpt_points.h build/mutants/ckpt/train_gpt.c $(LDLIBS) \
	    -o $@

TEST_GPT_DEPS = test_gpt.c train_gpt.c $(HEADERS) tests/common.h tests/sp_vpp.h tests/zb.h tests/zero_cases.h \
    tests/cp_cases.h tests/trainer_cases.h \
    tests/fixture.h
test_gpt: $(TEST_GPT_DEPS)
	$(TRAIN_CC) $(CFLAGS) $(MPI_FLAGS) $< $(LDLIBS) -o $@

data:
	$(PY) dev/data/prepare_kjv.py --out dev/data/kjv

# the PyTorch reference writes fixtures every time (CI never trusts stale ones)
fixtures:
	$(PY) dev/train_gpt.py --out fixtures > fixtures.log 2>&1 || (cat fixtures.log; exit 1)
	@tail -n 10 fixtures.log

# comm.h's chunked MPI calls under the MPI profiling interface (built only with MPI)
test_comm: tests/test_comm.c llmc/host/comm.h llmc/host/zero.h llmc/host/colltrace.h llmc/host/layout.h \
    llmc/host/utils.h tests/common.h
	$(TRAIN_CC) $(CFLAGS) $(MPI_FLAGS) $< $(LDLIBS) -o $@

test_planner: tests/test_planner.c llmc/planner/planner.h tests/common.h
	$(CC) -O2 -std=c11 -Wall -Wextra -Werror $< -lm -o $@

# the CPU GEMM, bit for bit against a plain fmaf loop (every ISA this CPU has, 1-3 threads)
test_cpu_gemm: tests/test_cpu_gemm.c llmc/cpu/cpu_gemm.h llmc/cpu/cpu_math.h
	$(CC) $(CFLAGS) $< $(LDLIBS) -o $@

# the collective trace's deadlock analysis on hand-written records (llmc/host/colltrace.h)
test_colltrace: tests/test_colltrace.c llmc/host/colltrace.h tests/common.h
	$(CC) -O2 -std=gnu11 -Wall -Wextra -Werror -Wno-unused-function $< -o $@

test_instruments: tests/test_instruments.c llmc/host/noise.h llmc/host/spike.h
	$(CC) -O2 -std=gnu11 -Wall -Wextra -Werror $< -lm -o $@

# the reliability suite (doc/reliability.md): the attack families against the trainer,
# bounded libFuzzer runs of every file and flag parser, the test build under ASan+UBSan
FUZZ_TARGETS = shard tokenizer flags ckpt cloze blend bpe record
FUZZ_SECONDS ?= 60
FUZZ_BINS = $(addprefix tests/fuzz/bin/fuzz_,$(FUZZ_TARGETS))
SAN_FLAGS = -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# the main build's CPU and rounding flags: the same numbers, and fmaf inlined (without FMA enabled
# every fmaf is a libm call, which ran the ASan steps 8x slower on an Intel Xeon than with it)
SAN_CPU = -march=native -ffp-contract=off -fno-math-errno -fno-trapping-math

tests/fuzz/bin/fuzz_%: tests/fuzz/fuzz_%.c $(HEADERS)
	@mkdir -p tests/fuzz/bin
	clang -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all $< -lm -o $@

# the CPU GEMM's pack offsets, chunk tables and edge tiles under ASan+UBSan (with OpenMP:
# the threads' bounds are what it checks)
test_cpu_gemm_asan: tests/test_cpu_gemm.c llmc/cpu/cpu_gemm.h llmc/cpu/cpu_math.h
	$(CC) $(SAN_FLAGS) $(SAN_CPU) -std=gnu11 -Wall -Wextra -Werror -Wno-unused-function -fopenmp $< -lm -o $@

# single process, no MPI, no OpenMP (its runtime is not instrumented)
test_gpt_asan: $(TEST_GPT_DEPS)
	$(CC) $(SAN_FLAGS) $(SAN_CPU) -std=gnu11 -Wall -Wextra -Werror -Wno-unused-function -Wno-format-truncation \
	    -Wno-unknown-pragmas $< -lm -o $@

# the trainer itself under ASan+UBSan: single process, no MPI, no OpenMP (tests/attack/asan.sh runs
# the run-record, resume, signal, blend and checkpoint families with it)
train_gpt_asan: train_gpt.c $(HEADERS)
	$(CC) $(SAN_FLAGS) $(SAN_CPU) -std=gnu11 -Wall -Wextra -Werror -Wno-unused-function -Wno-format-truncation \
	    -Wno-unknown-pragmas $< -lm -o $@

attack: train_gpt data build/mutants/train_gpt_ckpt_points $(if $(MPICC),build/mutants/train_gpt_deadlock)
	bash tests/attack/run.sh

fuzz: $(FUZZ_BINS)
	bash tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

asan: test_gpt_asan fixtures
	./test_gpt_asan fixtures --quick

# the house style a program can check (CONTRIBUTING.md): 120 columns, one statement per line,
# clang-format's layout; `make format` applies clang-format to every C, C++ and CUDA source
lint:
	python3 tests/lint.py
format:
	git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cpp' | grep -v '^third_party/' | xargs clang-format -i

# every test CI runs (tests/suite.py: each step under its own time limit, a hang ends with the
# stacks of where it hung, side by side up to TEST_JOBS cores, then a table of seconds and checks
# per step). The binaries (and fixtures, corpus) first, TEST_JOBS at a time, each recipe line
# timed by tests/timed_sh.sh for that table.
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
TEST_BINS = train_gpt train_gpt_nompi test_gpt test_planner test_instruments test_colltrace test_cpu_gemm fixtures \
    data $(if $(MPICC),test_comm build/mutants/train_gpt_deadlock) build/mutants/train_gpt_ckpt_points test_gpt_asan \
    test_cpu_gemm_asan train_gpt_asan $(FUZZ_BINS) \
    $(CUEMU_TEST_BINS) $(CUDA_TEST_BINS)
TIMED = SHELL=$(CURDIR)/tests/timed_sh.sh
# each GPU arch's device code compiled once: the MPI build for sm_80 here, gpu-prebuilt's (no MPI) for sm_90;
# cuda-resources-check reads sm_90 from the latter (the kernels are the same). make cuda-build alone: both.
TEST_CUDA_ARCHS ?= 80
test-bins: $(TEST_BINS)
test:
	@mkdir -p build/suite && rm -f build/suite/build_times.tsv
	$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target test-bins CUDA_ARCHS="$(TEST_CUDA_ARCHS)" $(TIMED)
	CUDA_ARCHS="$(TEST_CUDA_ARCHS)" TEST_JOBS=$(TEST_JOBS) $(PY) tests/suite.py test

# the inner loop (CONTRIBUTING.md): the trainer against the fixtures, one 2x2x2 layout, the
# planner, lint, and the attack families whose sources changed since the last commit (those that
# need a mutant build it in their own step)
CHECK_BINS = train_gpt test_gpt test_planner test_colltrace fixtures data
check:
	@mkdir -p build/suite && rm -f build/suite/build_times.tsv
	$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target $(CHECK_BINS) $(TIMED)
	TEST_JOBS=$(TEST_JOBS) $(PY) tests/suite.py check

# the first GPU run's dress rehearsal: the device command of doc/gpu_check.md end to end on the CPU,
# in a copy of what the device gets, with the device's PyTorch 2.11 and numpy 2 (a venv)
TORCH_DEVICE_VENV ?= $(HOME)/.cache/llmc/torch-device-venv
TORCH_DEVICE_PINS = torch==2.11.0 'numpy>=2,<3'
$(TORCH_DEVICE_VENV)/bin/python:
	rm -rf $(TORCH_DEVICE_VENV)
	python3 -m venv $(TORCH_DEVICE_VENV)
	$(TORCH_DEVICE_VENV)/bin/pip install -q $(TORCH_DEVICE_PINS) || { rm -rf $(TORCH_DEVICE_VENV); echo \
	    "error: pip could not install $(TORCH_DEVICE_PINS) (PyPI reachable?): make gpu-rehearsal needs them"; \
	    exit 1; }
torch-device-venv: $(TORCH_DEVICE_VENV)/bin/python
gpu-rehearsal: $(CUDA_BUILD)-emu-nompi/train_gpt_cu $(CUDA_BUILD)-emu-nompi/test_gpt_cu \
    $(CUDA_BUILD)-emu/test_attention $(TORCH_DEVICE_VENV)/bin/python $(if $(NVCC),gpu-prebuilt) \
    $(if $(wildcard fixtures/fixture.bin),,fixtures)
	TORCH_DEVICE_PY=$(TORCH_DEVICE_VENV)/bin/python bash tests/test_gpu_rehearsal.sh

# Hugging Face export/import, the cloze evaluation vs lm-eval, data curation (the venv of dev/install.sh),
# and the C BPE encoder of -prompt-text vs the tokenizers library
HF_PY ?= $(HOME)/.cache/llmc/hf-venv/bin/python
test-hf: train_gpt data
	$(HF_PY) tests/data/test_bpe.py
	$(HF_PY) tests/test_hf.py
	$(HF_PY) tests/fuzz/fuzz_import_hf.py
	$(HF_PY) tests/test_track.py
	$(HF_PY) tests/data/test_curation.py

# the cloze set the README's evaluation uses (dev/eval/kjv_cloze.jsonl)
cloze: data
	$(PY) dev/eval/make_cloze.py --out dev/eval/kjv_cloze.jsonl

quickstart:
	bash dev/install.sh
	$(MAKE) data train_gpt
	bash scripts/run_cpu.sh

clean: cuda-clean cuemu-clean
	rm -f train_gpt train_gpt_nompi train_gpt_asan test_gpt test_gpt_asan test_cpu_gemm_asan test_comm test_planner \
	    test_instruments test_colltrace test_cpu_gemm fixtures.log
	rm -rf tests/fuzz/bin
	rm -rf fixtures
