// cuemu/impl/bf16.h - __nv_bfloat16 / __nv_bfloat162 with the GPU's
// conversions: float -> bf16 rounds to nearest even (cvt.rn.bf16.f32), every NaN
// becomes the canonical NaN 0x7FFF, overflow rounds to infinity; arithmetic is
// done in float (exact for add/sub/mul of two bf16) and rounded once.
// Test-only: part of the CPU emulation of CUDA, never linked into the product.
#pragma once
#include "kernel.h"

namespace cuemu {
inline uint32_t f2u(float f) { return bit_cast<uint32_t>(f); }
inline float u2f(uint32_t u) { return bit_cast<float>(u); }
inline unsigned short f2bf_rn(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu; // NaN -> canonical NaN
    u += 0x7fffu + ((u >> 16) & 1u);                     // round to nearest, ties to even
    return (unsigned short)(u >> 16);
}
inline unsigned short f2bf_rz(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
    return (unsigned short)(u >> 16);
}
// Round toward +inf (up = true) or -inf (up = false).
inline unsigned short f2bf_dir(float f, bool up) {
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
    unsigned short t = (unsigned short)(u >> 16);
    bool inexact = (u & 0xffffu) != 0;
    bool neg = (u >> 31) != 0;
    if (inexact && (up != neg)) t++; // away from zero in the direction asked
    return t;
}
inline float bf2f(unsigned short b) { return u2f((uint32_t)b << 16); }
} // namespace cuemu

struct __nv_bfloat16_raw {
    unsigned short x;
};
struct __nv_bfloat162_raw {
    unsigned short x, y;
};

struct alignas(2) __nv_bfloat16 {
protected:
    unsigned short __x;

public:
    __nv_bfloat16() = default;
    constexpr __nv_bfloat16(const __nv_bfloat16_raw& r) : __x(r.x) {}
    __nv_bfloat16& operator=(const __nv_bfloat16_raw& r) {
        __x = r.x;
        return *this;
    }
    operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
    __nv_bfloat16(float f) : __x(cuemu::f2bf_rn(f)) {}
    __nv_bfloat16(double d) : __x(cuemu::f2bf_rn((float)d)) {}
    __nv_bfloat16(short v) : __x(cuemu::f2bf_rn((float)v)) {}
    __nv_bfloat16(unsigned short v) : __x(cuemu::f2bf_rn((float)v)) {}
    __nv_bfloat16(int v) : __x(cuemu::f2bf_rn((float)v)) {}
    __nv_bfloat16(unsigned int v) : __x(cuemu::f2bf_rn((float)v)) {}
    __nv_bfloat16(long long v) : __x(cuemu::f2bf_rn((float)v)) {}
    __nv_bfloat16(unsigned long long v) : __x(cuemu::f2bf_rn((float)v)) {}
    __nv_bfloat16& operator=(float f) {
        __x = cuemu::f2bf_rn(f);
        return *this;
    }
    __nv_bfloat16& operator=(double d) {
        __x = cuemu::f2bf_rn((float)d);
        return *this;
    }
    operator float() const { return cuemu::bf2f(__x); }
    explicit operator bool() const { return (__x & 0x7fffu) != 0; }
    explicit operator short() const { return (short)cuemu::bf2f(__x); }
    explicit operator unsigned short() const { return (unsigned short)cuemu::bf2f(__x); }
    explicit operator int() const { return (int)cuemu::bf2f(__x); }
    explicit operator unsigned int() const { return (unsigned int)cuemu::bf2f(__x); }
    explicit operator long long() const { return (long long)cuemu::bf2f(__x); }
    explicit operator unsigned long long() const { return (unsigned long long)cuemu::bf2f(__x); }
};
struct alignas(4) __nv_bfloat162 {
    __nv_bfloat16 x;
    __nv_bfloat16 y;
    __nv_bfloat162() = default;
    constexpr __nv_bfloat162(const __nv_bfloat16& a, const __nv_bfloat16& b) : x(a), y(b) {}
    __nv_bfloat162(const __nv_bfloat162_raw& r) : x(__nv_bfloat16_raw{r.x}), y(__nv_bfloat16_raw{r.y}) {}
    operator __nv_bfloat162_raw() const {
        return __nv_bfloat162_raw{((__nv_bfloat16_raw)x).x, ((__nv_bfloat16_raw)y).x};
    }
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;
static_assert(sizeof(__nv_bfloat16) == 2 && sizeof(__nv_bfloat162) == 4, "bf16 layout");

static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return ((__nv_bfloat16_raw)h).x; }
static inline short __bfloat16_as_short(__nv_bfloat16 h) { return (short)((__nv_bfloat16_raw)h).x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16(__nv_bfloat16_raw{u}); }
static inline __nv_bfloat16 __short_as_bfloat16(short s) { return __nv_bfloat16(__nv_bfloat16_raw{(unsigned short)s}); }
#define CUDART_INF_BF16 __ushort_as_bfloat16((unsigned short)0x7F80U)
#define CUDART_NAN_BF16 __ushort_as_bfloat16((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_BF16 __ushort_as_bfloat16((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_BF16 __ushort_as_bfloat16((unsigned short)0x7F7FU)
#define CUDART_NEG_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x8000U)
#define CUDART_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x0000U)
#define CUDART_ONE_BF16 __ushort_as_bfloat16((unsigned short)0x3F80U)

