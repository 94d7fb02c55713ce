// Data movement: gather, take, row copies, strided copies and index widening. Elements are
// moved as words of their byte width (u8/u16/u32/u64), never per dtype.

// Each thread handles UNROLL positions a grid-stride apart per round, reading all their index
// values before any input element, so that several random reads are in flight per thread. The
// index and the output pass through once: they are read and written evict-first (`.cs`), so
// that the L2 keeps more of the input, which random reads come back to.
#define UNROLL 4

// Positions, offsets and index values in O: i64, or u32 (with int values) where the host has
// checked that every position, offset and value fits (the `gather32`/`take32` kernels). Half
// the registers: all warps of a multiprocessor, twice the random reads in flight, against half
// of them with i64 (60 registers).
template <typename O> struct Off;
template <> struct Off<i64> {
    typedef i64 V;
    static __device__ __forceinline__ i64 div(i64 a, i64 b) { return divq(a, b); }
};
template <> struct Off<u32> {
    typedef int V;
    static __device__ __forceinline__ u32 div(u32 a, u32 b) { return a / b; }
};

template <typename O> __device__ __forceinline__ O offset_in(const Layout& L, O lin) {
    O off = 0;
    for (int d = (int)L.ndim - 1; d > 0; --d) {
        const O s = (O)L.shape[d], q = Off<O>::div(lin, s);
        off += (lin - q * s) * (O)L.stride[d];
        lin = q;
    }
    if (L.ndim > 0) off += lin * (O)L.stride[0];
    return off;
}

// out[p] = x[p with p[dim] := index[p]] for every row-major position p of the index; `xl`
// holds x's strides on the index's shape (x may be larger than the index on other axes).
template <typename W, typename I, typename O>
__device__ void gather_impl(W* out, const W* x, Layout xl, const I* idx, Layout il, int dim,
                            i64 size, int rule, i64 n, u64* flag) {
    typedef typename Off<O>::V V;
    const O step = (O)gridDim.x * blockDim.x, no = (O)n;
    for (O base = (O)blockIdx.x * blockDim.x + threadIdx.x; base < no; base += UNROLL * step) {
        O xoff[UNROLL];
        V v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            const O p = base + k * step;
            v[k] = -1;
            xoff[k] = 0;
            if (p >= no) continue;
            O lin = p, ioff = 0;
            for (int d = (int)il.ndim - 1; d >= 0; --d) {
                O c;
                if (d > 0) {
                    const O s = (O)il.shape[d], q = Off<O>::div(lin, s);
                    c = lin - q * s;
                    lin = q;
                } else {
                    c = lin;
                }
                ioff += c * (O)il.stride[d];
                if (d != dim) xoff[k] += c * (O)xl.stride[d];
            }
            v[k] = (V)map_index((i64)__ldcs(idx + ioff), size, rule);
            if (v[k] < 0) flag_bad(flag, (u64)p);
        }
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            const O p = base + k * step;
            if (p < no) __stcs(out + p, v[k] < 0 ? (W)0 : read_x(x + (xoff[k] + (O)v[k] * (O)xl.stride[dim])));
        }
    }
}

// out[p] = x.flat[index[p]]: x is read through its layout at the row-major position the index
// names.
template <typename W, typename I, typename O>
__device__ void take_impl(W* out, const W* x, Layout xl, const I* idx, Layout il, i64 size,
                          int rule, i64 n, u64* flag) {
    typedef typename Off<O>::V V;
    const O step = (O)gridDim.x * blockDim.x, no = (O)n;
    for (O base = (O)blockIdx.x * blockDim.x + threadIdx.x; base < no; base += UNROLL * step) {
        V v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            const O p = base + k * step;
            v[k] = -1;
            if (p >= no) continue;
            v[k] = (V)map_index((i64)__ldcs(idx + offset_in<O>(il, p)), size, rule);
            if (v[k] < 0) flag_bad(flag, (u64)p);
        }
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            const O p = base + k * step;
            if (p < no) __stcs(out + p, v[k] < 0 ? (W)0 : read_x(x + offset_in<O>(xl, (O)v[k])));
        }
    }
}

