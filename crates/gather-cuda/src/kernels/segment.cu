// ---- segments: their checks, and the segment of every position ----
// A check flags the first position that breaks a rule of the CPU library's segments (the host
// then reads the segments back and lets the library word the error).

template <typename I>
__device__ void check_offsets_impl(const I* off, Layout ol, i64 count, i64 n, u64* flag) {
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; k < count; k += step) {
        const i64 v = (i64)off[offset_of(ol, k)];
        bool bad = v < 0 || v > n;
        if (k > 0 && v < (i64)off[offset_of(ol, k - 1)]) bad = true;
        if (bad) flag_bad(flag, (u64)k);
    }
}

// `num < 0`: no number of segments given.
template <typename I>
__device__ void check_ids_impl(const I* ids, Layout il, i64 count, i64 num, u64* flag) {
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; k < count; k += step) {
        const i64 v = (i64)ids[offset_of(il, k)];
        bool bad = v < 0 || (num >= 0 && v >= num);
        if (k > 0 && v < (i64)ids[offset_of(il, k - 1)]) bad = true;
        if (bad) flag_bad(flag, (u64)k);
    }
}

// The segment of each position p in 0..n under checked offsets (S + 1 of them): the last k with
// off[k] <= p, by binary search. Positions before off[0] or from off[S] on belong to no segment
// and get S, a scratch segment that the caller cuts off.
template <typename I>
__device__ void segment_ids_impl(const I* off, Layout ol, i64 S, i64 n, i64* ids) {
    const i64 first = (i64)off[offset_of(ol, 0)], last = (i64)off[offset_of(ol, S)];
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += step) {
        i64 id = S;
        if (p >= first && p < last) {
            i64 lo = 0, hi = S;  // off[lo] <= p < off[hi]
            while (hi - lo > 1) {
                const i64 mid = lo + (hi - lo) / 2;
                if ((i64)off[offset_of(ol, mid)] <= p) lo = mid; else hi = mid;
            }
            id = lo;
        }
        ids[p] = id;
    }
}

#define SEGMENT(I)                                                                              \
    extern "C" __global__ void check_offsets_##I(const I* off, Layout ol, i64 count, i64 n,    \
                                                 u64* flag) {                                  \
        check_offsets_impl<I>(off, ol, count, n, flag);                                         \
    }                                                                                           \
    extern "C" __global__ void check_ids_##I(const I* ids, Layout il, i64 count, i64 num,      \
                                             u64* flag) {                                      \
        check_ids_impl<I>(ids, il, count, num, flag);                                           \
    }                                                                                           \
    extern "C" __global__ void segment_ids_##I(const I* off, Layout ol, i64 S, i64 n,          \
                                               i64* ids) {                                     \
        segment_ids_impl<I>(off, ol, S, n, ids);                                                \
    }
SEGMENT(i64)
SEGMENT(i32)

// The largest value of an index, through the flag's atomicMin: each value v enters as
// 0x7fff..ff - v (wrapping), which falls as v grows, so the smallest entry is the largest value
// (the flag stays all ones for an empty index, and for one whose largest value is i64's least).
template <typename I>
__device__ void index_max_impl(const I* idx, Layout il, i64 n, u64* flag) {
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += step)
        flag_bad(flag, 0x7fffffffffffffffull - (u64)(i64)idx[offset_of(il, p)]);
}
extern "C" __global__ void index_max_i64(const i64* idx, Layout il, i64 n, u64* flag) {
    index_max_impl<i64>(idx, il, n, flag);
}
extern "C" __global__ void index_max_i32(const i32* idx, Layout il, i64 n, u64* flag) {
    index_max_impl<i32>(idx, il, n, flag);
}
