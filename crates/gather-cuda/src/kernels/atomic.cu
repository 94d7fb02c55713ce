// ---- the opt-in atomic scatter_add (`Options::deterministic(false)`) ----
// One thread per index position adds its src element into the output (a copy of the input) with
// a device atomic: no sort, but the order of the additions, and so a float sum's rounding,
// changes from run to run. Bad values are flagged (the smallest row-major position in the index)
// and skipped, as in the sorted path; the op then reports the first one and discards the output.

__device__ __forceinline__ void atomic_add(float* a, float v) { atomicAdd(a, v); }
__device__ __forceinline__ void atomic_add(double* a, double v) { atomicAdd(a, v); }
__device__ __forceinline__ void atomic_add(i32* a, i32 v) { atomicAdd(a, v); }
// Two's complement: the unsigned sum has the signed sum's bits.
__device__ __forceinline__ void atomic_add(i64* a, i64 v) { atomicAdd((u64*)a, (u64)v); }

// `il` walks the index, `sl` src's leading block and `ol` the output over the index's shape,
// with the output's stride on `dim` zero: the value adds `v * ostride` there.
#define ATOMIC_ADD(T, I)                                                                       \
    extern "C" __global__ void atomic_add_##T##_##I(T* out, const T* src, Layout sl,           \
                                                    const I* idx, Layout il, Layout ol,        \
                                                    i64 ostride, i64 size, i64 n, u64* flag) { \
        for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < n;                        \
             p += (i64)gridDim.x * blockDim.x) {                                               \
            const i64 v = map_index((i64)idx[offset_of(il, p)], size, 0);                      \
            if (v < 0) {                                                                       \
                flag_bad(flag, (u64)p);                                                        \
                continue;                                                                      \
            }                                                                                  \
            atomic_add(out + offset_of(ol, p) + v * ostride, src[offset_of(sl, p)]);           \
        }                                                                                      \
    }

ATOMIC_ADD(float, i64)
ATOMIC_ADD(float, i32)
ATOMIC_ADD(double, i64)
ATOMIC_ADD(double, i32)
ATOMIC_ADD(i32, i64)
ATOMIC_ADD(i32, i32)
ATOMIC_ADD(i64, i64)
ATOMIC_ADD(i64, i32)
