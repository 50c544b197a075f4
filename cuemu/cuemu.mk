# cuemu/cuemu.mk - Makefile fragment for the CPU emulation of CUDA (tests only;
# nothing here is linked into the product). Include it from the top Makefile:
#     include cuemu/cuemu.mk
# Targets:
#   cuemu-test     build the emulation's tests and run them: the build-error checks,
#                  test_cuemu (g++) and test_nccl (mpicxx, run on 4 MPI processes)
#   cuemu-compile  compile the same two test sources with the real nvcc for sm_80 and
#                  sm_90 (compile only, warnings are errors); skipped when nvcc is missing
#   cuemu-clean    remove $(CUEMU_BUILD)
# Every variable is CUEMU_-prefixed and can be overridden (make cuemu-test CUEMU_CXX=clang++).

CUEMU_SAVED_DEFAULT_GOAL := $(.DEFAULT_GOAL)
CUEMU_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
# the repository root and the emulation's own tests (tests/cuemu)
CUEMU_ROOT := $(patsubst %/,%,$(dir $(CUEMU_DIR)))
CUEMU_TEST_DIR := $(CUEMU_ROOT)/tests/cuemu

CUEMU_BUILD ?= build/cuemu
CUEMU_CXX ?= g++
CUEMU_MPICXX ?= mpicxx
CUEMU_MPIRUN ?= mpirun
CUEMU_NP ?= 4
CUEMU_CXXFLAGS ?= -std=c++17 -O2 -g -Wall -Wextra
# The hardware-like detectors (README "Detectors"): misaligned vector accesses
# through UBSan's alignment check, shared/global races through ThreadSanitizer's
# instrumentation with cuemu's own hooks (impl/detect.h) in place of its runtime,
# which the empty notsan/libtsan.a keeps out. GCC only; CUEMU_DETECT=0 drops them.
CUEMU_DETECT ?= $(if $(findstring clang,$(shell $(CUEMU_CXX) --version 2>/dev/null | head -1)),0,1)
CUEMU_DETECT_FLAGS = $(if $(filter 1,$(CUEMU_DETECT)),-g1 -fsanitize=thread --param=tsan-instrument-func-entry-exit=0 \
    -Wno-tsan \
    -static-libtsan -L$(abspath $(CUEMU_DIR))/notsan -fsanitize=alignment -fno-sanitize-recover=alignment)
CUEMU_FLAGS = $(CUEMU_CXXFLAGS) -rdynamic -DCUEMU -I$(CUEMU_DIR)/include -include $(CUEMU_DIR)/cuemu.h \
    $(CUEMU_DETECT_FLAGS)
