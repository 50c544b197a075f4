# dev/cuda/cuda.mk - Makefile fragment for the CUDA trainer and its kernel lab. Include it
# from the top Makefile:   include dev/cuda/cuda.mk
# Targets:
#   cuda-build        train_gpt_cu and test_gpt_cu with nvcc for every arch in CUDA_ARCHS
#                     (default sm_80 and sm_90, one fat binary each), device and host
#                     warnings as errors, linked against cuBLASLt, cuBLAS, NCCL and MPI
#                     (MPI when mpicxx is found; else a single-process build). Skipped with
#                     a message when nvcc is absent.
#   cuda-check-build  the standalone kernel checks tests/cuda/test_*.cu (nvcc, same flags)
#   cuda-check-run    runs them (needs a GPU)
#   cuda-check-emu    builds the kernel checks with g++ under the CPU emulation (cuemu)
#                     and runs them (no GPU needed); test_matmul needs cuemu's cuBLASLt; the
#                     grid-stride kernels' checks run again with the grid capped at 3 blocks
#   cuda-check-host   the host-only check of the NCCL pipeline (g++): groups (1F1B and phased) and
#                     the overlapped link streams, deadlock- and hazard-free in every layout; the
#                     NCCL/cuDNN discovery on fake wheel layouts (test_find_libs.sh) and
#                     dev/gpu_check.sh's stage logic and table in its dry-run mode
#   cuda-emu-test     train_gpt.cu and test_gpt.cu built unchanged under the CPU emulation
#                     (mpicxx, emulated cuBLASLt and NCCL-over-MPI) and test_gpt_cu run with
#                     them: PyTorch fixtures, the CPU trainer, resume, 3D layouts with both
#                     backends (8 emulated GPUs). Needs train_gpt and the fixtures (make test
#                     builds both). No GPU needed.
#   cuda-emu-detect   train_gpt.cu's own steps (1x1x1, 2x2x2 sp+vpp and -cp 2 over NCCL) under the emulation's
#                     race and alignment detectors (the pipeline link streams and the CP ring's
#                     included), and deleted waits that must be caught (a ce_stats barrier, the DP
#                     buckets' event, the compute stream's wait for a pipeline transfer and for a
#                     CP ring block)
#   cuda-clean
#   cuda-resources    regenerates dev/cuda/resources_sm*.tsv (per-kernel registers, spills,
#                     static shared memory, max threads) from train_gpt_cu's ptxas -v log (the
#                     trainer contains every llmc/cuda kernel)
#   cuda-resources-check  the tables are current, within each arch's limits, and every kernel
#                     that uses shared memory issues shared-memory instructions in its SASS,
#                     the flash_tc_ kernels LDSM and LDGSTS and no generic LD/ST; a mutant
#                     build must be flagged (dev/cuda/resources.py; cuobjdump from PyPI, see
#                     dev/install.sh)
#   cuda-libs         prints what dev/cuda/find_libs.sh found (NCCL, cuDNN, cuBLASLt, nvrtc, cuDNN frontend)
#   gpu-prebuilt      the GPU check's prebuilt binaries (doc/gpu_check.md): the device's configuration
#                     (sm_90 only, no MPI, warnings as errors) in $(GPU_PREBUILT) with rpaths to the
#                     device's wheel folders, and a MANIFEST (toolkit, libraries, source hash)
#   cuda-nompi-emu-test  the same configuration under the emulation: train_gpt.cu and test_gpt.cu
#                     built without MPI with warnings as errors (g++), test_gpt_cu run with them
# Variables (override on the command line): NVCC, CUDA_ARCHS, NVCC_FLAGS, CUDA_MPICXX,
#   CUDA_WERROR (1: warnings are errors, as in CI; 0: allowed, for dev/gpu_check.sh's rebuild on
#   an unknown toolkit), CUDA_BIN (folder of train_gpt_cu and test_gpt_cu, with a trailing /;
#   default the repository root), CUDA_EXTRA_RPATH (more library folders the binaries search).

CUDA_SAVED_DEFAULT_GOAL := $(.DEFAULT_GOAL)
CUDA_BUILD ?= build/cuda
CUDA_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
CUDA_ROOT := $(patsubst %/,%,$(dir $(patsubst %/,%,$(dir $(CUDA_DIR)))))

NVCC ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
CUDA_ARCHS ?= 80 90
CUDA_GENCODE = $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a))
NVCC_FLAGS ?= -O3 -std=c++17 -lineinfo
CUDA_WERROR ?= 1
CUDA_HOST_WARN = -Wall,-Wextra,$(if $(filter \
    1,$(CUDA_WERROR)),-Werror$(CUDA_COMMA))-Wno-unused-function,-Wno-format-truncation