// Gathers whose index spans axes after dim (W5: dim 0 of a [4096, 4096] matrix). Element-wise,
// each position reads one element of a random row of x, and each such read pulls a whole
// sector from memory. Here x and the index are views [outer, J, inner] (the host merges the
// axes before dim, and those after it), and a block takes a tile of `tw` consecutive positions
// k at one position o: it stages x's slab [size, tw] there in shared memory (x read once, in
// segments of consecutive elements), then serves every j of the index from it. The output is
// row-major [outer, J, inner]. Blocks of a multiple of `tw` threads.
// Reads in flight per thread: the three blocks of a multiprocessor that 64 KB slabs allow hold
// 768 threads, too few to cover memory's latency with 4 reads each.
#define TILE_UNROLL 8
template <typename W, typename I>
__device__ void gather_tile_impl(W* out, const W* x, i64 xso, i64 xsd, i64 xsk, const I* idx,
                                 i64 iso, i64 isd, i64 isk, i64 J, i64 inner, i64 size, int rule,
                                 int tw, i64 tiles, u64* flag) {
    DYNAMIC_SHARED(W, slab);
    const i64 tiles_k = (inner + tw - 1) / tw;
    const int c = (int)threadIdx.x & (tw - 1), r0 = (int)threadIdx.x / tw, rows = blockDim.x / tw;
    for (i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        const i64 o = t / tiles_k, k = (t - o * tiles_k) * tw + c;
        // Row r of the slab, then position j: TILE_UNROLL a pass apart, read before any is stored.
        // The slab's rows fit in 32 bits (it fits in shared memory).
        if (k < inner) {
            const W* xc = x + o * xso + k * xsk;
            const i64 xstep = (i64)rows * xsd;
            for (int r = r0; r < (int)size; r += TILE_UNROLL * rows) {
                const W* xr = xc + (i64)r * xsd;
                W v[TILE_UNROLL];
#pragma unroll
                for (int u = 0; u < TILE_UNROLL; ++u)
                    if (r + u * rows < (int)size) v[u] = xr[u * xstep];
#pragma unroll
                for (int u = 0; u < TILE_UNROLL; ++u)
                    if (r + u * rows < (int)size) slab[(r + u * rows) * tw + c] = v[u];
            }
        }
        __syncthreads();
        if (k < inner) {
            const I* ic = idx + o * iso + k * isk;
            W* oc = out + o * J * inner + k;
            const i64 istep = (i64)rows * isd, ostep = (i64)rows * inner;
            for (i64 j = r0; j < J; j += TILE_UNROLL * rows) {
                const I* ij = ic + j * isd;
                W* oj = oc + j * inner;
                int v[TILE_UNROLL];
#pragma unroll
                for (int u = 0; u < TILE_UNROLL; ++u) {
                    v[u] = -1;
                    if (j + u * rows >= J) continue;
                    const i64 m = map_index((i64)__ldcs(ij + u * istep), size, rule);
                    v[u] = (int)m;
                    if (m < 0) flag_bad(flag, (u64)(oj + u * ostep - out));
                }
#pragma unroll
                for (int u = 0; u < TILE_UNROLL; ++u)
                    if (j + u * rows < J) __stcs(oj + u * ostep, v[u] < 0 ? (W)0 : slab[v[u] * tw + c]);
            }
        }
        __syncthreads();  // the slab is the next tile's
    }
}

