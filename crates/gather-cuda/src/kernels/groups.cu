// ---- the group folds that the scatter's apply has not: first, logsumexp, var, std ----
// On the scatter's sorted runs (keys, rows, starts), one thread per (run, lane), in index order
// as the CPU library's folds: first moves the first source's bits (any width); logsumexp keeps
// a running maximum and a rescaled sum; var and std take Welford's update; in f32 for
// f16/bf16/f32 and f64 for f64.

#define FIRST(W)                                                                                \
    extern "C" __global__ void first_##W(W* out, const W* src, const u32* keys,                \
                                         const u32* rows, const u32* starts,                   \
                                         const u32* nruns, Layout kmap, Layout lout,           \
                                         Layout lsrc, Layout rmap, i64 lanes) {                \
        const i64 total = (i64)nruns[0] * lanes;                                                \
        const i64 step = (i64)gridDim.x * blockDim.x;                                           \
        for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {        \
            const i64 w = divq(t, lanes), l = t - w * lanes;                                    \
            const u32 s = starts[w];                                                            \
            if (s == starts[w + 1]) continue;                                                   \
            out[offset_of(kmap, keys[s]) + offset_of(lout, l)] =                                \
                src[offset_of(rmap, rows[s]) + offset_of(lsrc, l)];                             \
        }                                                                                       \
    }
FIRST(u8) FIRST(u16) FIRST(u32) FIRST(u64)

__device__ __forceinline__ float g_exp(float x) { return expf(x); }
__device__ __forceinline__ double g_exp(double x) { return exp(x); }
__device__ __forceinline__ float g_log(float x) { return logf(x); }
__device__ __forceinline__ double g_log(double x) { return log(x); }
__device__ __forceinline__ float g_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double g_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float g_inf(float) { return __int_as_float(0x7f800000); }
__device__ __forceinline__ double g_inf(double) { return __longlong_as_double(0x7ff0000000000000ll); }
template <typename A> __device__ __forceinline__ bool g_finite(A x) { return x == x && x - x == (A)0; }
// The shift of the running maximum: itself when finite, else 0 (so that inf - inf never occurs).
template <typename A> __device__ __forceinline__ A lse_shift(A m) { return g_finite(m) ? m : (A)0; }

// A running log-sum-exp, as the CPU library's `Lse`: the maximum, the sum of exp(x - shift),
// rescaled when the shift moves, and whether a NaN came (then the result is NaN).
template <typename A> struct Lse {
    A m, sum;
    bool nan;
    __device__ Lse() : m(-g_inf((A)0)), sum((A)0), nan(false) {}
    __device__ void push(A x) {
        if (x != x) {
            nan = true;
            return;
        }
        const A old = lse_shift(m);
        const A mm = x > m ? x : m;
        const A nw = lse_shift(mm);
        const A kept = (sum == (A)0 || old == nw) ? sum : sum * g_exp(old - nw);
        sum = kept + g_exp(x - nw);
        m = mm;
    }
    __device__ A value() const { return nan ? g_inf((A)0) - g_inf((A)0) : lse_shift(m) + g_log(sum); }
};

enum { G_LSE = 0, G_VAR = 1, G_STD = 2 };

template <typename N, typename T>
__device__ void float_group_impl(T* out, const T* src, const u32* keys, const u32* rows,
                                 const u32* starts, const u32* nruns, Layout kmap,
                                 Layout lout, Layout lsrc, Layout rmap, i64 lanes, int kind,
                                 i64 correction) {
    typedef typename N::Acc A;
    const i64 total = (i64)nruns[0] * lanes;
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {
        const i64 w = divq(t, lanes), l = t - w * lanes;
        const u32 s = starts[w], e = starts[w + 1];
        if (s == e) continue;
        const i64 ls = offset_of(lsrc, l);
        A r;
        if (kind == G_LSE) {
            Lse<A> st;
            for (u32 i = s; i < e; ++i) st.push(N::ld(src[offset_of(rmap, rows[i]) + ls]));
            r = st.value();
        } else {
            A k = (A)0, mean = (A)0, m2 = (A)0;
            for (u32 i = s; i < e; ++i) {
                const A x = N::ld(src[offset_of(rmap, rows[i]) + ls]);
                k = k + (A)1;
                const A d = x - mean;
                mean = mean + d / k;
                m2 = m2 + d * (x - mean);
            }
            const i64 n = (i64)(e - s);
            const A den = (A)(n > correction ? n - correction : 0);
            const A var = m2 / den;
            r = kind == G_STD ? g_sqrt(var) : var;
        }
        out[offset_of(kmap, keys[s]) + offset_of(lout, l)] = N::st(r);
    }
}

