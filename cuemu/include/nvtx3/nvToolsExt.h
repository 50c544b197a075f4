// cuemu/include/nvtx3/nvToolsExt.h - CPU-emulation stand-in for NVTX 3's <nvtx3/nvToolsExt.h>:
// no profiler can attach to the emulation, so a range push or pop does nothing (as the real
// header does when no tool is attached), and the trainer's ranges compile the same.
#pragma once
#ifndef CUEMU
#error "cuemu/include/nvtx3/nvToolsExt.h is the CPU emulation's header: keep it off a real CUDA build's include path"
#endif
static inline int nvtxRangePushA(const char* message) {
    (void)message;
    return 0;
}
static inline int nvtxRangePop(void) { return 0; }
