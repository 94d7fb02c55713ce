// ---- repeat_interleave: the source slice of every output slice ----
// starts[k] (k < n) is where the copies of slice k begin along the output's dim (an exclusive
// prefix sum of the counts, starts[0] = 0), total the output's length there. Output position j
// reads slice k, the last with starts[k] <= j: a binary search, so that a count of any size
// costs no more threads than positions. Slices with a count of 0 share their start with the
// next slice and are never the last such k.
#define POSITIONS(O)                                                                           \
    extern "C" __global__ void repeat_positions_##O(O* out, const i64* starts, i64 n,          \
                                                    i64 total) {                               \
        for (i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x; j < total;                    \
             j += (i64)gridDim.x * blockDim.x) {                                               \
            i64 lo = 0, hi = n;                                                                \
            while (hi - lo > 1) {                                                              \
                const i64 mid = lo + ((hi - lo) >> 1);                                         \
                if (starts[mid] <= j) lo = mid;                                                \
                else hi = mid;                                                                 \
            }                                                                                  \
            out[j] = (O)lo;                                                                    \
        }                                                                                      \
    }

POSITIONS(i64)
POSITIONS(i32)
