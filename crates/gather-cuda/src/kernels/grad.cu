// ---- gradients: the elementwise steps of the backward formulas, and the 2-byte float casts ----
// The backward formulas are compositions of the forward ops (gather, scatter_add, scatter_reduce
// ...) and these few elementwise steps, run in the gradient's arithmetic type (f32 for the
// 2-byte floats, which are widened first and rounded once at the end, as the CPU library does).

#define EW_EQ 0      // out = a == b ? 1 : 0
#define EW_MUL 1     // out = a * b
#define EW_DIV 2     // out = a / b
#define EW_SELECT 3  // out = c != 0 ? a : b
#define EW_SUB 4     // out = a - b
#define EW_EXP 5     // out = exp(a)
#define EW_EQN 6     // out = a == b or both NaN ? 1 : 0
#define EW_MAX 7     // out = b < a ? a : b (the CPU's max for the non-NaN operands it sees)

__device__ __forceinline__ float ew_exp(float x) { return expf(x); }
__device__ __forceinline__ double ew_exp(double x) { return exp(x); }

// `out` is row-major over the n positions; a, b and c are read through their layouts (stride 0
// for a broadcast constant). c is read only by EW_SELECT.
#define EW(T)                                                                                  \
    extern "C" __global__ void ew_##T(int op, T* out, const T* a, Layout la, const T* b,       \
                                      Layout lb, const T* c, Layout lc, i64 n) {               \
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;                        \
             i += (i64)gridDim.x * blockDim.x) {                                               \
            const T x = a[offset_of(la, i)];                                                   \
            const T y = b[offset_of(lb, i)];                                                   \
            T r;                                                                               \
            if (op == EW_EQ) r = x == y ? (T)1 : (T)0;                                         \
            else if (op == EW_MUL) r = x * y;                                                  \
            else if (op == EW_DIV) r = x / y;                                                  \
            else if (op == EW_SUB) r = x - y;                                                  \
            else if (op == EW_EXP) r = ew_exp(x);                                              \
            else if (op == EW_EQN) r = (x == y || (x != x && y != y)) ? (T)1 : (T)0;           \
            else if (op == EW_MAX) r = y < x ? x : y;                                          \
            else r = c[offset_of(lc, i)] != (T)0 ? x : y;                                      \
            out[i] = r;                                                                        \
        }                                                                                      \
    }

EW(float)
EW(double)

// The 2-byte floats to f32 and back (round to nearest even), row-major `out`.
#define CAST(NAME, TO, FROM, CONV)                                                             \
    extern "C" __global__ void NAME(TO* out, const FROM* a, Layout la, i64 n) {                \
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;                        \
             i += (i64)gridDim.x * blockDim.x)                                                 \
            out[i] = CONV(a[offset_of(la, i)]);                                                \
    }

CAST(widen_f16, float, u16, h2f)
CAST(widen_bf16, float, u16, bf2f)
CAST(narrow_f16, u16, float, f2h)
CAST(narrow_bf16, u16, float, f2bf)

// out = a == b ? g : 0 for i64 positions a and b (the winner of a group, the arg of a
// scatter): the gradient kept only where a source is the one its group picked.
#define KEEP_EQ(T)                                                                             \
    extern "C" __global__ void keep_eq_##T(T* out, const T* g, Layout lg, const i64* a,        \
                                           Layout la, const i64* b, Layout lb, i64 n) {        \
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;                        \
             i += (i64)gridDim.x * blockDim.x)                                                 \
            out[i] = a[offset_of(la, i)] == b[offset_of(lb, i)] ? g[offset_of(lg, i)] : (T)0;  \
    }

KEEP_EQ(float)
KEEP_EQ(double)
