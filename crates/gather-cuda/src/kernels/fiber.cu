// ---- short fibers: one block sorts and folds each fiber in shared memory ----
// A fiber is the index's positions along dim at one coordinate of the other axes; its
// contributions only reach the same coordinate of the output, so fibers are independent. When a
// fiber has at most FIBER_MAX positions, a block loads it as (value << 12 | position) keys,
// bitonic-sorts them (equal values stay in position order, as the position is part of the key),
// and folds each run of equal values: one launch instead of a global sort.
#define FIBER_MAX 2048
#define FIBER_BITS 12
#define NO_KEY 0xffffffffffffffffull

// One compare-exchange of a bitonic stage, seen from position i: the lower position of a pair
// keeps the smaller key in an ascending block of k2 keys, the larger in a descending one.
__device__ __forceinline__ u64 bitonic_keep(u64 x, u64 other, int i, int j2, int k2) {
    const bool lower = (i & j2) == 0, ascending = (i & k2) == 0;
    return (lower == ascending) == (x < other) ? x : other;
}

// Sorts mp (a power of two, at most twice blockDim.x) keys in shared memory, ascending; every
// thread of the block calls it. Thread t holds positions t and t + mp/2 in registers: pairs a
// stride under 32 apart are in one warp and meet by shuffles, pairs mp/2 apart in one thread;
// only the strides in between go through shared memory (a barrier each). For a fiber of 512
// that is 9 of the 45 stages. Not inlined: one copy serves every fiber kernel.
__device__ __noinline__ void bitonic_sort(u64* keys, int mp) {
    const int half = mp >> 1, t = (int)threadIdx.x;
    const bool mine = t < half;
    u64 a = mine ? keys[t] : NO_KEY, b = mine ? keys[t + half] : NO_KEY;
    __syncthreads();
    for (int k2 = 2; k2 <= mp; k2 <<= 1) {
        for (int j2 = k2 >> 1; j2 > 0; j2 >>= 1) {
            u64 pa, pb;
            if (j2 == half) {
                pa = b;
                pb = a;
            } else if (j2 < 32) {
                pa = __shfl_xor_sync(0xffffffffu, a, j2);
                pb = __shfl_xor_sync(0xffffffffu, b, j2);
            } else {
                if (mine) {
                    keys[t] = a;
                    keys[t + half] = b;
                }
                __syncthreads();
                pa = mine ? keys[t ^ j2] : NO_KEY;
                pb = mine ? keys[(t + half) ^ j2] : NO_KEY;
                __syncthreads();
            }
            a = bitonic_keep(a, pa, t, j2, k2);
            b = bitonic_keep(b, pb, t + half, j2, k2);
        }
    }
    if (mine) {
        keys[t] = a;
        keys[t + half] = b;
    }
    __syncthreads();
}

// A set needs no sort: each position of the line keeps the last index position that names it,
// the largest, which a shared-memory atomicMax finds in any order (`win` holds it plus one).
// The line's copy from x was made by the same threads, for the same positions, as the writes.
template <typename T, typename I>
__device__ void set_fiber(T* out, i64 out_sd, const T* src, i64 src_sd, T value, const I* idx,
                          i64 idx_sd, int m, i64 size, int rule, i64 pos, i64 pos_sd, u32* win,
                          u64* flag) {
    for (i64 v = threadIdx.x; v < size; v += blockDim.x) win[v] = 0;
    __syncthreads();
    for (int j = threadIdx.x; j < m; j += blockDim.x) {
        const i64 v = map_index((i64)idx[j * idx_sd], size, rule);
        if (v < 0)
            flag_bad(flag, (u64)(pos + j * pos_sd));
        else
            atomicMax(&win[v], (u32)j + 1);
    }
    __syncthreads();
    for (i64 v = threadIdx.x; v < size; v += blockDim.x) {
        const u32 w = win[v];
        if (w) out[v * out_sd] = src ? src[(i64)(w - 1) * src_sd] : value;
    }
    __syncthreads();
}

