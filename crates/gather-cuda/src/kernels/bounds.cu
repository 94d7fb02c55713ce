// ---- bounds policies: map an index once, then run the op's own kernels ----
// bounds_map: each stored value of an index (its stride-0 axes collapsed, so a broadcast index
// is mapped once per distinct element) under a policy, into a row-major i64 index:
//   P_WRAP:    -size..size, negatives count from the end; others flag an error;
//   P_CLIP:    clamped into 0..size;
//   P_MISSING: values outside 0..size become `placeholder` and are marked in `missing` (Fill
//              reads the fill value there, Drop routes the write to a scratch slice).
// The flag takes the first position that Wrap rejects or that P_MISSING marks: the host reads
// it once, as an error or as "something is missing".
enum { P_WRAP = 1, P_CLIP = 3, P_MISSING = 4 };

template <typename I>
__device__ void bounds_map_impl(i64* out, u8* missing, const I* idx, Layout il, i64 size,
                                int policy, i64 placeholder, i64 n, u64* flag) {
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += step) {
        const i64 v = (i64)idx[offset_of(il, p)];
        i64 m = v;
        u8 miss = 0;
        if (policy == P_WRAP) {
            if (m < 0) m += size;
            if (m < 0 || m >= size) {
                flag_bad(flag, (u64)p);
                m = 0;
            }
        } else if (policy == P_CLIP) {
            m = v < 0 ? 0 : (v >= size ? size - 1 : v);
            if (m < 0) m = 0;
        } else {
            miss = (v < 0 || v >= size) ? 1 : 0;
            if (miss) {
                m = placeholder;
                flag_bad(flag, (u64)p);
            }
            missing[p] = miss;
        }
        out[p] = m;
    }
}

#define BOUNDS_MAP(I)                                                                           \
    extern "C" __global__ void bounds_map_##I(i64* out, u8* missing, const I* idx, Layout il,  \
                                              i64 size, int policy, i64 placeholder, i64 n,    \
                                              u64* flag) {                                     \
        bounds_map_impl<I>(out, missing, idx, il, size, policy, placeholder, n, flag);         \
    }
BOUNDS_MAP(i64)
BOUNDS_MAP(i32)

// Fill: out[p] = value where missing[p], for the n row-major positions of both layouts (they
// may differ in shape, not in count: a flat take_along_dim's output is 1-d, its index is not).
#define FILL_WHERE(W)                                                                           \
    extern "C" __global__ void fill_where_##W(W* out, Layout ol, const u8* missing, Layout ml, \
                                              W value, i64 n) {                                \
        const i64 step = (i64)gridDim.x * blockDim.x;                                           \
        for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += step)              \
            if (missing[offset_of(ml, p)]) out[offset_of(ol, p)] = value;                       \
    }
FILL_WHERE(u8)
FILL_WHERE(u16)
FILL_WHERE(u32)
FILL_WHERE(u64)
