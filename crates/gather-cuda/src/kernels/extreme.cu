// amax/amin without a sort: every contribution packs (its value as an order-preserving 32-bit
// word, its row as the tie-break) into a u64 and takes an atomicMax per output element; a second
// pass turns the winners into values. The atomic's result does not depend on the order of the
// atomics, so the output is bitwise the same on every run, and it is the CPU library's fold:
// equal values (-0 and +0 included) keep the first row, any NaN wins and the last NaN's bits
// are kept. For elements of at most 4 bytes.

// The order-preserving word of a value for amax (amin inverts it); NaN is above everything.
template <typename T> struct Ord;
#define ORD_INT(T, FLIP)                                                                        \
    template <> struct Ord<T> {                                                                 \
        static const bool HAS_NAN = false;                                                      \
        static __device__ u32 of(T v) { return (u32)(i64)v ^ FLIP; }                            \
        static __device__ bool nan(T) { return false; }                                         \
    };
ORD_INT(u8, 0u) ORD_INT(u16, 0u) ORD_INT(u32, 0u)
ORD_INT(i8, 0x80000000u) ORD_INT(i16, 0x80000000u) ORD_INT(i32, 0x80000000u)

__device__ __forceinline__ u32 ord_f32(float f) {
    u32 u = __float_as_uint(f == 0.0f ? 0.0f : f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
struct OrdF32 {
    static const bool HAS_NAN = true;
    static __device__ u32 of(float v) { return ord_f32(v); }
    static __device__ bool nan(float v) { return v != v; }
};
struct OrdF16 {
    static const bool HAS_NAN = true;
    static __device__ u32 of(u16 v) { return ord_f32(h2f(v)); }
    static __device__ bool nan(u16 v) { float f = h2f(v); return f != f; }
};
struct OrdBF16 {
    static const bool HAS_NAN = true;
    static __device__ u32 of(u16 v) { return ord_f32(bf2f(v)); }
    static __device__ bool nan(u16 v) { float f = bf2f(v); return f != f; }
};
struct OrdBool {
    static const bool HAS_NAN = false;
    static __device__ u32 of(u8 v) { return v != 0; }
    static __device__ bool nan(u8) { return false; }
};

// The packed word of a contribution from `row`: 0 means "none" (rows stay below 2^32 - 1). A
// float's word is never all ones, which is the NaN class (the last NaN's row wins).
template <typename O, typename T>
__device__ __forceinline__ u64 pack(T v, u32 row, int is_min) {
    if (O::nan(v)) return (0xffffffffull << 32) | (u64)row;
    u32 o = O::of(v);
    if (is_min) o = ~o;
    return ((u64)o << 32) | (u64)(~row);
}

// Pass 1: one thread per (index row, lane).
template <typename O, typename T, typename I>
__device__ void extreme_pass1(u64* best, const T* src, const I* idx, RowMap m, Layout rmap,
                              Layout lsrc, i64 lanes, int dim, i64 size, i64 n, int is_min,
                              u64* flag) {
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += step) {
        const i64 r = divq(p, lanes), l = p - r * lanes;
        i64 lin = r, ioff = 0, key = 0, pos = 0;
        for (int d = (int)m.ndim - 1; d >= 0; --d) {
            i64 c;
            if (d > 0) {
                i64 q = divq(lin, m.shape[d]);
                c = lin - q * m.shape[d];
                lin = q;
            } else {
                c = lin;
            }
            ioff += c * m.istride[d];
            pos += c * m.pstride[d];
            if (d != dim) key += c * m.kstride[d];
        }
        const i64 v = map_index((i64)idx[ioff], size, 0);
        if (v < 0) {
            if (l == 0) flag_bad(flag, (u64)pos);
            continue;
        }
        key += v * m.kstride[dim];
        const T x = src[offset_of(rmap, r) + offset_of(lsrc, l)];
        atomicMax(&best[key * lanes + l], pack<O, T>(x, (u32)r, is_min));
    }
}

// Pass 2: one thread per (target, lane); writes the winner (or keeps self's value when self
// wins or nothing was scattered there).
template <typename O, typename T>
__device__ void extreme_pass2(T* out, const u64* best, const T* src, Layout kmap, Layout lout,
                              Layout rmap, Layout lsrc, i64 lanes, i64 n, int is_min,
                              int include_self) {
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 q = (i64)blockIdx.x * blockDim.x + threadIdx.x; q < n; q += step) {
        const u64 w = best[q];
        if (w == 0) continue;
        const i64 k = divq(q, lanes), l = q - k * lanes;
        const bool nan = O::HAS_NAN && (w >> 32) == 0xffffffffull;
        const u32 row = nan ? (u32)w : ~(u32)w;
        const T x = src[offset_of(rmap, row) + offset_of(lsrc, l)];
        T* o = out + offset_of(kmap, k) + offset_of(lout, l);
        if (include_self && !nan) {
            const T self = *o;
            if (O::nan(self)) continue;
            u32 so = O::of(self), xo = O::of(x);
            if (is_min) {
                so = ~so;
                xo = ~xo;
            }
            if (xo <= so) continue;  // self comes first: it keeps ties
        }
        *o = x;
    }
}

#define EXTREME(NAME, O, T)                                                                     \
    extern "C" __global__ void extreme1_##NAME##_i64(                                          \
        u64* best, const T* src, const i64* idx, RowMap m, Layout rmap, Layout lsrc, i64 lanes, \
        int dim, i64 size, i64 n, int is_min, u64* flag) {                                     \
        extreme_pass1<O, T, i64>(best, src, idx, m, rmap, lsrc, lanes, dim, size, n, is_min,   \
                                 flag);                                                        \
    }                                                                                           \
    extern "C" __global__ void extreme1_##NAME##_i32(                                          \
        u64* best, const T* src, const i32* idx, RowMap m, Layout rmap, Layout lsrc, i64 lanes, \
        int dim, i64 size, i64 n, int is_min, u64* flag) {                                     \
        extreme_pass1<O, T, i32>(best, src, idx, m, rmap, lsrc, lanes, dim, size, n, is_min,   \
                                 flag);                                                        \
    }                                                                                           \
    extern "C" __global__ void extreme2_##NAME(T* out, const u64* best, const T* src,          \
                                               Layout kmap, Layout lout, Layout rmap,          \
                                               Layout lsrc, i64 lanes, i64 n, int is_min,      \
                                               int include_self) {                             \
        extreme_pass2<O, T>(out, best, src, kmap, lout, rmap, lsrc, lanes, n, is_min,          \
                            include_self);                                                     \
    }
EXTREME(f32, OrdF32, float)
EXTREME(f16, OrdF16, u16)
EXTREME(bf16, OrdBF16, u16)
EXTREME(bool, OrdBool, u8)
EXTREME(u8, Ord<u8>, u8)
EXTREME(i8, Ord<i8>, i8)
EXTREME(u16, Ord<u16>, u16)
EXTREME(i16, Ord<i16>, i16)
EXTREME(u32, Ord<u32>, u32)
EXTREME(i32, Ord<i32>, i32)
