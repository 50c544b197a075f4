// cuemu/impl/detect_atomics.h - the ThreadSanitizer atomic hooks that the
// instrumented build calls for every __atomic builtin (std::atomic, fences):
// they just perform the operation (sequentially consistent). Included by detect.h
// only under -fsanitize=thread. Signatures as GCC declares them (sanitizer.def).
// Test-only, part of cuemu.
#pragma once
#define CUEMU_TA extern "C" __attribute__((weak, no_sanitize_thread))
// A read-modify-write hook: NAME is GCC's suffix, BUILTIN the __atomic builtin it maps to.
#define CUEMU_TA_RMW(N, T, NAME, BUILTIN)                              \
    CUEMU_TA T __tsan_atomic##N##_##NAME(volatile void* p, T v, int) { \
        return BUILTIN((volatile T*)p, v, __ATOMIC_SEQ_CST);           \
    }
#define CUEMU_TA_CAS(N, T, KIND, WEAK)                                                                          \
    CUEMU_TA bool __tsan_atomic##N##_compare_exchange_##KIND(volatile void* p, void* e, T v, int, int) {        \
        return __atomic_compare_exchange_n((volatile T*)p, (T*)e, v, WEAK, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
    }
// All the hooks of one access width N (bits); T is the unsigned type of that width.
#define CUEMU_TA_WIDTH(N, T)                                             \
    CUEMU_TA T __tsan_atomic##N##_load(const volatile void* p, int) {    \
        return __atomic_load_n((const volatile T*)p, __ATOMIC_SEQ_CST);  \
    }                                                                    \
    CUEMU_TA void __tsan_atomic##N##_store(volatile void* p, T v, int) { \
        __atomic_store_n((volatile T*)p, v, __ATOMIC_SEQ_CST);           \
    }                                                                    \
    CUEMU_TA_RMW(N, T, exchange, __atomic_exchange_n)                    \
    CUEMU_TA_RMW(N, T, fetch_add, __atomic_fetch_add)                    \
    CUEMU_TA_RMW(N, T, fetch_sub, __atomic_fetch_sub)                    \
    CUEMU_TA_RMW(N, T, fetch_and, __atomic_fetch_and)                    \
    CUEMU_TA_RMW(N, T, fetch_or, __atomic_fetch_or)                      \
    CUEMU_TA_RMW(N, T, fetch_xor, __atomic_fetch_xor)                    \
    CUEMU_TA_RMW(N, T, fetch_nand, __atomic_fetch_nand)                  \
    CUEMU_TA_CAS(N, T, strong, 0)                                        \
    CUEMU_TA_CAS(N, T, weak, 1)
CUEMU_TA_WIDTH(8, unsigned char)
CUEMU_TA_WIDTH(16, unsigned short)
CUEMU_TA_WIDTH(32, unsigned int)
CUEMU_TA_WIDTH(64, unsigned long)
CUEMU_TA void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
CUEMU_TA void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
#undef CUEMU_TA_WIDTH
#undef CUEMU_TA_CAS
#undef CUEMU_TA_RMW
#undef CUEMU_TA
