// Shared by every kernel source: fixed-width types, the strided layout, and the
// conversions of the 2-byte floats (done with PTX so that no CUDA header is needed).
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed char i8;
typedef short i16;
typedef int i32;
typedef long long i64;

#define MAXD 8
#define NO_BAD 0xffffffffffffffffull

// A tensor's logical shape and element strides; row-major walks go over `shape`.
struct Layout {
    i64 ndim;
    i64 shape[MAXD];
    i64 stride[MAXD];
};

// lin / s for non-negative operands, in 32 bits when both fit (a 64-bit division is several
// times the instructions, and most tensors' coordinates fit).
__device__ __forceinline__ i64 divq(i64 lin, i64 s) {
    return ((u64)(lin | s) >> 32) == 0 ? (i64)((u32)lin / (u32)s) : lin / s;
}

// A read of x by gather and take. Under GATHER_CUDA_X_HINT=last (an experiment of
// scripts/gpu_check.sh's A/B, which compiles the kernels with GATHER_X_EVICT_LAST) the read
// carries an L2 evict-last policy, so that x's lines outlast the index and output streams
// (read and written evict-first) in W5's and W9's random reads.
#if defined(GATHER_X_EVICT_LAST) && !defined(GATHER_CUDA_EMU)
__device__ __forceinline__ u64 x_policy() {
    u64 p;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
    return p;
}
__device__ __forceinline__ u8 read_x(const u8* a) {
    u16 v;
    asm("ld.global.L2::cache_hint.u8 %0, [%1], %2;" : "=h"(v) : "l"(a), "l"(x_policy()));
    return (u8)v;
}
__device__ __forceinline__ u16 read_x(const u16* a) {
    u16 v;
    asm("ld.global.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(v) : "l"(a), "l"(x_policy()));
    return v;
}
__device__ __forceinline__ u32 read_x(const u32* a) {
    u32 v;
    asm("ld.global.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(v) : "l"(a), "l"(x_policy()));
    return v;
}
__device__ __forceinline__ u64 read_x(const u64* a) {
    u64 v;
    asm("ld.global.L2::cache_hint.u64 %0, [%1], %2;" : "=l"(v) : "l"(a), "l"(x_policy()));
    return v;
}
#else
template <typename W>
__device__ __forceinline__ W read_x(const W* a) {
    return *a;
}
#endif

// The element offset of row-major position `lin` of `L`. The first axis takes what is left,
// so a 1-d walk does no division.
__device__ __forceinline__ i64 offset_of(const Layout& L, i64 lin) {
    i64 off = 0;
    for (int d = (int)L.ndim - 1; d > 0; --d) {
        i64 s = L.shape[d];
        i64 q = divq(lin, s);
        off += (lin - q * s) * L.stride[d];
        lin = q;
    }
    if (L.ndim > 0) off += lin * L.stride[0];
    return off;
}

// The launch's dynamic shared memory as an array of T (16-byte aligned). Declared as bytes, so
// that kernels of different element types share the one extern declaration.
#ifdef GATHER_CUDA_EMU
#define DYNAMIC_SHARED(T, name) T* name = (T*)emu::dynamic_shared()
#else
#define DYNAMIC_SHARED(T, name)                     \
    extern __shared__ __align__(16) u8 dyn_shared_[]; \
    T* name = (T*)dyn_shared_
#endif

#ifdef GATHER_CUDA_EMU
// The CPU emulator of the tests (emu/build.py): the compiler's half type converts the same way.
__device__ __forceinline__ float h2f(u16 h) { return (float)emu::cast_bits<_Float16>(h); }
__device__ __forceinline__ u16 f2h(float f) { return emu::cast_bits<u16>((_Float16)f); }
#else
__device__ __forceinline__ float h2f(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ u16 f2h(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
#endif
__device__ __forceinline__ float bf2f(u16 b) { return __int_as_float(((u32)b) << 16); }
__device__ __forceinline__ u16 f2bf(float f) {
    u32 u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return (u16)(u >> 16);
}

// Records the smallest bad position (row-major in the index), so that the host reports the
// first bad value, as the CPU library does. flag[1] holds the device address of a mapped host
// word (0 if none): the first flagging of a call also sets that word, so that a call with no
// bad value needs no copy of the flag, only the wait for its kernels.
__device__ __forceinline__ void flag_bad(u64* flag, u64 pos) {
    if (atomicMin(flag, pos) == NO_BAD) {
        u64* host = (u64*)flag[1];
        if (host) *(volatile u64*)host = 1;
    }
}

// Maps an index value onto 0..size under the bounds rule (0 strict, 1 wrap: -size..size,
// 2 modulo); -1 when it is out of range.
__device__ __forceinline__ i64 map_index(i64 v, i64 size, int rule) {
    if (rule == 1 && v < 0) v += size;
    if (rule == 2 && size > 0) { v %= size; if (v < 0) v += size; }
    return (v >= 0 && v < size) ? v : -1;
}

// The rows of an index: row-major positions over `shape` (the index's extents, with 1 on the
// lane axes that the index repeats); `istride` reads the index, `kstride` forms the key (the
// value's multiplier at dim), `pstride` the row-major position in the whole index.
struct RowMap {
    i64 ndim;
    i64 shape[MAXD];
    i64 istride[MAXD];
    i64 kstride[MAXD];
    i64 pstride[MAXD];
};

