// ---- arg-reductions: the winning source of each amax/amin target ----
// Runs on the scatter's sorted runs (keys, rows, starts) before the values are folded, while
// `out` still holds self. One thread per (run, lane): the run's sources are folded in index
// order as the CPU library's ArgF does (the first of equal values keeps the position; a NaN
// takes it once, and the first NaN keeps it), then the result meets self, which comes first:
// self wins ties and, being NaN, every non-NaN result. `arg` (all -1 on entry) gets the winning
// source's position along dim, `(row / jdiv) % jmod`, where a source won.

template <typename A> __device__ __forceinline__ bool is_nan(A v) { return v != v; }

template <typename N, typename T>
__device__ void arg_impl(i64* arg, const T* out, const T* src, const u32* keys, const u32* rows,
                         const u32* starts, const u32* nruns, Layout kmap, Layout lout,
                         Layout lsrc, Layout rmap, i64 lanes, i64 jdiv, i64 jmod, int is_max,
                         int include_self) {
    typedef typename N::Acc A;
    const i64 total = (i64)nruns[0] * lanes;
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {
        const i64 w = divq(t, lanes), l = t - w * lanes;
        const u32 s = starts[w], e = starts[w + 1];
        if (s == e) continue;
        const i64 ls = offset_of(lsrc, l);
        u32 row = rows[s];
        A v = N::ld(src[offset_of(rmap, row) + ls]);
        u32 win = row;
        for (u32 r = s + 1; r < e; ++r) {
            row = rows[r];
            const A x = N::ld(src[offset_of(rmap, row) + ls]);
            const A nv = is_max ? N::mx(v, x) : N::mn(v, x);
            const bool was_nan = is_nan(v);
            if ((is_nan(x) && !was_nan) || (!was_nan && nv != v)) win = row;
            v = nv;
        }
        const i64 o = offset_of(kmap, keys[s]) + offset_of(lout, l);
        if (include_self && !is_nan(v)) {
            const A sv = N::ld(out[o]);
            const A nv = is_max ? N::mx(sv, v) : N::mn(sv, v);
            if (is_nan(sv) || nv == sv) continue;
        }
        arg[o] = (i64)((win / jdiv) % jmod);
    }
}

#define ARG(NAME, N, T)                                                                         \
    extern "C" __global__ void arg_##NAME(i64* arg, const T* out, const T* src, const u32* keys,\
                                          const u32* rows, const u32* starts,                  \
                                          const u32* nruns, Layout kmap, Layout lout,          \
                                          Layout lsrc, Layout rmap, i64 lanes, i64 jdiv,       \
                                          i64 jmod, int is_max, int include_self) {            \
        arg_impl<N, T>(arg, out, src, keys, rows, starts, nruns, kmap, lout, lsrc, rmap, lanes, \
                       jdiv, jmod, is_max, include_self);                                      \
    }
ARG(f32, NumF32, float)
ARG(bool, NumBool, u8)
ARG(f64, NumF64, double)
ARG(f16, NumF16, u16)
ARG(bf16, NumBF16, u16)
ARG(u8, Num<u8>, u8)
ARG(i8, Num<i8>, i8)
ARG(i16, Num<i16>, i16)
ARG(u16, Num<u16>, u16)
ARG(i32, Num<i32>, i32)
ARG(u32, Num<u32>, u32)
ARG(i64, Num<i64>, i64)
ARG(u64, Num<u64>, u64)
