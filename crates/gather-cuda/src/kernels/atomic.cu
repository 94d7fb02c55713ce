// ---- the opt-in atomic scatter_add and scatter_reduce (`Options::deterministic(false)`) ----
// One thread per index position folds its src element into the output (a copy of the input)
// with a device atomic: no sort, but the order the contributions land in, and so a float sum's
// or product's rounding, changes from run to run. Bad values are flagged (the smallest
// row-major position in the index) and skipped, as in the sorted path; the op then reports the
// first one and discards the output. Without self, the targets the index names are first set
// to the reduction's identity (`atomic_reset`); a mean counts its contributions and divides
// afterwards (`atomic_mean`). The reduction codes are reduce.cuh's R_*.

// max/min as the sorted path folds them: NaN wins and stays.
template <typename T> __device__ __forceinline__ T fold_max(T a, T v) {
    return (a != a || v != v) ? (a != a ? a : v) : (v > a ? v : a);
}
template <typename T> __device__ __forceinline__ T fold_min(T a, T v) {
    return (a != a || v != v) ? (a != a ? a : v) : (v < a ? v : a);
}
template <typename T> __device__ __forceinline__ T fold(int op, T a, T v) {
    if (op == R_PROD) return a * v;
    if (op == R_AMAX) return fold_max(a, v);
    if (op == R_AMIN) return fold_min(a, v);
    return a + v;
}

// A compare-and-swap loop on the word of the element's width.
__device__ __forceinline__ void atomic_fold(float* a, float v, int op) {
    if (op == R_SUM || op == R_MEAN) {
        atomicAdd(a, v);
        return;
    }
    u32* w = (u32*)a;
    u32 old = *w, seen;
    do {
        seen = old;
        const u32 nw = __float_as_uint(fold(op, __uint_as_float(seen), v));
        if (nw == seen) return;
        old = atomicCAS(w, seen, nw);
    } while (old != seen);
}
__device__ __forceinline__ void atomic_fold(double* a, double v, int op) {
    if (op == R_SUM || op == R_MEAN) {
        atomicAdd(a, v);
        return;
    }
    u64* w = (u64*)a;
    u64 old = *w, seen;
    do {
        seen = old;
        const u64 nw = (u64)__double_as_longlong(fold(op, __longlong_as_double((i64)seen), v));
        if (nw == seen) return;
        old = atomicCAS(w, seen, nw);
    } while (old != seen);
}
__device__ __forceinline__ void atomic_fold(i32* a, i32 v, int op) {
    if (op == R_AMAX) {
        atomicMax(a, v);
    } else if (op == R_AMIN) {
        atomicMin(a, v);
    } else if (op == R_PROD) {
        i32 old = *a, seen;
        do {
            seen = old;
            old = atomicCAS(a, seen, (i32)((u32)seen * (u32)v));
        } while (old != seen);
    } else {
        atomicAdd(a, v);
    }
}
__device__ __forceinline__ void atomic_fold(i64* a, i64 v, int op) {
    if (op == R_AMAX) {
        atomicMax((long long*)a, (long long)v);
    } else if (op == R_AMIN) {
        atomicMin((long long*)a, (long long)v);
    } else if (op == R_PROD) {
        u64* w = (u64*)a;
        u64 old = *w, seen;
        do {
            seen = old;
            old = atomicCAS(w, seen, seen * (u64)v);
        } while (old != seen);
    } else {
        // Two's complement: the unsigned sum has the signed sum's bits.
        atomicAdd((u64*)a, (u64)v);
    }
}

// `il` walks the index, `sl` src's leading block and `ol` the output over the index's shape,
// with the output's stride on `dim` zero: a value `v` lands `v * ostride` further. `counts`
// (a mean's, per output element) is null otherwise.
#define ATOMIC(T, I)                                                                           \
    extern "C" __global__ void atomic_reduce_##T##_##I(                                        \
        T* out, const T* src, Layout sl, const I* idx, Layout il, Layout ol, i64 ostride,      \
        i64 size, i64 n, int op, i32* counts, u64* flag) {                                     \
        for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < n;                        \
             p += (i64)gridDim.x * blockDim.x) {                                               \
            const i64 v = map_index((i64)idx[offset_of(il, p)], size, 0);                      \
            if (v < 0) {                                                                       \
                flag_bad(flag, (u64)p);                                                        \
                continue;                                                                      \
            }                                                                                  \
            const i64 at = offset_of(ol, p) + v * ostride;                                     \
            atomic_fold(out + at, src[offset_of(sl, p)], op);                                  \
            if (counts) atomicAdd(counts + at, 1);                                             \
        }                                                                                      \
    }                                                                                          \
    extern "C" __global__ void atomic_reset_##T##_##I(T* out, const I* idx, Layout il,         \
                                                      Layout ol, i64 ostride, i64 size, i64 n, \
                                                      T identity) {                            \
        for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < n;                        \
             p += (i64)gridDim.x * blockDim.x) {                                               \
            const i64 v = map_index((i64)idx[offset_of(il, p)], size, 0);                      \
            if (v >= 0) out[offset_of(ol, p) + v * ostride] = identity;                        \
        }                                                                                      \
    }

ATOMIC(float, i64)
ATOMIC(float, i32)
ATOMIC(double, i64)
ATOMIC(double, i32)
ATOMIC(i32, i64)
ATOMIC(i32, i32)
ATOMIC(i64, i64)
ATOMIC(i64, i32)

// A float mean: each output element with contributions divided by their count (self counted
// in the counts' start when included); the others keep their value.
#define MEAN(T)                                                                                \
    extern "C" __global__ void atomic_mean_##T(T* out, const i32* counts, i64 n) {             \
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;                        \
             i += (i64)gridDim.x * blockDim.x)                                                 \
            if (counts[i] > 0) out[i] = out[i] / (T)counts[i];                                 \
    }

MEAN(float)
MEAN(double)