static inline __nv_bfloat16 __float2bfloat16(float f) { return __ushort_as_bfloat16(cuemu::f2bf_rn(f)); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __ushort_as_bfloat16(cuemu::f2bf_rn(f)); }
static inline __nv_bfloat16 __float2bfloat16_rz(float f) { return __ushort_as_bfloat16(cuemu::f2bf_rz(f)); }
static inline __nv_bfloat16 __float2bfloat16_ru(float f) { return __ushort_as_bfloat16(cuemu::f2bf_dir(f, true)); }
static inline __nv_bfloat16 __float2bfloat16_rd(float f) { return __ushort_as_bfloat16(cuemu::f2bf_dir(f, false)); }
static inline __nv_bfloat16 __double2bfloat16(double d) { return __float2bfloat16((float)d); }
static inline float __bfloat162float(__nv_bfloat16 h) { return cuemu::bf2f(__bfloat16_as_ushort(h)); }
static inline __nv_bfloat16 __int2bfloat16_rn(int i) { return __float2bfloat16((float)i); }
static inline int __bfloat162int_rn(__nv_bfloat16 h) { return (int)nearbyintf(__bfloat162float(h)); }
static inline int __bfloat162int_rz(__nv_bfloat16 h) { return (int)__bfloat162float(h); }
static inline __nv_bfloat162 __float2bfloat162_rn(float f) {
    return __nv_bfloat162(__float2bfloat16(f), __float2bfloat16(f));
}
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return __nv_bfloat162(__float2bfloat16(a), __float2bfloat16(b));
}
static inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
static inline float2 __bfloat1622float2(__nv_bfloat162 h) {
    return make_float2(__bfloat162float(h.x), __bfloat162float(h.y));
}
static inline float __low2float(__nv_bfloat162 h) { return __bfloat162float(h.x); }
static inline float __high2float(__nv_bfloat162 h) { return __bfloat162float(h.y); }
static inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
static inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
static inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }
static inline __nv_bfloat162 __lows2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(a.x, b.x); }
static inline __nv_bfloat162 __highs2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(a.y, b.y); }
static inline __nv_bfloat162 __lowhigh2highlow(__nv_bfloat162 a) { return __nv_bfloat162(a.y, a.x); }