CUDA_OMP := $(shell echo 'int main(void){return 0;}' | $(or $(CXX),g++) -fopenmp -x c++ - -o /dev/null 2>/dev/null && \
    echo yes)
CUDA_NVCC_ALL = $(NVCC_FLAGS) $(if $(filter 1,$(CUDA_WERROR)),-Werror all-warnings) $(NCCL_CFLAGS) -Xcompiler \
    $(CUDA_HOST_WARN)$(if $(CUDA_OMP),$(CUDA_COMMA)-fopenmp,$(CUDA_COMMA)-Wno-unknown-pragmas) $(CUDA_GENCODE)
# the toolkit's own library directory (cuBLASLt, nvrtc) as an rpath, so the binary finds them
# whatever the machine's loader configuration: the -L directories nvcc itself links with
# (nvcc -dryrun), the first that holds libcublasLt
CUDA_TK_LIBDIR := $(if $(NVCC),$(patsubst %/,%,$(dir $(firstword $(wildcard $(addsuffix /libcublasLt.so*,\
    $(patsubst -L%,%,$(filter -L%,$(shell echo 'int main(){return 0;}' > /tmp/llmc_dryrun_$$$$.cu; \
    $(NVCC) -dryrun /tmp/llmc_dryrun_$$$$.cu -o /tmp/llmc_dryrun_$$$$ 2>&1 | tr '"' ' '; rm -f \
    /tmp/llmc_dryrun_$$$$.cu)))))))))
# cuBLASLt where find_libs.sh found it with its header (a wheel's versioned libraries need its
# symlinks), else nvcc's own -lcublasLt; CUDA_EXTRA_RPATH last (gpu-prebuilt: the device's wheels)
CUDA_LIBS = $(if $(filter 1,$(CUBLAS_FOUND)),$(CUBLAS_LIBS),-lcublasLt -lcublas) $(if $(CUDA_TK_LIBDIR),-Xlinker \
    -rpath=$(CUDA_TK_LIBDIR)) $(NCCL_LIBS) $(if $(CUDA_OMP),-lgomp) $(addprefix -Xlinker -rpath=,$(CUDA_EXTRA_RPATH))
CUDA_BIN ?=
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

# NCCL and cuDNN: toolkit, system, the -I of NVCC_FLAGS or Python wheels (dev/cuda/find_libs.sh)
ifneq ($(NVCC),)
CUDA_FOUND_MK := $(CUDA_BUILD)/found_libs.mk
CUDA_FIND_LIBS_RC := $(shell mkdir -p $(CUDA_BUILD) && NVCC_FLAGS="$(NVCC_FLAGS)" FIND_LIBS_NVCC="$(NVCC)" bash \
    $(CUDA_DIR)/find_libs.sh $(CUDA_BUILD)/libs > $(CUDA_FOUND_MK) && echo ok)
include $(CUDA_FOUND_MK)
endif

CUDA_CUDNN_MISSING = cuDNN (cudnn.h + libcudnn) not found: pip install nvidia-cudnn-cu13 or install \
    libcudnn9-dev; make cuda-libs says what was found