// With `x`, the fibers cover every line of the output along dim, and each block first copies
// its line from x (the output starts as x): no copy of x before the launch, which would write
// the whole output once more and cost the call another operation in the stream.
template <typename N, typename T, typename I>
__device__ void fiber_impl(T* out, const T* x, Layout fx, i64 x_sd, const T* src, T value,
                           T alpha, int use_alpha, const I* idx, Layout fidx, i64 idx_sd,
                           Layout fsrc, i64 src_sd, Layout fout, i64 out_sd, Layout fpos,
                           i64 pos_sd, i64 n_fibers, int m, int mp, i64 size, int rule,
                           int reduce, int include_self, u64* flag) {
    typedef typename N::Acc A;
    __shared__ u64 keys[FIBER_MAX];
    for (i64 f = blockIdx.x; f < n_fibers; f += gridDim.x) {
        const i64 io = offset_of(fidx, f), oo = offset_of(fout, f);
        const i64 so = src ? offset_of(fsrc, f) : 0;
        if (x) {
            const i64 xo = offset_of(fx, f);
            for (i64 v = threadIdx.x; v < size; v += blockDim.x)
                out[oo + v * out_sd] = x[xo + v * x_sd];
        }
        if (reduce == R_SET && size <= 2 * FIBER_MAX) {
            set_fiber(out + oo, out_sd, src ? src + so : nullptr, src_sd, value, idx + io, idx_sd,
                      m, size, rule, offset_of(fpos, f), pos_sd, (u32*)keys, flag);
            continue;
        }
        for (int j = threadIdx.x; j < mp; j += blockDim.x) {
            u64 k = NO_KEY;
            if (j < m) {
                i64 v = map_index((i64)idx[io + j * idx_sd], size, rule);
                if (v < 0)
                    flag_bad(flag, (u64)(offset_of(fpos, f) + j * pos_sd));
                else
                    k = ((u64)v << FIBER_BITS) | (u64)j;
            }
            keys[j] = k;
        }
        __syncthreads();
        bitonic_sort(keys, mp);
        for (int t = threadIdx.x; t < m; t += blockDim.x) {
            const u64 k = keys[t];
            if (k == NO_KEY) continue;
            const u64 v = k >> FIBER_BITS;
            if (t > 0 && (keys[t - 1] >> FIBER_BITS) == v) continue;
            int e = t + 1;
            while (e < m && keys[e] != NO_KEY && (keys[e] >> FIBER_BITS) == v) ++e;
            T* dst = out + oo + (i64)v * out_sd;
            auto load = [&](int r) -> A {
                const i64 j = (i64)(keys[r] & ((1ull << FIBER_BITS) - 1));
                A x = N::ld(src ? src[so + j * src_sd] : value);
                return use_alpha ? N::mul(x, N::ld(alpha)) : x;
            };
            if (reduce == R_SET) {
                const i64 j = (i64)(keys[e - 1] & ((1ull << FIBER_BITS) - 1));
                *dst = src ? src[so + j * src_sd] : value;
                continue;
            }
            int r = t;
            A acc = include_self ? N::ld(*dst) : load(r++);
            for (; r < e; ++r) acc = combine<N>(reduce, acc, load(r));
            if (reduce == R_MEAN) acc = N::mean(acc, (i64)(e - t) + (include_self ? 1 : 0));
            *dst = N::st(acc);
        }
        __syncthreads();
    }
}

#define FIBER(NAME, N, T, I)                                                                    \
    extern "C" __global__ void __launch_bounds__(1024) fiber_##NAME##_##I(                     \
        T* out, const T* x, Layout fx, i64 x_sd, const T* src, T value, T alpha, int use_alpha, \
        const I* idx, Layout fidx, i64 idx_sd, Layout fsrc, i64 src_sd, Layout fout,           \
        i64 out_sd, Layout fpos, i64 pos_sd, i64 n_fibers, int m, int mp, i64 size, int rule,  \
        int reduce, int include_self, u64* flag) {                                             \
        fiber_impl<N, T, I>(out, x, fx, x_sd, src, value, alpha, use_alpha, idx, fidx, idx_sd,  \
                            fsrc, src_sd, fout, out_sd, fpos, pos_sd, n_fibers, m, mp, size,    \
                            rule, reduce, include_self, flag);                                  \
    }
#define FIBERS(NAME, N, T) FIBER(NAME, N, T, i64) FIBER(NAME, N, T, i32)
FIBERS(f32, NumF32, float)
FIBERS(f64, NumF64, double)
FIBERS(f16, NumF16, u16)
FIBERS(bf16, NumBF16, u16)
FIBERS(bool, NumBool, u8)
FIBERS(u8, Num<u8>, u8)
FIBERS(i8, Num<i8>, i8)
FIBERS(i16, Num<i16>, i16)
FIBERS(u16, Num<u16>, u16)
FIBERS(i32, Num<i32>, i32)
FIBERS(u32, Num<u32>, u32)
FIBERS(i64, Num<i64>, i64)
FIBERS(u64, Num<u64>, u64)
