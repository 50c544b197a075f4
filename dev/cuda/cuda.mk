# dev/cuda/cuda.mk - Makefile fragment for the CUDA trainer and its kernel lab. Include it
# from the top Makefile:   include dev/cuda/cuda.mk
# Targets:
#   cuda-build        train_gpt_cu and test_gpt_cu with nvcc for every arch in CUDA_ARCHS
#                     (default sm_80 and sm_90, one fat binary each), device and host
#                     warnings as errors, linked against cuBLASLt, cuBLAS, NCCL and MPI
#                     (MPI when mpicxx is found; else a single-process build). Skipped with
#                     a message when nvcc is absent.
#   cuda-check-build  the standalone kernel checks dev/cuda/check_*.cu (nvcc, same flags)
#   cuda-check-run    runs them (needs a GPU)
#   cuda-check-emu    builds the kernel checks with g++ under the CPU emulation (dev/cuemu)
#                     and runs them (no GPU needed); check_matmul needs cuemu's cuBLASLt
#   cuda-check-host   the host-only check of the grouped NCCL pipeline schedule (g++)
#   cuda-emu-test     train_gpt.cu and test_gpt.cu built unchanged under the CPU emulation
#                     (mpicxx, emulated cuBLASLt and NCCL-over-MPI) and test_gpt_cu run with
#                     them: PyTorch fixtures, the CPU trainer, resume, 3D layouts with both
#                     backends (8 emulated GPUs). Needs train_gpt and the fixtures (make test
#                     builds both). No GPU needed.
#   cuda-clean
# Variables (override on the command line): NVCC, CUDA_ARCHS, NVCC_FLAGS, CUDA_MPICXX.

CUDA_SAVED_DEFAULT_GOAL := $(.DEFAULT_GOAL)
CUDA_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
CUDA_ROOT := $(patsubst %/,%,$(dir $(patsubst %/,%,$(dir $(CUDA_DIR)))))

NVCC ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
CUDA_ARCHS ?= 80 90
CUDA_GENCODE = $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a))
NVCC_FLAGS ?= -O3 -std=c++17 -lineinfo
CUDA_HOST_WARN = -Wall,-Wextra,-Werror,-Wno-unused-function,-Wno-format-truncation
CUDA_OMP := $(shell echo 'int main(void){return 0;}' | $(or $(CXX),g++) -fopenmp -x c++ - -o /dev/null 2>/dev/null && echo yes)
CUDA_NVCC_ALL = $(NVCC_FLAGS) -Werror all-warnings -Xcompiler $(CUDA_HOST_WARN)$(if $(CUDA_OMP),$(CUDA_COMMA)-fopenmp,$(CUDA_COMMA)-Wno-unknown-pragmas) $(CUDA_GENCODE)
CUDA_LIBS = -lcublasLt -lcublas -lnccl $(if $(CUDA_OMP),-lgomp)
CUDA_COMMA := ,

# MPI: compile and link flags from the wrapper (Open MPI --showme, MPICH -compile_info)
CUDA_MPICXX ?= mpicxx
CUDA_MPI_CFLAGS := $(shell $(CUDA_MPICXX) --showme:compile 2>/dev/null)
CUDA_MPI_LIBS := $(shell $(CUDA_MPICXX) --showme:link 2>/dev/null)
ifneq ($(CUDA_MPI_CFLAGS),)
  CUDA_MPI = -DUSE_MPI -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX $(CUDA_MPI_CFLAGS)
else
  CUDA_MPI =
  CUDA_MPI_LIBS =
endif

