// cuemu/impl/detect_atomics.h - the ThreadSanitizer atomic hooks that the
// instrumented build calls for every __atomic builtin (std::atomic, fences):
// they just perform the operation (sequentially consistent). Included by detect.h
// only under -fsanitize=thread. Signatures as GCC declares them (sanitizer.def).
// Test-only, part of cuemu.
#pragma once
#define CUEMU_TA extern "C" __attribute__((weak, no_sanitize_thread))
CUEMU_TA unsigned char __tsan_atomic8_load(const volatile void* p, int) {
    return __atomic_load_n((const volatile unsigned char*)p, __ATOMIC_SEQ_CST);
}
CUEMU_TA void __tsan_atomic8_store(volatile void* p, unsigned char v, int) {
    __atomic_store_n((volatile unsigned char*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned char __tsan_atomic8_exchange(volatile void* p, unsigned char v, int) {
    return __atomic_exchange_n((volatile unsigned char*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned char __tsan_atomic8_fetch_add(volatile void* p, unsigned char v, int) {
    return __atomic_fetch_add((volatile unsigned char*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned char __tsan_atomic8_fetch_sub(volatile void* p, unsigned char v, int) {
    return __atomic_fetch_sub((volatile unsigned char*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned char __tsan_atomic8_fetch_and(volatile void* p, unsigned char v, int) {
    return __atomic_fetch_and((volatile unsigned char*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned char __tsan_atomic8_fetch_or(volatile void* p, unsigned char v, int) {
    return __atomic_fetch_or((volatile unsigned char*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned char __tsan_atomic8_fetch_xor(volatile void* p, unsigned char v, int) {
    return __atomic_fetch_xor((volatile unsigned char*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned char __tsan_atomic8_fetch_nand(volatile void* p, unsigned char v, int) {
    return __atomic_fetch_nand((volatile unsigned char*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA bool __tsan_atomic8_compare_exchange_strong(volatile void* p, void* e, unsigned char v, int, int) {
    return __atomic_compare_exchange_n((volatile unsigned char*)p, (unsigned char*)e, v, 0, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}
CUEMU_TA bool __tsan_atomic8_compare_exchange_weak(volatile void* p, void* e, unsigned char v, int, int) {
    return __atomic_compare_exchange_n((volatile unsigned char*)p, (unsigned char*)e, v, 1, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned short __tsan_atomic16_load(const volatile void* p, int) {
    return __atomic_load_n((const volatile unsigned short*)p, __ATOMIC_SEQ_CST);
}
CUEMU_TA void __tsan_atomic16_store(volatile void* p, unsigned short v, int) {
    __atomic_store_n((volatile unsigned short*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned short __tsan_atomic16_exchange(volatile void* p, unsigned short v, int) {
    return __atomic_exchange_n((volatile unsigned short*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned short __tsan_atomic16_fetch_add(volatile void* p, unsigned short v, int) {
    return __atomic_fetch_add((volatile unsigned short*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned short __tsan_atomic16_fetch_sub(volatile void* p, unsigned short v, int) {
    return __atomic_fetch_sub((volatile unsigned short*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned short __tsan_atomic16_fetch_and(volatile void* p, unsigned short v, int) {
    return __atomic_fetch_and((volatile unsigned short*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned short __tsan_atomic16_fetch_or(volatile void* p, unsigned short v, int) {
    return __atomic_fetch_or((volatile unsigned short*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned short __tsan_atomic16_fetch_xor(volatile void* p, unsigned short v, int) {
    return __atomic_fetch_xor((volatile unsigned short*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned short __tsan_atomic16_fetch_nand(volatile void* p, unsigned short v, int) {
    return __atomic_fetch_nand((volatile unsigned short*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA bool __tsan_atomic16_compare_exchange_strong(volatile void* p, void* e, unsigned short v, int, int) {
    return __atomic_compare_exchange_n((volatile unsigned short*)p, (unsigned short*)e, v, 0, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}
CUEMU_TA bool __tsan_atomic16_compare_exchange_weak(volatile void* p, void* e, unsigned short v, int, int) {
    return __atomic_compare_exchange_n((volatile unsigned short*)p, (unsigned short*)e, v, 1, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned int __tsan_atomic32_load(const volatile void* p, int) {
    return __atomic_load_n((const volatile unsigned int*)p, __ATOMIC_SEQ_CST);
}
CUEMU_TA void __tsan_atomic32_store(volatile void* p, unsigned int v, int) {
    __atomic_store_n((volatile unsigned int*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned int __tsan_atomic32_exchange(volatile void* p, unsigned int v, int) {
    return __atomic_exchange_n((volatile unsigned int*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned int __tsan_atomic32_fetch_add(volatile void* p, unsigned int v, int) {
    return __atomic_fetch_add((volatile unsigned int*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned int __tsan_atomic32_fetch_sub(volatile void* p, unsigned int v, int) {
    return __atomic_fetch_sub((volatile unsigned int*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned int __tsan_atomic32_fetch_and(volatile void* p, unsigned int v, int) {
    return __atomic_fetch_and((volatile unsigned int*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned int __tsan_atomic32_fetch_or(volatile void* p, unsigned int v, int) {
    return __atomic_fetch_or((volatile unsigned int*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned int __tsan_atomic32_fetch_xor(volatile void* p, unsigned int v, int) {
    return __atomic_fetch_xor((volatile unsigned int*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned int __tsan_atomic32_fetch_nand(volatile void* p, unsigned int v, int) {
    return __atomic_fetch_nand((volatile unsigned int*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA bool __tsan_atomic32_compare_exchange_strong(volatile void* p, void* e, unsigned int v, int, int) {
    return __atomic_compare_exchange_n((volatile unsigned int*)p, (unsigned int*)e, v, 0, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}
CUEMU_TA bool __tsan_atomic32_compare_exchange_weak(volatile void* p, void* e, unsigned int v, int, int) {
    return __atomic_compare_exchange_n((volatile unsigned int*)p, (unsigned int*)e, v, 1, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned long __tsan_atomic64_load(const volatile void* p, int) {
    return __atomic_load_n((const volatile unsigned long*)p, __ATOMIC_SEQ_CST);
}
CUEMU_TA void __tsan_atomic64_store(volatile void* p, unsigned long v, int) {
    __atomic_store_n((volatile unsigned long*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned long __tsan_atomic64_exchange(volatile void* p, unsigned long v, int) {
    return __atomic_exchange_n((volatile unsigned long*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned long __tsan_atomic64_fetch_add(volatile void* p, unsigned long v, int) {
    return __atomic_fetch_add((volatile unsigned long*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned long __tsan_atomic64_fetch_sub(volatile void* p, unsigned long v, int) {
    return __atomic_fetch_sub((volatile unsigned long*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned long __tsan_atomic64_fetch_and(volatile void* p, unsigned long v, int) {
    return __atomic_fetch_and((volatile unsigned long*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned long __tsan_atomic64_fetch_or(volatile void* p, unsigned long v, int) {
    return __atomic_fetch_or((volatile unsigned long*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned long __tsan_atomic64_fetch_xor(volatile void* p, unsigned long v, int) {
    return __atomic_fetch_xor((volatile unsigned long*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA unsigned long __tsan_atomic64_fetch_nand(volatile void* p, unsigned long v, int) {
    return __atomic_fetch_nand((volatile unsigned long*)p, v, __ATOMIC_SEQ_CST);
}
CUEMU_TA bool __tsan_atomic64_compare_exchange_strong(volatile void* p, void* e, unsigned long v, int, int) {
    return __atomic_compare_exchange_n((volatile unsigned long*)p, (unsigned long*)e, v, 0, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}
CUEMU_TA bool __tsan_atomic64_compare_exchange_weak(volatile void* p, void* e, unsigned long v, int, int) {
    return __atomic_compare_exchange_n((volatile unsigned long*)p, (unsigned long*)e, v, 1, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}
CUEMU_TA void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
CUEMU_TA void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
#undef CUEMU_TA
