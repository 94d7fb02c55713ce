// ---- sort, argsort, topk: a stable LSD radix sort of order keys, lanes last ----
// Positions p = lane * len + j walk the input with the sorted dim last (its layout xl). Every
// element gets an unsigned key whose integer order is the CPU library's order: NaN above every
// number, -0.0 equal to 0.0. A flipped (descending, largest-first) order sorts the complemented
// keys; being stable, equal elements keep their index order either way. The keys are sorted
// 32 bits at a time from the lowest word, then by lane, each pass stable (radix_count and
// radix_scatter, in the scatter source), carrying the positions.

__device__ __forceinline__ u64 key_f32(u32 b) {
    if ((b & 0x7fffffffu) > 0x7f800000u) return 0xffffffffull;  // NaN: the largest
    if (b == 0x80000000u) b = 0u;                                // -0.0 == 0.0
    return (b & 0x80000000u) ? (u64)(u32)(~b) : (u64)(b | 0x80000000u);
}
__device__ __forceinline__ u64 key_f64(u64 b) {
    if ((b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) return ~0ull;
    if (b == 0x8000000000000000ull) b = 0ull;
    return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}
__device__ __forceinline__ u64 key_half(u16 b, u32 inf) {
    if ((u32)(b & 0x7fffu) > inf) return 0xffffull;
    if (b == 0x8000u) b = 0u;
    return (b & 0x8000u) ? (u64)(u16)(~b) : (u64)(u16)(b | 0x8000u);
}

// keys[i] = word `word` of the key of the element at position perm[i] (complemented with flip).
#define KEYS(NAME, T, KEY, BITS)                                                               \
    extern "C" __global__ void sort_keys_##NAME(u32* keys, const T* x, Layout xl,              \
                                                const u32* perm, i64 n, int word, int flip) {  \
        const u64 mask = BITS >= 64 ? ~0ull : ((1ull << (BITS & 63)) - 1ull);                  \
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;                        \
             i += (i64)gridDim.x * blockDim.x) {                                               \
            const T v = x[offset_of(xl, (i64)perm[i])];                                        \
            u64 k = KEY;                                                                       \
            if (flip) k = ~k & mask;                                                           \
            keys[i] = (u32)(k >> (32 * word));                                                 \
        }                                                                                      \
    }

KEYS(f32, u32, key_f32(v), 32)
KEYS(f64, u64, key_f64(v), 64)
KEYS(f16, u16, key_half(v, 0x7c00u), 16)
KEYS(bf16, u16, key_half(v, 0x7f80u), 16)
KEYS(i8, i8, (u64)(u8)((u8)v ^ 0x80u), 8)
KEYS(i16, i16, (u64)(u16)((u16)v ^ 0x8000u), 16)
KEYS(i32, i32, (u64)((u32)v ^ 0x80000000u), 32)
KEYS(i64, i64, ((u64)v ^ 0x8000000000000000ull), 64)
KEYS(u8, u8, (u64)v, 8)
KEYS(u16, u16, (u64)v, 16)
KEYS(u32, u32, (u64)v, 32)
KEYS(u64, u64, (u64)v, 64)

extern "C" __global__ void sort_iota(u32* out, i64 n) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x)
        out[i] = (u32)i;
}

// The lane of every position, for the last (most significant) pass.
extern "C" __global__ void sort_lanes(u32* keys, const u32* perm, i64 n, i64 len) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x)
        keys[i] = (u32)((i64)perm[i] / len);
}

// The first k of every sorted lane: values (unless vout is null) and their positions in the lane.
#define TAKE(W)                                                                                \
    extern "C" __global__ void sort_take_##W(W* vout, Layout vl, i64* iout, Layout il,         \
                                             const W* x, Layout xl, const u32* perm, i64 n,    \
                                             i64 len, i64 k) {                                 \
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;                        \
             i += (i64)gridDim.x * blockDim.x) {                                               \
            const i64 lane = i / len, j = i - lane * len;                                      \
            if (j >= k) continue;                                                              \
            const i64 q = lane * k + j, p = (i64)perm[i];                                      \
            if (vout) vout[offset_of(vl, q)] = x[offset_of(xl, p)];                            \
            iout[offset_of(il, q)] = p - (p / len) * len;                                      \
        }                                                                                      \
    }

TAKE(u8)
TAKE(u16)
TAKE(u32)
TAKE(u64)
