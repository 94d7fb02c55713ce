// ---- masked_select and masked_scatter: a flag per position, a scan, one move ----
// The row-major positions of the (broadcast) shape where the mask is true are numbered by an
// exclusive scan of their flags (scan_block and scan_add, in the scatter source); flags[n] is 0,
// so that after the scan pos[n] is the number of true positions and a position i is true
// exactly when pos[i + 1] != pos[i] (the move kernels read the positions, not the mask again).

extern "C" __global__ void mask_flags(const u8* mask, Layout ml, i64 n, u32* flags) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i <= n;
         i += (i64)gridDim.x * blockDim.x)
        flags[i] = i < n ? (u32)(mask[offset_of(ml, i)] != 0) : 0u;
}

// masked_select: out[pos[i]] = x[i] at the true positions, in row-major order of the shape.
// masked_scatter: out[i] = src.flat[pos[i]] at the true positions (out is the row-major copy
// of the broadcast input; src is read in its own row-major order through its layout).
#define MASKED(W)                                                                              \
    extern "C" __global__ void masked_select_##W(W* out, const W* x, Layout xl, const u32* pos, \
                                                 i64 n) {                                      \
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;                        \
             i += (i64)gridDim.x * blockDim.x) {                                               \
            const u32 p = pos[i];                                                              \
            if (pos[i + 1] != p) out[p] = x[offset_of(xl, i)];                                 \
        }                                                                                      \
    }                                                                                          \
    extern "C" __global__ void masked_scatter_##W(W* out, const W* src, Layout sl,            \
                                                  const u32* pos, i64 n) {                     \
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;                        \
             i += (i64)gridDim.x * blockDim.x) {                                               \
            const u32 p = pos[i];                                                              \
            if (pos[i + 1] != p) out[i] = src[offset_of(sl, (i64)p)];                          \
        }                                                                                      \
    }

MASKED(u8)
MASKED(u16)
MASKED(u32)
MASKED(u64)