CUDA_HEADERS = $(wildcard $(CUDA_ROOT)/llmc/*.h $(CUDA_ROOT)/llmc/*.cuh)
CUDA_BUILD ?= build/cuda
CUDA_CHECKS = $(sort $(basename $(notdir $(wildcard $(CUDA_DIR)/check_*.cu))))

CUEMU_DIR_FOR_CUDA := $(CUDA_ROOT)/dev/cuemu
CUDA_EMU_CXX ?= g++
CUDA_EMU_FLAGS = -std=c++17 -O2 -rdynamic -Wall -Wextra -Wno-unused-function -Wno-unknown-pragmas -DCUEMU -I$(CUEMU_DIR_FOR_CUDA)/include -include $(CUEMU_DIR_FOR_CUDA)/cuemu.h

.PHONY: cuda-build cuda-check-build cuda-check-run cuda-check-emu cuda-check-host cuda-emu-test cuda-clean cuda-nccl-header

ifeq ($(NVCC),)
cuda-build cuda-check-build:
	@echo "$@: nvcc not found (install the CUDA toolkit, or set NVCC=/path/to/nvcc): CUDA build SKIPPED"
else
cuda-nccl-header:
	@echo '#include <nccl.h>' | $(NVCC) -x cu -E - -o /dev/null 2>/dev/null || \
	    { echo "error: nccl.h not found by $(NVCC): install NCCL (libnccl-dev) or add -I to NVCC_FLAGS"; exit 1; }
	@$(if $(CUDA_MPI),true,echo "note: mpicxx not found: building the CUDA trainer without MPI (single process only)")

train_gpt_cu: $(CUDA_ROOT)/train_gpt.cu $(CUDA_HEADERS) | cuda-nccl-header
	$(NVCC) $(CUDA_NVCC_ALL) $(CUDA_MPI) $< -o $@ $(CUDA_LIBS) $(CUDA_MPI_LIBS)

test_gpt_cu: $(CUDA_ROOT)/test_gpt.cu $(CUDA_ROOT)/train_gpt.cu $(CUDA_HEADERS) | cuda-nccl-header
	$(NVCC) $(CUDA_NVCC_ALL) $(CUDA_MPI) $< -o $@ $(CUDA_LIBS) $(CUDA_MPI_LIBS)

cuda-build: train_gpt_cu test_gpt_cu
	@echo "cuda-build: train_gpt_cu and test_gpt_cu built for sm_$(subst $() ,/sm_,$(CUDA_ARCHS)) (warnings are errors)"

$(CUDA_BUILD)/%: $(CUDA_DIR)/%.cu $(CUDA_DIR)/check_common.h $(CUDA_HEADERS)
	@mkdir -p $(@D)
	$(NVCC) $(CUDA_NVCC_ALL) $< -o $@ $(CUDA_LIBS)

cuda-check-build: $(addprefix $(CUDA_BUILD)/,$(CUDA_CHECKS))
	@echo "cuda-check-build: $(words $(CUDA_CHECKS)) kernel checks built in $(CUDA_BUILD)"
endif

cuda-check-run: cuda-check-build
	@set -e; for c in $(CUDA_CHECKS); do echo "== $$c"; $(CUDA_BUILD)/$$c; done

$(CUDA_BUILD)-emu/%: $(CUDA_DIR)/%.cu $(CUDA_DIR)/check_common.h $(CUDA_HEADERS) $(wildcard $(CUEMU_DIR_FOR_CUDA)/*.h $(CUEMU_DIR_FOR_CUDA)/impl/*.h)
	@mkdir -p $(@D)
	$(CUDA_EMU_CXX) $(CUDA_EMU_FLAGS) $(CUEMU_DETECT_FLAGS) -x c++ $< -x none -o $@ -lpthread

cuda-check-emu: $(addprefix $(CUDA_BUILD)-emu/,$(CUDA_CHECKS))
	@set -e; for c in $(CUDA_CHECKS); do echo "== $$c (CPU emulation)"; $(CUDA_BUILD)-emu/$$c; done

cuda-check-host: $(CUDA_DIR)/check_pp_groups.cu $(CUDA_ROOT)/llmc/layout.h
	@mkdir -p $(CUDA_BUILD)-host
	$(CUDA_EMU_CXX) -std=c++17 -O2 -Wall -Wextra -Werror -Wno-unused-function -x c++ $< -x none -o $(CUDA_BUILD)-host/check_pp_groups
	$(CUDA_BUILD)-host/check_pp_groups

CUDA_EMU_MPI_FLAGS = $(CUDA_EMU_FLAGS) -Wno-format-truncation -fopenmp -DUSE_MPI -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX

$(CUDA_BUILD)-emu/train_gpt_cu: $(CUDA_ROOT)/train_gpt.cu $(CUDA_HEADERS) $(wildcard $(CUEMU_DIR_FOR_CUDA)/*.h $(CUEMU_DIR_FOR_CUDA)/impl/*.h)
	@mkdir -p $(@D)
	$(CUDA_MPICXX) $(CUDA_EMU_MPI_FLAGS) -x c++ $< -x none -o $@

$(CUDA_BUILD)-emu/test_gpt_cu: $(CUDA_ROOT)/test_gpt.cu $(CUDA_ROOT)/train_gpt.cu $(CUDA_HEADERS) $(wildcard $(CUEMU_DIR_FOR_CUDA)/*.h $(CUEMU_DIR_FOR_CUDA)/impl/*.h)
	@mkdir -p $(@D)
	$(CUDA_MPICXX) $(CUDA_EMU_MPI_FLAGS) -x c++ $< -x none -o $@

cuda-emu-test: $(CUDA_BUILD)-emu/train_gpt_cu $(CUDA_BUILD)-emu/test_gpt_cu
	CUEMU_DEVICES=8 LLMC_TEST_NCCL_LAYOUTS=1 LLMC_TRAIN_GPT_CU=$(CUDA_BUILD)-emu/train_gpt_cu OMP_NUM_THREADS=1 \
	    $(CUDA_BUILD)-emu/test_gpt_cu $(or $(FIXTURES),fixtures)
	bash $(CUEMU_DIR_FOR_CUDA)/test_upload_guard.sh $(abspath $(CUDA_BUILD)-emu/train_gpt_cu)

cuda-clean:
	rm -rf $(CUDA_BUILD) $(CUDA_BUILD)-emu $(CUDA_BUILD)-host train_gpt_cu test_gpt_cu

# Including this file must not change the top Makefile's default goal.
ifeq ($(CUDA_SAVED_DEFAULT_GOAL),)
.DEFAULT_GOAL :=
else
.DEFAULT_GOAL := $(CUDA_SAVED_DEFAULT_GOAL)
endif