CUEMU_MPI_DEFS = -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX
CUEMU_DEPS = $(wildcard $(CUEMU_DIR)/*.h $(CUEMU_DIR)/include/*.h $(CUEMU_DIR)/impl/*.h) \
    $(CUEMU_ROOT)/llmc/cuda/cuda_common.cuh
CUEMU_MPIRUN_FLAGS ?= --oversubscribe $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-run-as-root)
CUEMU_HAVE_MPI := $(shell command -v $(CUEMU_MPICXX) >/dev/null 2>&1 && command -v $(CUEMU_MPIRUN) >/dev/null 2>&1 && \
    echo yes)
CUEMU_NVCC ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
CUEMU_NVCC_FLAGS ?= -std=c++17 -Werror all-warnings -Xcompiler -Wall,-Wextra
CUEMU_ARCHS ?= 80 90
CUEMU_MPI_CFLAGS ?= $(shell $(CUEMU_MPICXX) --showme:compile 2>/dev/null)

.PHONY: cuemu-test cuemu-compile cuemu-clean

$(CUEMU_BUILD)/test_cuemu: $(CUEMU_TEST_DIR)/test_cuemu.cu $(CUEMU_DEPS)
	@mkdir -p $(@D)
	$(CUEMU_CXX) $(CUEMU_FLAGS) -x c++ $< -x none -o $@

$(CUEMU_BUILD)/test_nccl: $(CUEMU_TEST_DIR)/test_nccl.cu $(CUEMU_DEPS)
	@mkdir -p $(@D)
	$(CUEMU_MPICXX) $(CUEMU_FLAGS) $(CUEMU_MPI_DEFS) -x c++ $< -x none -o $@

CUEMU_TEST_BINS = $(CUEMU_BUILD)/test_cuemu $(if $(CUEMU_HAVE_MPI),$(CUEMU_BUILD)/test_nccl)
cuemu-test: $(CUEMU_TEST_BINS)
	bash $(CUEMU_TEST_DIR)/test_build_errors.sh "$(CUEMU_CXX)" $(CUEMU_DIR)
	$(CUEMU_BUILD)/test_cuemu
ifeq ($(CUEMU_DETECT),1)
	bash $(CUEMU_TEST_DIR)/test_detectors.sh \
	    "$(CUEMU_CXX) $(CUEMU_FLAGS) -O1 -Wno-unused-function -Wno-unknown-pragmas -lpthread" $(CUEMU_ROOT) \
	    $(CUEMU_BUILD)
else
	@echo "cuemu-test: CUEMU_DETECT=0 (or clang): the race/alignment detector tests NOT run"
endif
ifeq ($(CUEMU_HAVE_MPI),yes)
	$(CUEMU_MPIRUN) $(CUEMU_MPIRUN_FLAGS) -np $(CUEMU_NP) $(CUEMU_BUILD)/test_nccl
else
	@echo "cuemu-test: $(CUEMU_MPICXX) or $(CUEMU_MPIRUN) not found: NCCL-over-MPI test NOT run" \
	    "(bash dev/install.sh installs Open MPI)"
endif

cuemu-compile:
ifeq ($(CUEMU_NVCC),)
	@echo "cuemu-compile: nvcc not found: real-CUDA compile of the emulation tests skipped"
else
	@mkdir -p $(CUEMU_BUILD)
	@set -e; for a in $(CUEMU_ARCHS); do \
	    echo "$(CUEMU_NVCC) $(CUEMU_NVCC_FLAGS) -arch=sm_$$a -c $(CUEMU_TEST_DIR)/test_cuemu.cu"; \
	    $(CUEMU_NVCC) $(CUEMU_NVCC_FLAGS) -arch=sm_$$a -c $(CUEMU_TEST_DIR)/test_cuemu.cu -o \
	    $(CUEMU_BUILD)/test_cuemu_sm$$a.o; \
	    if [ -n "$(CUEMU_MPI_CFLAGS)" ]; then \
	        echo "$(CUEMU_NVCC) $(CUEMU_NVCC_FLAGS) -arch=sm_$$a $(CUEMU_MPI_DEFS) <mpi flags>" \
	            "-c $(CUEMU_TEST_DIR)/test_nccl.cu"; \
	        $(CUEMU_NVCC) $(CUEMU_NVCC_FLAGS) -arch=sm_$$a $(CUEMU_MPI_DEFS) $(CUEMU_MPI_CFLAGS) -c \
	    $(CUEMU_TEST_DIR)/test_nccl.cu -o $(CUEMU_BUILD)/test_nccl_sm$$a.o; \
	    else echo "cuemu-compile: no MPI compile flags from $(CUEMU_MPICXX): tests/cuemu/test_nccl.cu skipped"; fi; \
	done
	@echo "cuemu-compile: the emulation's test sources are valid CUDA for sm_$(subst $() ,/sm_,$(CUEMU_ARCHS))"
endif

cuemu-clean:
	rm -rf $(CUEMU_BUILD)

# Including this file must not change the top Makefile's default goal.
ifeq ($(CUEMU_SAVED_DEFAULT_GOAL),)
.DEFAULT_GOAL :=
else
.DEFAULT_GOAL := $(CUEMU_SAVED_DEFAULT_GOAL)
endif