// Rows of `row_bytes` contiguous bytes: out row r = (o, j) is the row of x at outer position o
// and position index[o, j] along dim (index_select, gathers whose index is expanded over the
// trailing axes). A team of `team` threads (a power of two up to 32) copies a row with words
// of V (16 bytes when everything is aligned). A bad value is flagged at its row-major position
// in the index view, whose `lanes` trailing positions per row all hold it.
// A team takes ROW_BATCH rows a grid-stride apart and reads their index values together; rows
// of at most one word per lane are then read together too, so that a thread of a short-row
// gather (one element per row) has ROW_BATCH reads in flight instead of one at a time.
#define ROW_BATCH 4
template <typename V, typename I>
__device__ void rows_impl(u8* out, const u8* x, const I* idx, i64 idx_so, i64 idx_sj, i64 n_idx,
                          i64 size, i64 x_so, i64 x_sv, i64 n_rows, i64 row_bytes, i64 lanes,
                          int team, int rule, u64* flag) {
    const i64 words = row_bytes / (i64)sizeof(V);
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = (int)(t & (team - 1));
    const i64 step = ((i64)gridDim.x * blockDim.x) / team;
    for (i64 r0 = t / team; r0 < n_rows; r0 += ROW_BATCH * step) {
        i64 v[ROW_BATCH], xo[ROW_BATCH];
#pragma unroll
        for (int u = 0; u < ROW_BATCH; ++u) {
            const i64 r = r0 + (i64)u * step;
            v[u] = -1;
            xo[u] = 0;
            if (r >= n_rows) break;
            const i64 o = divq(r, n_idx), j = r - o * n_idx;
            v[u] = map_index((i64)idx[o * idx_so + j * idx_sj], size, rule);
            xo[u] = o * x_so + v[u] * x_sv;
        }
        if (words <= team) {
            V buf[ROW_BATCH];
#pragma unroll
            for (int u = 0; u < ROW_BATCH; ++u) {
                buf[u] = V();
                if (r0 + (i64)u * step < n_rows && v[u] >= 0 && lane < words)
                    buf[u] = ((const V*)(x + xo[u]))[lane];
            }
#pragma unroll
            for (int u = 0; u < ROW_BATCH; ++u) {
                const i64 r = r0 + (i64)u * step;
                if (r >= n_rows) break;
                if (v[u] < 0 && lane == 0) flag_bad(flag, (u64)(r * lanes));
                if (lane < words) ((V*)(out + r * row_bytes))[lane] = buf[u];
            }
            continue;
        }
        for (int u = 0; u < ROW_BATCH; ++u) {
            const i64 r = r0 + (i64)u * step;
            if (r >= n_rows) break;
            V* dst = (V*)(out + r * row_bytes);
            if (v[u] < 0) {
                if (lane == 0) flag_bad(flag, (u64)(r * lanes));
                for (i64 w = lane; w < words; w += team) dst[w] = V();
                continue;
            }
            const V* src = (const V*)(x + xo[u]);
            // A lane reads up to ROW_BATCH words before it writes any (the compiler may not move
            // a read above a write through another pointer), so that they are in flight together.
            for (i64 w0 = lane; w0 < words; w0 += ROW_BATCH * team) {
                V buf[ROW_BATCH];
#pragma unroll
                for (int b = 0; b < ROW_BATCH; ++b) {
                    const i64 w = w0 + (i64)b * team;
                    if (w < words) buf[b] = src[w];
                }
#pragma unroll
                for (int b = 0; b < ROW_BATCH; ++b) {
                    const i64 w = w0 + (i64)b * team;
                    if (w < words) dst[w] = buf[b];
                }
            }
        }
    }
}

// A strided view into a contiguous buffer.
template <typename W>
__device__ void copy_impl(W* out, const W* x, Layout xl, i64 n) {
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += step)
        out[p] = x[offset_of(xl, p)];
}

// Any integer index as i64, contiguous; u64 values past i64's range stay out of range.
__device__ __forceinline__ i64 to_i64(u64 v) { return v > 0x7fffffffffffffffull ? 0x7fffffffffffffffll : (i64)v; }
template <typename S> __device__ __forceinline__ i64 to_i64(S v) { return (i64)v; }
template <typename S>
__device__ void widen_impl(i64* out, const S* x, Layout xl, i64 n) {
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += step)
        out[p] = to_i64(x[offset_of(xl, p)]);
}

// 16-byte aligned, so that a word moves with one 16-byte access, not two of 8.
struct __align__(16) V16 { u64 a, b; };