// Arithmetic: in float, one rounding (exact sum/difference/product of two bf16
// fit in float, so add/sub/mul are correctly rounded like the GPU's).
#define CUEMU_BF(x) __bfloat162float(x)
static inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) {
    return __float2bfloat16(CUEMU_BF(a) + CUEMU_BF(b));
}
static inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) {
    return __float2bfloat16(CUEMU_BF(a) - CUEMU_BF(b));
}
static inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) {
    return __float2bfloat16(CUEMU_BF(a) * CUEMU_BF(b));
}
static inline __nv_bfloat16 __hdiv(__nv_bfloat16 a, __nv_bfloat16 b) {
    return __float2bfloat16(CUEMU_BF(a) / CUEMU_BF(b));
}
static inline __nv_bfloat16 __hadd_rn(__nv_bfloat16 a, __nv_bfloat16 b) { return __hadd(a, b); }
static inline __nv_bfloat16 __hsub_rn(__nv_bfloat16 a, __nv_bfloat16 b) { return __hsub(a, b); }
static inline __nv_bfloat16 __hmul_rn(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmul(a, b); }
static inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
    return __float2bfloat16((float)((double)CUEMU_BF(a) * (double)CUEMU_BF(b) + (double)CUEMU_BF(c)));
}
static inline __nv_bfloat16 __hneg(__nv_bfloat16 a) { return __ushort_as_bfloat16(__bfloat16_as_ushort(a) ^ 0x8000u); }
static inline __nv_bfloat16 __habs(__nv_bfloat16 a) { return __ushort_as_bfloat16(__bfloat16_as_ushort(a) & 0x7fffu); }
static inline bool __hisnan(__nv_bfloat16 a) { return (__bfloat16_as_ushort(a) & 0x7fffu) > 0x7f80u; }
static inline int __hisinf(__nv_bfloat16 a) {
    unsigned short u = __bfloat16_as_ushort(a);
    return u == 0x7f80u ? 1 : (u == 0xff80u ? -1 : 0);
}
static inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) {
    if (__hisnan(a)) return __hisnan(b) ? CUDART_NAN_BF16 : b;
    if (__hisnan(b)) return a;
    return CUEMU_BF(a) >= CUEMU_BF(b) ? a : b;
}
static inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) {
    if (__hisnan(a)) return __hisnan(b) ? CUDART_NAN_BF16 : b;
    if (__hisnan(b)) return a;
    return CUEMU_BF(a) <= CUEMU_BF(b) ? a : b;
}
static inline __nv_bfloat16 __hmax_nan(__nv_bfloat16 a, __nv_bfloat16 b) {
    return (__hisnan(a) || __hisnan(b)) ? CUDART_NAN_BF16 : __hmax(a, b);
}
static inline __nv_bfloat16 __hmin_nan(__nv_bfloat16 a, __nv_bfloat16 b) {
    return (__hisnan(a) || __hisnan(b)) ? CUDART_NAN_BF16 : __hmin(a, b);
}
static inline bool __heq(__nv_bfloat16 a, __nv_bfloat16 b) { return CUEMU_BF(a) == CUEMU_BF(b); }
static inline bool __hne(__nv_bfloat16 a, __nv_bfloat16 b) {
    return !__hisnan(a) && !__hisnan(b) && CUEMU_BF(a) != CUEMU_BF(b);
}
static inline bool __hlt(__nv_bfloat16 a, __nv_bfloat16 b) { return CUEMU_BF(a) < CUEMU_BF(b); }
static inline bool __hle(__nv_bfloat16 a, __nv_bfloat16 b) { return CUEMU_BF(a) <= CUEMU_BF(b); }
static inline bool __hgt(__nv_bfloat16 a, __nv_bfloat16 b) { return CUEMU_BF(a) > CUEMU_BF(b); }
static inline bool __hge(__nv_bfloat16 a, __nv_bfloat16 b) { return CUEMU_BF(a) >= CUEMU_BF(b); }
static inline __nv_bfloat16 hexp(__nv_bfloat16 a) { return __float2bfloat16(expf(CUEMU_BF(a))); }
static inline __nv_bfloat16 hlog(__nv_bfloat16 a) { return __float2bfloat16(logf(CUEMU_BF(a))); }
static inline __nv_bfloat16 hsqrt(__nv_bfloat16 a) { return __float2bfloat16(sqrtf(CUEMU_BF(a))); }
static inline __nv_bfloat16 hrsqrt(__nv_bfloat16 a) { return __float2bfloat16(1.0f / sqrtf(CUEMU_BF(a))); }
static inline __nv_bfloat16 hrcp(__nv_bfloat16 a) { return __float2bfloat16(1.0f / CUEMU_BF(a)); }
static inline __nv_bfloat16 htanh(__nv_bfloat16 a) { return __float2bfloat16(tanhf(CUEMU_BF(a))); }

static inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) {
    return __nv_bfloat162(__hadd(a.x, b.x), __hadd(a.y, b.y));
}
static inline __nv_bfloat162 __hsub2(__nv_bfloat162 a, __nv_bfloat162 b) {
    return __nv_bfloat162(__hsub(a.x, b.x), __hsub(a.y, b.y));
}
static inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) {
    return __nv_bfloat162(__hmul(a.x, b.x), __hmul(a.y, b.y));
}
static inline __nv_bfloat162 __h2div(__nv_bfloat162 a, __nv_bfloat162 b) {
    return __nv_bfloat162(__hdiv(a.x, b.x), __hdiv(a.y, b.y));
}
static inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
    return __nv_bfloat162(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
static inline __nv_bfloat162 __hneg2(__nv_bfloat162 a) { return __nv_bfloat162(__hneg(a.x), __hneg(a.y)); }
static inline __nv_bfloat162 __habs2(__nv_bfloat162 a) { return __nv_bfloat162(__habs(a.x), __habs(a.y)); }
static inline __nv_bfloat162 __hmax2(__nv_bfloat162 a, __nv_bfloat162 b) {
    return __nv_bfloat162(__hmax(a.x, b.x), __hmax(a.y, b.y));
}
static inline __nv_bfloat162 __hmin2(__nv_bfloat162 a, __nv_bfloat162 b) {
    return __nv_bfloat162(__hmin(a.x, b.x), __hmin(a.y, b.y));
}

static inline __nv_bfloat16 operator+(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hadd(a, b); }
static inline __nv_bfloat16 operator-(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hsub(a, b); }
static inline __nv_bfloat16 operator*(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hmul(a, b); }
static inline __nv_bfloat16 operator/(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hdiv(a, b); }
// The compound assignments: a OP b is a = FN(a, b).
#define CUEMU_BF_ASSIGN(T, OP, FN)                   \
    static inline T& operator OP(T& a, const T& b) { \
        a = FN(a, b);                                \
        return a;                                    \
    }
CUEMU_BF_ASSIGN(__nv_bfloat16, +=, __hadd)
CUEMU_BF_ASSIGN(__nv_bfloat16, -=, __hsub)
CUEMU_BF_ASSIGN(__nv_bfloat16, *=, __hmul)
CUEMU_BF_ASSIGN(__nv_bfloat16, /=, __hdiv)
static inline __nv_bfloat16 operator+(const __nv_bfloat16& a) { return a; }
static inline __nv_bfloat16 operator-(const __nv_bfloat16& a) { return __hneg(a); }
static inline __nv_bfloat16& operator++(__nv_bfloat16& a) {
    a = __hadd(a, CUDART_ONE_BF16);
    return a;
}
static inline __nv_bfloat16& operator--(__nv_bfloat16& a) {
    a = __hsub(a, CUDART_ONE_BF16);
    return a;
}
static inline __nv_bfloat16 operator++(__nv_bfloat16& a, int) {
    __nv_bfloat16 o = a;
    ++a;
    return o;
}
static inline __nv_bfloat16 operator--(__nv_bfloat16& a, int) {
    __nv_bfloat16 o = a;
    --a;
    return o;
}
static inline bool operator==(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __heq(a, b); }
static inline bool operator!=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hne(a, b); }
static inline bool operator<(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hlt(a, b); }
static inline bool operator<=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hle(a, b); }
static inline bool operator>(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hgt(a, b); }
static inline bool operator>=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __hge(a, b); }
static inline __nv_bfloat162 operator+(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __hadd2(a, b); }
static inline __nv_bfloat162 operator-(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __hsub2(a, b); }
static inline __nv_bfloat162 operator*(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __hmul2(a, b); }
static inline __nv_bfloat162 operator/(const __nv_bfloat162& a, const __nv_bfloat162& b) { return __h2div(a, b); }
CUEMU_BF_ASSIGN(__nv_bfloat162, +=, __hadd2)
CUEMU_BF_ASSIGN(__nv_bfloat162, *=, __hmul2)
static inline __nv_bfloat162 operator-(const __nv_bfloat162& a) { return __hneg2(a); }
#undef CUEMU_BF_ASSIGN
#undef CUEMU_BF

// bf16 atomics (sm_80+): the sum is rounded to bf16 once, as on the GPU.
CUEMU_NOTSAN static inline __nv_bfloat16 atomicAdd(__nv_bfloat16* address, __nv_bfloat16 val) {
    cuemu::track_atomic(address, 2);
    __nv_bfloat16 old = *address;
    *address = __hadd(old, val);
    return old;
}
CUEMU_NOTSAN static inline __nv_bfloat162 atomicAdd(__nv_bfloat162* address, __nv_bfloat162 val) {
    cuemu::track_atomic(address, 4);
    __nv_bfloat162 old = *address;
    *address = __hadd2(old, val);
    return old;
}