CUDA_HEADERS = $(wildcard $(CUDA_ROOT)/llmc/*/*.h $(CUDA_ROOT)/llmc/*/*.cuh)
# the kernel checks and other CUDA tests (tests/cuda)
CUDA_TEST_DIR := $(CUDA_ROOT)/tests/cuda
# the helpers test_gpt.cu shares with test_gpt.c
CUDA_TEST_HEADERS = $(wildcard $(CUDA_ROOT)/tests/*.h)

# cuDNN fused attention (llmc/cuda/attention_cudnn.*): used when find_libs.sh found cuDNN (cudnn.h and
# the library) and the frontend headers (vendored in third_party/cudnn_frontend);
# otherwise the build says so and the trainer uses its own attention kernels. CUDA_CUDNN=0
# turns it off. libnvrtc: the frontend's runtime-compiled engines need it.
CUDA_CUDNN ?= 1
CUDA_HAVE_CUDNN := $(if $(filter 1,$(CUDA_CUDNN)),$(if $(filter 1,$(CUDNN_FOUND)),$(if $(CUDNN_FRONTEND_CFLAGS),yes)))
CUDNN_OBJ = $(if $(CUDA_HAVE_CUDNN),$(CUDA_BUILD)/attention_cudnn.o)
CUDNN_DEFS = $(if $(CUDA_HAVE_CUDNN),-DUSE_CUDNN $(CUDNN_CFLAGS))
CUDNN_LINK = $(if $(CUDA_HAVE_CUDNN),$(CUDNN_OBJ) $(CUDNN_LIBS) $(if $(filter \
    1,$(NVRTC_FOUND)),$(NVRTC_LIBS),-lnvrtc))
CUDA_CHECKS = $(sort $(basename $(notdir $(wildcard $(CUDA_TEST_DIR)/test_*.cu))))

CUEMU_DIR_FOR_CUDA := $(CUDA_ROOT)/cuemu
CUDA_EMU_CXX ?= g++
CUDA_EMU_FLAGS = -std=c++17 -O2 -rdynamic -Wall -Wextra -Wno-unused-function -Wno-unknown-pragmas -DCUEMU \
    -I$(CUEMU_DIR_FOR_CUDA)/include -include $(CUEMU_DIR_FOR_CUDA)/cuemu.h

.PHONY: cuda-rpath-check cuda-emu-detect cuda-costmodel cuda-cudnn-note cuda-cudnn-attention cuda-resources \
    cuda-resources-check cuda-libs cuda-build cuda-check-build cuda-check-run cuda-check-emu cuda-check-host \
    cuda-emu-test cuda-clean cuda-nccl-header gpu-prebuilt cuda-nompi-emu-test

ifeq ($(NVCC),)
cuda-build cuda-check-build:
	@echo "$@: nvcc not found (install the CUDA toolkit, or set NVCC=/path/to/nvcc): CUDA build SKIPPED"
cuda-resources cuda-resources-check cuda-libs cuda-rpath-check:
	@echo "$@: nvcc not found: SKIPPED"
else
cuda-nccl-header:
	@$(if $(filter 1,$(NCCL_FOUND)),true,{ echo \
	    "error: NCCL not found (nccl.h + libnccl.so*) in the toolkit, /usr, /usr/local, the -I of NVCC_FLAGS" \
	    "or a Python wheel: install libnccl-dev or pip install nvidia-nccl-cu13"; exit 1; })
	@$(if $(CUDA_MPI),true,echo "note: mpicxx not found: building the CUDA trainer without MPI (single process only)")

# host-only C++ (the frontend is header-only and heavy): one object for every arch; the
# frontend's own headers are -isystem so their warnings are not ours
$(CUDA_BUILD)/attention_cudnn.o: $(CUDA_ROOT)/llmc/cuda/attention_cudnn.cpp $(CUDA_ROOT)/llmc/cuda/attention_cudnn.h \
    $(CUDA_ROOT)/llmc/cuda/cuda_common.cuh
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) $(if $(filter 1,$(CUDA_WERROR)),-Werror all-warnings) -Xcompiler $(CUDA_HOST_WARN) \
	    $(CUDNN_CFLAGS) -DCUDNN_FRONTEND_SKIP_JSON_LIB $(subst -I,-isystem ,$(CUDNN_FRONTEND_CFLAGS)) -c $< -o $@

# ptxas -v goes to $(CUDA_BUILD)/train_gpt_cu.ptxas.log (the resource tables are made from it)
$(CUDA_BIN)train_gpt_cu: $(CUDA_ROOT)/train_gpt.cu $(CUDA_HEADERS) $(CUDNN_OBJ) | cuda-nccl-header cuda-cudnn-note
	@mkdir -p $(CUDA_BUILD) $(if $(CUDA_BIN),$(CUDA_BIN))
	$(NVCC) $(CUDA_NVCC_ALL) -Xptxas -v $(CUDA_MPI) $(CUDNN_DEFS) $< -o $@ $(CUDNN_LINK) $(CUDA_LIBS) \
	    $(CUDA_MPI_LIBS) 2> $(CUDA_BUILD)/train_gpt_cu.ptxas.log || \
	    { grep -v '^ptxas info\|bytes stack frame' $(CUDA_BUILD)/train_gpt_cu.ptxas.log; exit 1; }
	@grep -v '^ptxas info\|bytes stack frame' $(CUDA_BUILD)/train_gpt_cu.ptxas.log >&2 || true

cuda-cudnn-note:
	@$(if $(CUDA_HAVE_CUDNN),echo "note: cuDNN fused attention: on (USE_CUDNN)",echo \
	    "note: cuDNN attention off ($(if $(filter 1,$(CUDA_CUDNN)),$(CUDA_CUDNN_MISSING),CUDA_CUDNN=0)):" \
	    "attention uses the own kernels")

$(CUDA_BIN)test_gpt_cu: $(CUDA_ROOT)/test_gpt.cu $(CUDA_ROOT)/train_gpt.cu $(CUDA_HEADERS) $(CUDA_TEST_HEADERS) \
    $(CUDNN_OBJ) | cuda-nccl-header cuda-cudnn-note
	$(NVCC) $(CUDA_NVCC_ALL) $(CUDA_MPI) $(CUDNN_DEFS) $< -o $@ $(CUDNN_LINK) $(CUDA_LIBS) $(CUDA_MPI_LIBS)

# cuDNN attention against the own kernels at the presets' shapes (GPU only; gpu_check.sh)
$(CUDA_BUILD)/cudnn_attention: $(CUDA_TEST_DIR)/cudnn_attention.cu $(CUDA_TEST_DIR)/common.h $(CUDA_HEADERS) \
    $(CUDNN_OBJ)
	@mkdir -p $(@D)
	$(NVCC) $(CUDA_NVCC_ALL) $(CUDNN_DEFS) $< -o $@ $(CUDNN_LINK) $(CUDA_LIBS)

cuda-cudnn-attention: $(if $(CUDA_HAVE_CUDNN),$(CUDA_BUILD)/cudnn_attention,cuda-cudnn-note)

cuda-build: $(CUDA_BIN)train_gpt_cu $(CUDA_BIN)test_gpt_cu $(if $(CUDA_HAVE_CUDNN),$(CUDA_BUILD)/cudnn_attention)
	@echo "cuda-build: $(CUDA_BIN)train_gpt_cu and $(CUDA_BIN)test_gpt_cu built for sm_$(subst $() ,/sm_,$(CUDA_ARCHS))" \
	    "($(if $(filter 1,$(CUDA_WERROR)),warnings are errors,warnings allowed))" \
	    "$(if $(CUDA_HAVE_CUDNN),with cuDNN attention,without cuDNN attention)"

cuda-libs:
	@echo "$(FIND_LIBS_NOTE)"

# the binaries carry an rpath to the toolkit's libraries (cuBLASLt, nvrtc), not only to NCCL's/cuDNN's
cuda-rpath-check: train_gpt_cu test_gpt_cu
	@test -n "$(CUDA_TK_LIBDIR)" || { echo \
	    "FAIL cuda-rpath-check: libcublasLt not found in nvcc's -L directories"; exit 1; }
	@for b in $^; do readelf -d $$b | grep -E 'R(UN)?PATH' | grep -qF '$(CUDA_TK_LIBDIR)' || \
	    { echo "FAIL cuda-rpath-check: $$b has no rpath to $(CUDA_TK_LIBDIR)"; exit 1; }; done
	@echo "cuda-rpath-check: train_gpt_cu and test_gpt_cu find cuBLASLt/nvrtc through their rpath ($(CUDA_TK_LIBDIR))"

$(CUDA_BUILD)/%: $(CUDA_TEST_DIR)/%.cu $(CUDA_TEST_DIR)/common.h $(CUDA_HEADERS)
	@mkdir -p $(@D)
	$(NVCC) $(CUDA_NVCC_ALL) $< -o $@ $(CUDA_LIBS)

cuda-check-build: $(addprefix $(CUDA_BUILD)/,$(CUDA_CHECKS))
	@echo "cuda-check-build: $(words $(CUDA_CHECKS)) kernel checks built in $(CUDA_BUILD)"
# sm_90 from gpu-prebuilt's build when CUDA_ARCHS has no 90 (make test: each arch's device code compiled once,
# the MPI build for sm_80 and the device's no-MPI build for sm_90; the kernels are the same)
CUDA_RES_SM90 = $(if $(filter 90,$(CUDA_ARCHS)),,--arch-from 90 $(CUDA_BUILD)-sm90 $(GPU_PREBUILT)/train_gpt_cu)
CUDA_RES = /usr/bin/python3 $(CUDA_DIR)/resources.py --build $(CUDA_BUILD) --root $(CUDA_ROOT) $(CUDA_RES_SM90)
cuda-resources: train_gpt_cu $(CUDA_BUILD)-emu/test_attention
	$(CUDA_RES) write

# ... and the SASS check must catch what it is there for: test_attention built for sm_90 from a
# copy of the sources with a defect put in (resources.py mutant; no switch in the product code)
CUDA_MUTANTS = emulation
# the kernels a mutant must get flagged: the 15 tensor-core ones, and test_attention's own test
# of mma.cuh, which runs the same mutated wrappers
CUDA_MUTANT_FLAGGED = flash_tc_,mma_wrapper_kernel
CUDA_MUTANT_CUBINS = $(foreach m,$(CUDA_MUTANTS),$(CUDA_BUILD)/sass_mutant_$(m)_sm90.cubin)
cuda-resources-check: train_gpt_cu $(CUDA_BUILD)-emu/test_attention $(CUDA_MUTANT_CUBINS)
	$(CUDA_RES) check
	@set -e; for c in $(CUDA_MUTANT_CUBINS); do echo "$(CUDA_RES) sass $$c --expect-fail $(CUDA_MUTANT_FLAGGED)"; \
	    $(CUDA_RES) sass $$c --expect-fail $(CUDA_MUTANT_FLAGGED); done

$(CUDA_BUILD)/sass_mutant_%_sm90.cubin: $(CUDA_TEST_DIR)/test_attention.cu $(CUDA_TEST_DIR)/common.h $(CUDA_HEADERS) \
    $(CUDA_DIR)/resources.py
	@rm -rf $(CUDA_BUILD)/mutant_$*
	$(CUDA_RES) mutant $* $(CUDA_BUILD)/mutant_$*
	$(NVCC) $(NVCC_FLAGS) -gencode arch=compute_90,code=sm_90 -cubin \
	    $(CUDA_BUILD)/mutant_$*/tests/cuda/test_attention.cu -o $@

endif

cuda-check-run: cuda-check-build
	@set -e; for c in $(CUDA_CHECKS); do echo "== $$c"; $(CUDA_BUILD)/$$c; done

$(CUDA_BUILD)-emu/%: $(CUDA_TEST_DIR)/%.cu $(CUDA_TEST_DIR)/common.h $(CUDA_HEADERS) $(wildcard \
    $(CUEMU_DIR_FOR_CUDA)/*.h $(CUEMU_DIR_FOR_CUDA)/impl/*.h)
	@mkdir -p $(@D)
	$(CUDA_EMU_CXX) $(CUDA_EMU_FLAGS) $(CUEMU_DETECT_FLAGS) -x c++ $< -x none -o $@ -lpthread

# CUDA_CHECK_EMU_SKIP: checks not run here (make test: test_attention, which the GPU rehearsal's attention
# stage runs, the same binary with the same arguments)
CUDA_CHECK_EMU_SKIP ?=
cuda-check-emu: $(addprefix $(CUDA_BUILD)-emu/,$(CUDA_CHECKS))
	@set -e; for c in $(filter-out $(CUDA_CHECK_EMU_SKIP),$(CUDA_CHECKS)); do echo "== $$c (CPU emulation)"; \
	    $(CUDA_BUILD)-emu/$$c; done
	@$(if $(CUDA_CHECK_EMU_SKIP),echo "== not run here: $(CUDA_CHECK_EMU_SKIP) (CUDA_CHECK_EMU_SKIP)")
	@echo "== test_attention --large 192 (CPU emulation; dev/gpu_check.sh runs T = 2048 on the GPU)"
	@$(CUDA_BUILD)-emu/test_attention --large 192
	@echo "== test_layernorm, test_gelu, test_encoder, test_adamw with CUEMU_MAX_GRID=3" \
	    "(each block loops over many rows/packs)"
	@set -e; for c in test_layernorm test_gelu test_encoder test_adamw; do \
	    CUEMU_MAX_GRID=3 $(CUDA_BUILD)-emu/$$c > $(CUDA_BUILD)-emu/$$c.grid3.log 2>&1 || { cat \
	    $(CUDA_BUILD)-emu/$$c.grid3.log; exit 1; }; \
	    echo "$$c (CUEMU_MAX_GRID=3): $$(tail -n 1 $(CUDA_BUILD)-emu/$$c.grid3.log)"; done

cuda-check-host: $(CUDA_TEST_DIR)/test_pp_groups.cu $(CUDA_ROOT)/llmc/host/layout.h
	@mkdir -p $(CUDA_BUILD)-host
	$(CUDA_EMU_CXX) -std=c++17 -O2 -Wall -Wextra -Werror -Wno-unused-function -x c++ $< -x none -o \
	    $(CUDA_BUILD)-host/test_pp_groups
	$(CUDA_BUILD)-host/test_pp_groups
	bash $(CUDA_TEST_DIR)/test_find_libs.sh
	bash $(CUDA_ROOT)/tests/test_gpu_check.sh

CUDA_EMU_MPI_FLAGS = $(CUDA_EMU_FLAGS) -Wno-format-truncation -fopenmp -DUSE_MPI -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX

# The emulated train_gpt_cu is a link to test_gpt_cu, whose main runs the trainer's (trainer_main, train_gpt.cu
# included with TESTING, which only renames main) when called by that name: the emulation compiles the
# trainer, a minute or more, once instead of twice. nvcc builds the product's two binaries.
$(CUDA_BUILD)-emu/train_gpt_cu: $(CUDA_BUILD)-emu/test_gpt_cu
	ln -sf test_gpt_cu $@

$(CUDA_BUILD)-emu/test_gpt_cu: $(CUDA_ROOT)/test_gpt.cu $(CUDA_ROOT)/train_gpt.cu $(CUDA_HEADERS) $(CUDA_TEST_HEADERS) \
    $(wildcard \
    $(CUEMU_DIR_FOR_CUDA)/*.h $(CUEMU_DIR_FOR_CUDA)/impl/*.h)
	@mkdir -p $(@D)
	$(CUDA_MPICXX) $(CUDA_EMU_MPI_FLAGS) -x c++ $< -x none -o $@

# The emulated trainer's mutants share one build (a build takes a minute or more): in its copy of
# train_gpt.cu each line below runs only when llmc_mutant(NAME) is 0 (tests/mutant.h), and
# train_gpt_cu_NAME is a script that runs the build with LLMC_MUTANT=NAME, which is the source
# with that line deleted (deadlock: skipped by rank 0 at step 3). The build fails if a line is
# not there once. -O1: a third less to compile, a tenth slower to run, and the mutants run briefly.
#   noguard   acts_host_claim's wait for the upload slot's event guard (test_upload_guard.sh:
#             the emulation must report the race)
#   nockwait  the AdamW update's wait for a background checkpoint's staging copy
#             (tests/test_ckpt_async.sh: the stream-hazard detector must report the race)
#   deadlock  rank 0 skips the tied embedding's all-reduce of step 3 (test_watchdog_emu.sh: the
#             watchdog must name the deadlock's two sides)
CUDA_NOGUARD_LINE = dc_wait_event(dc, a->uploaded);
CUDA_NOCKWAIT_LINE = cudaCheck(cudaStreamWaitEvent(g->stream, t->ck_copied, 0));
CUDA_DEADLOCK_LINE = dc_emb_allreduce_f32(dc, g->grads
CUDA_EMU_MUTANTS = noguard nockwait deadlock
$(CUDA_BUILD)-emu/train_gpt_cu_mutants: $(CUDA_ROOT)/train_gpt.cu $(CUDA_HEADERS) $(CUDA_ROOT)/tests/mutant.h \
    $(wildcard $(CUEMU_DIR_FOR_CUDA)/*.h $(CUEMU_DIR_FOR_CUDA)/impl/*.h)
	@mkdir -p $(@D)/mutants
	@for l in '$(CUDA_NOGUARD_LINE)' '$(CUDA_NOCKWAIT_LINE)' '$(CUDA_DEADLOCK_LINE)'; do \
	    [ "$$(grep -cF "$$l" $<)" = 1 ] || { echo "error: '$$l' is not once in $<: update dev/cuda/cuda.mk's" \
	    "mutant lines"; exit 1; }; done
	sed -e 's/$(CUDA_NOGUARD_LINE)/if (!llmc_mutant("noguard")) &/' \
	    -e 's/$(CUDA_NOCKWAIT_LINE)/if (!llmc_mutant("nockwait")) &/' \
	    -e 's/$(CUDA_DEADLOCK_LINE)/if (!(llmc_mutant("deadlock") \&\& comm->rank == 0 \&\& t->run.step == 2)) &/' \
	    $< > $(@D)/mutants/train_gpt.cu
	$(CUDA_MPICXX) $(CUDA_EMU_MPI_FLAGS) -O1 -Wno-unused-parameter -I$(CUDA_ROOT) \
	    -include $(CUDA_ROOT)/tests/mutant.h -x c++ $(@D)/mutants/train_gpt.cu -x none -o $@
$(addprefix $(CUDA_BUILD)-emu/train_gpt_cu_,$(CUDA_EMU_MUTANTS)): $(CUDA_BUILD)-emu/train_gpt_cu_mutants
	printf '#!/bin/sh\nLLMC_MUTANT=%s exec "%s" "$$@"\n' $(subst train_gpt_cu_,,$(@F)) $(abspath $<) > $@
	chmod +x $@

cuda-emu-test: $(CUDA_BUILD)-emu/train_gpt_cu $(CUDA_BUILD)-emu/test_gpt_cu $(CUDA_BUILD)-emu/train_gpt_cu_noguard \
    $(CUDA_BUILD)-emu/train_gpt_cu_deadlock $(CUDA_BUILD)-emu/train_gpt_cu_nockwait
	CUEMU_DEVICES=8 LLMC_TEST_NCCL_LAYOUTS=1 LLMC_TRAIN_GPT_CU=$(CUDA_BUILD)-emu/train_gpt_cu OMP_NUM_THREADS=1 \
	    $(CUDA_BUILD)-emu/test_gpt_cu $(or $(FIXTURES),fixtures)
	bash $(CUDA_ROOT)/tests/cuemu/test_upload_guard.sh $(abspath $(CUDA_BUILD)-emu/train_gpt_cu) \
	    $(abspath $(CUDA_BUILD)-emu/train_gpt_cu_noguard)
	bash $(CUDA_ROOT)/tests/cuda/test_watchdog_emu.sh $(abspath $(CUDA_BUILD)-emu/train_gpt_cu) \
	    $(abspath $(CUDA_BUILD)-emu/train_gpt_cu_deadlock)
	bash $(CUDA_ROOT)/tests/test_ckpt_async.sh --cuda $(abspath $(CUDA_BUILD)-emu/train_gpt_cu) \
	    $(abspath $(CUDA_BUILD)-emu/train_gpt_cu_nockwait)

# train_gpt.cu's own steps under the emulation's race/alignment detectors (GCC only)
cuda-emu-detect:
ifeq ($(CUEMU_DETECT),1)
	bash $(CUDA_TEST_DIR)/test_trainer_detect.sh "$(CUDA_MPICXX) $(CUDA_EMU_MPI_FLAGS) $(CUEMU_DETECT_FLAGS)" \
	    $(CUDA_ROOT) $(CUDA_BUILD)-emu-detect
else
	@echo "cuda-emu-detect: CUEMU_DETECT=0 (or clang): the trainer under the detectors NOT run"
endif

# the per-kernel cost model (dev/cuda/costmodel.py): train_gpt.cu under the emulation, built
# with clang's load/store instrumentation so every global-memory access of a kernel is counted
# (cuemu/impl/cost.h); then fitted at small shapes and scaled to 1.3b on H100/H200.
# Prints a PREDICTION, labelled as such. Needs clang++ (Debian's clang).
CUDA_COST_CXX ?= clang++
CUDA_COST_FLAGS = -std=c++17 -O1 -fno-vectorize -fno-slp-vectorize -DCUEMU -DCUEMU_COST \
    -fsanitize-coverage=inline-8bit-counters,trace-loads,trace-stores -Wno-unknown-pragmas \
    -I$(CUEMU_DIR_FOR_CUDA)/include -include $(CUEMU_DIR_FOR_CUDA)/cuemu.h
$(CUDA_BUILD)-cost/train_gpt_cu: $(CUDA_ROOT)/train_gpt.cu $(CUDA_HEADERS) $(wildcard $(CUEMU_DIR_FOR_CUDA)/*.h \
    $(CUEMU_DIR_FOR_CUDA)/impl/*.h)
	@mkdir -p $(@D)
	$(CUDA_COST_CXX) $(CUDA_COST_FLAGS) -x c++ $< -x none -o $@ -lpthread

# --selftest also holds `./train_gpt -plan`'s one-GPU step (h100, h200) within 5% of the model's
cuda-costmodel: $(CUDA_BUILD)-cost/train_gpt_cu train_gpt
	/usr/bin/python3 $(CUDA_DIR)/costmodel.py --exe $(CUDA_BUILD)-cost/train_gpt_cu --out \
	    $(CUDA_BUILD)-cost/counts --selftest --pred-tsv $(CUDA_DIR)/costmodel_pred.tsv --planner "./train_gpt -plan"
	/usr/bin/python3 $(CUDA_DIR)/kernel_times.py --selftest

# The GPU check's prebuilt binaries (doc/gpu_check.md): the device's configuration, sm_90 only,
# no MPI, warnings as errors, built here with the same nvcc 13.0, cuDNN 9.19 and NCCL 2.28 as the
# device's PyTorch wheels, with rpaths to those wheels' folders. The check runs them first and
# rebuilds on the device only when they fail. They travel as the device command's carry.
GPU_PREBUILT ?= build/gpu_prebuilt
GPU_DEVICE_SITE ?= /opt/torch/.venv/lib/python3.12/site-packages
GPU_DEVICE_RPATH = $(addprefix $(GPU_DEVICE_SITE)/nvidia/,cu13/lib nccl/lib cudnn/lib cublas/lib cuda_nvrtc/lib)
GPU_PREBUILT_MAKE = $(MAKE) --no-print-directory CUDA_BUILD=$(CUDA_BUILD)-sm90 CUDA_BIN=$(GPU_PREBUILT)/ \
    CUDA_ARCHS=90 CUDA_MPICXX=/nonexistent/mpicxx CUDA_WERROR=1 CUDA_EXTRA_RPATH="$(GPU_DEVICE_RPATH)"
ifeq ($(NVCC),)
gpu-prebuilt:
	@echo "gpu-prebuilt: nvcc not found (install the CUDA toolkit): prebuilt GPU binaries NOT built"
else
# (cuDNN's host object has no arch and no MPI in it: the build's own is linked, not compiled twice)
gpu-prebuilt: $(CUDNN_OBJ)
	$(GPU_PREBUILT_MAKE) CUDNN_OBJ=$(CUDNN_OBJ) cuda-build $(CUDA_BUILD)-sm90/test_attention
	cp -f $(CUDA_BUILD)-sm90/test_attention $(if $(CUDA_HAVE_CUDNN),$(CUDA_BUILD)-sm90/cudnn_attention) $(GPU_PREBUILT)/
	@bash $(CUDA_DIR)/prebuilt.sh manifest $(GPU_PREBUILT) $(NVCC) | sed 's/^/gpu-prebuilt: /'
endif

# the same configuration under the emulation (no GPU): no MPI, warnings as errors, test_gpt_cu
# run as dev/gpu_check.sh runs it on the device (one emulated GPU, no 3D layouts: no mpirun there)
CUDA_EMU_NOMPI_FLAGS = $(CUDA_EMU_FLAGS) -Werror -Wno-format-truncation $(if $(CUDA_OMP),-fopenmp) -DCUEMU_NCCL_NO_MPI
$(CUDA_BUILD)-emu-nompi/train_gpt_cu: $(CUDA_BUILD)-emu-nompi/test_gpt_cu
	ln -sf test_gpt_cu $@
$(CUDA_BUILD)-emu-nompi/test_gpt_cu: $(CUDA_ROOT)/test_gpt.cu $(CUDA_ROOT)/train_gpt.cu $(CUDA_HEADERS) \
    $(CUDA_TEST_HEADERS) $(wildcard $(CUEMU_DIR_FOR_CUDA)/*.h $(CUEMU_DIR_FOR_CUDA)/impl/*.h \
    $(CUEMU_DIR_FOR_CUDA)/include/*.h $(CUEMU_DIR_FOR_CUDA)/include/*/*.h)
	@mkdir -p $(@D)
	$(CUDA_EMU_CXX) $(CUDA_EMU_NOMPI_FLAGS) -x c++ $< -x none -o $@ -lpthread
cuda-nompi-emu-test: $(CUDA_BUILD)-emu-nompi/train_gpt_cu $(CUDA_BUILD)-emu-nompi/test_gpt_cu
	@! nm -C $(CUDA_BUILD)-emu-nompi/train_gpt_cu | grep -q ' U MPI_' || { echo \
	    "FAIL cuda-nompi-emu-test: the no-MPI build links MPI"; exit 1; }
	CUEMU_DEVICES=1 LLMC_TEST_LAYOUTS=0 LLMC_TRAIN_GPT_CU=$(CUDA_BUILD)-emu-nompi/train_gpt_cu OMP_NUM_THREADS=1 \
	    $(CUDA_BUILD)-emu-nompi/test_gpt_cu $(or $(FIXTURES),fixtures)

# every binary the CUDA tests above run, so `make test` can build them side by side up front
# (make -j; the tests then run one after another): nvcc builds only where nvcc is
CUDA_TEST_BINS = $(if $(NVCC),train_gpt_cu test_gpt_cu $(if $(CUDA_HAVE_CUDNN),$(CUDA_BUILD)/cudnn_attention) \
    $(CUDA_MUTANT_CUBINS) $(CUDA_BUILD)/test_attention gpu-prebuilt) \
    $(addprefix $(CUDA_BUILD)-emu/,$(CUDA_CHECKS) train_gpt_cu test_gpt_cu \
    $(addprefix train_gpt_cu_,$(CUDA_EMU_MUTANTS))) \
    $(CUDA_BUILD)-cost/train_gpt_cu $(addprefix $(CUDA_BUILD)-emu-nompi/,train_gpt_cu test_gpt_cu)

cuda-clean:
	rm -rf $(CUDA_BUILD) $(CUDA_BUILD)-emu $(CUDA_BUILD)-host $(CUDA_BUILD)-cost $(CUDA_BUILD)-sm90 \
	    $(CUDA_BUILD)-emu-nompi $(GPU_PREBUILT) train_gpt_cu test_gpt_cu

# Including this file must not change the top Makefile's default goal.
ifeq ($(CUDA_SAVED_DEFAULT_GOAL),)
.DEFAULT_GOAL :=
else
.DEFAULT_GOAL := $(CUDA_SAVED_DEFAULT_GOAL)
endif