#define GATHER_O(G, T, W, I, O)                                                                 \
    extern "C" __global__ void G##_##W##_##I(W* out, const W* x, Layout xl, const I* idx,      \
                                             Layout il, int dim, i64 size, int rule, i64 n,    \
                                             u64* flag) {                                      \
        gather_impl<W, I, O>(out, x, xl, idx, il, dim, size, rule, n, flag);                   \
    }                                                                                           \
    extern "C" __global__ void T##_##W##_##I(W* out, const W* x, Layout xl, const I* idx,      \
                                             Layout il, i64 size, int rule, i64 n,             \
                                             u64* flag) {                                      \
        take_impl<W, I, O>(out, x, xl, idx, il, size, rule, n, flag);                          \
    }
#define GATHER_W(W, I) GATHER_O(gather, take, W, I, i64) GATHER_O(gather32, take32, W, I, u32)
#define TILE(W, I)                                                                              \
    extern "C" __global__ void gather_tile_##W##_##I(                                          \
        W* out, const W* x, i64 xso, i64 xsd, i64 xsk, const I* idx, i64 iso, i64 isd, i64 isk, \
        i64 J, i64 inner, i64 size, int rule, int tw, i64 tiles, u64* flag) {                  \
        gather_tile_impl<W, I>(out, x, xso, xsd, xsk, idx, iso, isd, isk, J, inner, size, rule, \
                               tw, tiles, flag);                                                \
    }
#define ROWS(V, NAME, I)                                                                        \
    extern "C" __global__ void rows_##NAME##_##I(                                              \
        u8* out, const u8* x, const I* idx, i64 idx_so, i64 idx_sj, i64 n_idx, i64 size,       \
        i64 x_so, i64 x_sv, i64 n_rows, i64 row_bytes, i64 lanes, int team, int rule,          \
        u64* flag) {                                                                           \
        rows_impl<V, I>(out, x, idx, idx_so, idx_sj, n_idx, size, x_so, x_sv, n_rows,          \
                        row_bytes, lanes, team, rule, flag);                                   \
    }
#define EACH_INDEX(M, W) M(W, i64) M(W, i32)
EACH_INDEX(GATHER_W, u8)
EACH_INDEX(GATHER_W, u16)
EACH_INDEX(GATHER_W, u32)
EACH_INDEX(GATHER_W, u64)
EACH_INDEX(TILE, u8)
EACH_INDEX(TILE, u16)
EACH_INDEX(TILE, u32)
EACH_INDEX(TILE, u64)
ROWS(u8, w1, i64) ROWS(u8, w1, i32)
ROWS(u32, w4, i64) ROWS(u32, w4, i32)
ROWS(V16, w16, i64) ROWS(V16, w16, i32)

#define COPY(W)                                                                                 \
    extern "C" __global__ void copy_##W(W* out, const W* x, Layout xl, i64 n) {                \
        copy_impl<W>(out, x, xl, n);                                                            \
    }
COPY(u8) COPY(u16) COPY(u32) COPY(u64)

// out[p] = x[p] for the n row-major positions of two views of one shape, any strides (the
// write of an in-place op into the caller's own array).
#define ASSIGN(W)                                                                               \
    extern "C" __global__ void assign_##W(W* out, Layout ol, const W* x, Layout xl, i64 n) {   \
        const i64 step = (i64)gridDim.x * blockDim.x;                                           \
        for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += step)              \
            out[offset_of(ol, p)] = x[offset_of(xl, p)];                                        \
    }
ASSIGN(u8) ASSIGN(u16) ASSIGN(u32) ASSIGN(u64)

#define WIDEN(S)                                                                                \
    extern "C" __global__ void widen_##S(i64* out, const S* x, Layout xl, i64 n) {             \
        widen_impl<S>(out, x, xl, n);                                                           \
    }
WIDEN(i8) WIDEN(u8) WIDEN(i16) WIDEN(u16) WIDEN(i32) WIDEN(u32) WIDEN(u64)
