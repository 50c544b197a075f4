# Build, test and quickstart. `make` builds the CPU trainer; `make test` runs every test
# CI runs; `make quickstart` installs, prepares the corpus, builds and trains `tiny`.
CC ?= gcc
CFLAGS ?= -O3 -march=native
CFLAGS += -std=gnu11 -Wall -Wextra -Werror -Wno-unused-function -Wno-format-truncation
LDLIBS = -lm
PY = /usr/bin/python3

# OpenMP when the compiler has it
OMP := $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo -fopenmp)
CFLAGS += $(OMP)

HEADERS = $(wildcard llmc/*.h)

# Open MPI when present: the same binary then runs single-process, or 3D under mpirun
MPICC := $(shell command -v mpicc 2>/dev/null)
ifneq ($(MPICC),)
  TRAIN_CC = OMPI_CC=$(CC) $(MPICC)
  MPI_FLAGS = -DUSE_MPI
else
  TRAIN_CC = $(CC)
  MPI_FLAGS =
endif

.PHONY: all test quickstart data fixtures clean bench test-hf cloze

# the CPU emulation of CUDA (tests only): cuemu-test, cuemu-compile
include dev/cuemu/cuemu.mk
# the CUDA trainer (nvcc for sm_80 and sm_90) and its kernel lab
include dev/cuda/cuda.mk

all: train_gpt

train_gpt: train_gpt.c $(HEADERS)
	$(TRAIN_CC) $(CFLAGS) $(MPI_FLAGS) $< $(LDLIBS) -o $@

# the single-process build without MPI (must always compile)
train_gpt_nompi: train_gpt.c $(HEADERS)
	$(CC) $(CFLAGS) $< $(LDLIBS) -o $@

test_gpt: test_gpt.c train_gpt.c $(HEADERS) dev/test_common.h
	$(TRAIN_CC) $(CFLAGS) $(MPI_FLAGS) $< $(LDLIBS) -o $@

data:
	$(PY) dev/data/prepare_kjv.py --out dev/data/kjv

# the PyTorch reference writes fixtures every time (CI never trusts stale ones)
fixtures:
	$(PY) dev/train_gpt.py --out fixtures > fixtures.log 2>&1 || (cat fixtures.log; exit 1)
	@tail -n 10 fixtures.log

test_planner: test_planner.c llmc/planner.h dev/test_common.h
	$(CC) -O2 -std=c11 -Wall -Wextra -Werror $< -lm -o $@

test_instruments: test_instruments.c llmc/noise.h llmc/spike.h
	$(CC) -O2 -std=gnu11 -Wall -Wextra -Werror $< -lm -o $@

# every test CI runs; each program ends with "N passed, M failed" and fails the target
test: train_gpt train_gpt_nompi test_gpt test_planner test_instruments fixtures data
	./test_planner
	./test_instruments
	bash scripts/check_scripts.sh
	$(PY) dev/calibrate_planner.py --selftest
	bash dev/data/check_tokenizer.sh
	$(PY) dev/data/test_prepare.py
	./test_gpt fixtures
	$(MAKE) --no-print-directory cuemu-test cuemu-compile
	$(MAKE) --no-print-directory test-hf
	$(MAKE) --no-print-directory cuda-build cuda-check-host cuda-check-emu cuda-emu-test

# Hugging Face export/import and the cloze evaluation vs lm-eval (the venv of dev/install.sh)
HF_PY ?= $(HOME)/.cache/llmc/hf-venv/bin/python
test-hf: train_gpt data
	$(HF_PY) dev/eval/test_hf.py

# the cloze set the README's evaluation uses (dev/eval/kjv_cloze.jsonl)
cloze: data
	$(PY) dev/eval/make_cloze.py --out dev/eval/kjv_cloze.jsonl

quickstart:
	bash dev/install.sh
	$(MAKE) data train_gpt
	bash scripts/run_cpu.sh

clean: cuda-clean cuemu-clean
	rm -f train_gpt train_gpt_nompi test_gpt test_planner test_instruments fixtures.log
	rm -rf fixtures