#define FLOAT_GROUP(NAME, N, T)                                                                 \
    extern "C" __global__ void float_group_##NAME(                                             \
        T* out, const T* src, const u32* keys, const u32* rows, const u32* starts,             \
        const u32* nruns, Layout kmap, Layout lout, Layout lsrc, Layout rmap, i64 lanes,       \
        int kind, i64 correction) {                                                            \
        float_group_impl<N, T>(out, src, keys, rows, starts, nruns, kmap, lout, lsrc, rmap,     \
                               lanes, kind, correction);                                       \
    }
FLOAT_GROUP(f32, NumF32, float)
FLOAT_GROUP(f64, NumF64, double)
FLOAT_GROUP(f16, NumF16, u16)
FLOAT_GROUP(bf16, NumBF16, u16)

// softmax / log_softmax of every contribution within its run: the run's running maximum and
// rescaled sum first (as logsumexp), then each element, written at its own position of `out`
// (src's shape: `rout` maps a row to its offset in out, `lout` a lane). A run with a NaN or
// +inf gives NaN, as on the CPU.
template <typename N, typename T>
__device__ void softmax_impl(T* out, const T* src, const u32* rows, const u32* starts,
                             const u32* nruns, Layout lout, Layout lsrc, Layout rout,
                             Layout rmap, i64 lanes, int log) {
    typedef typename N::Acc A;
    const i64 total = (i64)nruns[0] * lanes;
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {
        const i64 w = divq(t, lanes), l = t - w * lanes;
        const u32 s = starts[w], e = starts[w + 1];
        if (s == e) continue;
        const i64 ls = offset_of(lsrc, l), lo = offset_of(lout, l);
        Lse<A> st;
        for (u32 i = s; i < e; ++i) st.push(N::ld(src[offset_of(rmap, rows[i]) + ls]));
        const bool undefined = st.nan || st.m == g_inf((A)0);
        const A shift = lse_shift(st.m), lse = st.value();
        for (u32 i = s; i < e; ++i) {
            const A x = N::ld(src[offset_of(rmap, rows[i]) + ls]);
            A y = g_inf((A)0) - g_inf((A)0);
            if (!undefined) y = log ? x - lse : g_exp(x - shift) / st.sum;
            out[offset_of(rout, rows[i]) + lo] = N::st(y);
        }
    }
}

#define SOFTMAX(NAME, N, T)                                                                     \
    extern "C" __global__ void softmax_##NAME(T* out, const T* src, const u32* rows,           \
                                              const u32* starts, const u32* nruns,             \
                                              Layout lout, Layout lsrc, Layout rout,           \
                                              Layout rmap, i64 lanes, int log) {               \
        softmax_impl<N, T>(out, src, rows, starts, nruns, lout, lsrc, rout, rmap, lanes, log);  \
    }
SOFTMAX(f32, NumF32, float)
SOFTMAX(f64, NumF64, double)
SOFTMAX(f16, NumF16, u16)
SOFTMAX(bf16, NumBF16, u16)

// The truths of any/all: out[p] = x[p] != 0, read as the element's bits under `mask` (all bits
// for integers and bool; all but the sign for floats, so that -0.0 is false and NaN true).
#define TRUTH(W)                                                                                \
    extern "C" __global__ void truth_##W(u8* out, const W* x, Layout xl, W mask, i64 n) {      \
        const i64 step = (i64)gridDim.x * blockDim.x;                                           \
        for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += step)              \
            out[p] = (x[offset_of(xl, p)] & mask) != 0 ? 1 : 0;                                 \
    }
TRUTH(u8) TRUTH(u16) TRUTH(u32) TRUTH(u64)
