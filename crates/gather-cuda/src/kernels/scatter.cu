// The deterministic scatter family: every index row becomes a (key, row) pair, the pairs are
// sorted by key with a stable radix sort (so a key meets its rows in index order), runs of equal
// keys are found, and each run is reduced in that order into the output. The same order on
// every call makes the result bitwise repeatable; no atomics touch the values.
//
// When the keys are few (at most about twice the rows), a counting sort replaces the radix
// passes: the keys kernel counts each key and keeps each row's place among its key's rows (in
// whatever order the atomics come), a scan gives every key its run, rows are placed into their
// run at that place and each run's rows are then sorted (a warp's registers up to 128, a
// block's shared memory up to 4096), which gives the same sorted pairs. A run past 4096 sends
// the call back to the radix sort. Every key is then a run, empty ones included: the folds skip
// runs whose start equals their end.

// Longest run the counting sort orders (COUNT_RUN_MAX in sort.rs), the longest a warp orders in
// its registers, and the flag value that says a run is longer (no bad index: those are smaller).
#define COUNT_RUN_MAX 4096
#define WARP_RUN_MAX 128
// Runs that the row kernel orders itself (SHORT_RUN in sort.rs): a warp's worth.
#define SHORT_RUN 32
#define LONG_RUN 0xfffffffffffffffeull


// `counts` (zeroed, one per key; null for the radix sort): each valid row also counts its key,
// and `rows` then holds the row's place in its key's run (the count before it), not the row:
// count_place needs no atomics of its own. A bad row's place is RANK_NONE, placed nowhere.
// `listed` (or null): the keys whose runs pass SHORT_RUN rows, for count_sort_long to sort alone.
#define RANK_NONE 0xffffffffu
// Rows a thread takes a grid-stride apart, their index values read, then their keys counted,
// together: each wave of threads waits for memory twice, not twice per row.
#define KEYS_BATCH 4

// Row r's index offset and its key without dim's part; or (`pos_only`) its row-major position
// in the whole index, for a bad row's report.
__device__ __forceinline__ i64 row_walk(const RowMap& m, int dim, i64 r, i64* key, bool pos_only) {
    i64 lin = r, ioff = 0, k = 0, pos = 0;
    for (int d = (int)m.ndim - 1; d >= 0; --d) {
        i64 c;
        if (d > 0) {
            i64 q = divq(lin, m.shape[d]);
            c = lin - q * m.shape[d];
            lin = q;
        } else {
            c = lin;
        }
        ioff += c * m.istride[d];
        pos += c * m.pstride[d];
        if (d != dim) k += c * m.kstride[d];
    }
    if (key) *key = k;
    return pos_only ? pos : ioff;
}

template <typename I>
__device__ void keys_impl(const I* idx, RowMap m, int dim, i64 size, int rule, i64 n, u32* keys,
                          u32* rows, u32* counts, u32* listed, u32* n_listed, u64* flag) {
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 r0 = (i64)blockIdx.x * blockDim.x + threadIdx.x; r0 < n; r0 += KEYS_BATCH * step) {
        // Keys are u32 (checked on the host), and so is their part off dim.
        i64 raw[KEYS_BATCH];
        u32 base[KEYS_BATCH];
#pragma unroll
        for (int u = 0; u < KEYS_BATCH; ++u) {
            const i64 r = r0 + u * step;
            i64 b = 0;
            if (r < n) raw[u] = (i64)idx[row_walk(m, dim, r, &b, false)];
            base[u] = (u32)b;
        }
        u32 k[KEYS_BATCH], rank[KEYS_BATCH];
#pragma unroll
        for (int u = 0; u < KEYS_BATCH; ++u) {
            const i64 r = r0 + u * step;
            if (r >= n) break;
            i64 v = map_index(raw[u], size, rule);
            const bool bad = v < 0;
            if (bad) {
                flag_bad(flag, (u64)row_walk(m, dim, r, nullptr, true));
                v = 0;
            }
            k[u] = base[u] + (u32)v * (u32)m.kstride[dim];
            keys[r] = k[u];
            rank[u] = bad ? RANK_NONE : counts ? atomicAdd(&counts[k[u]], 1u) : (u32)r;
        }
#pragma unroll
        for (int u = 0; u < KEYS_BATCH; ++u) {
            const i64 r = r0 + u * step;
            if (r >= n) break;
            // With counts: the row's place in its run. The row that takes a key past
            // COUNT_RUN_MAX says so, once per key; past SHORT_RUN, lists it.
            rows[r] = counts ? rank[u] : (u32)r;
            if (counts && rank[u] == COUNT_RUN_MAX) flag_bad(flag, LONG_RUN);
            if (counts && rank[u] == SHORT_RUN && listed) listed[atomicAdd(n_listed, 1u)] = k[u];
        }
    }
}
extern "C" __global__ void keys_i64(const i64* idx, RowMap m, int dim, i64 size, int rule, i64 n,
                                    u32* keys, u32* rows, u32* counts, u32* listed,
                                    u32* n_listed, u64* flag) {
    keys_impl<i64>(idx, m, dim, size, rule, n, keys, rows, counts, listed, n_listed, flag);
}
extern "C" __global__ void keys_i32(const i32* idx, RowMap m, int dim, i64 size, int rule, i64 n,
                                    u32* keys, u32* rows, u32* counts, u32* listed,
                                    u32* n_listed, u64* flag) {
    keys_impl<i32>(idx, m, dim, size, rule, n, keys, rows, counts, listed, n_listed, flag);
}

// ---- exclusive scan of u32, 2048 per block (256 threads x 8 consecutive items) ----
#define SCAN_ITEMS 8
#define SCAN_TILE 2048

__device__ __forceinline__ u32 block_exclusive(u32 v, u32* total) {
    __shared__ u32 warp_sums[8];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u32 x = v;
    for (int o = 1; o < 32; o <<= 1) {
        u32 y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        u32 s = lane < 8 ? warp_sums[lane] : 0;
        for (int o = 1; o < 8; o <<= 1) {
            u32 y = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o) s += y;
        }
        if (lane < 8) warp_sums[lane] = s;
    }
    __syncthreads();
    u32 before = (warp > 0 ? warp_sums[warp - 1] : 0) + x - v;
    *total = warp_sums[7];
    __syncthreads();
    return before;
}

// The block's tile, scanned and offset by `before`; its total into sums (when not null).
__device__ __forceinline__ void scan_tile(u32* data, i64 n, u32 before, u32* sums) {
    const i64 base = (i64)blockIdx.x * SCAN_TILE + (i64)threadIdx.x * SCAN_ITEMS;
    u32 v[SCAN_ITEMS];
    u32 s = 0;
#pragma unroll
    for (int k = 0; k < SCAN_ITEMS; ++k) {
        v[k] = base + k < n ? data[base + k] : 0;
        s += v[k];
    }
    u32 total;
    u32 run = before + block_exclusive(s, &total);
#pragma unroll
    for (int k = 0; k < SCAN_ITEMS; ++k) {
        if (base + k < n) data[base + k] = run;
        run += v[k];
    }
    if (sums && threadIdx.x == 0) sums[blockIdx.x] = total;
}

extern "C" __global__ void scan_block(u32* data, i64 n, u32* sums) { scan_tile(data, n, 0, sums); }

// Up to SCAN_TILE tiles take two launches instead of three: the tiles' sums, then each tile's
// scan, offset by the sums of the tiles before it, which every block adds up itself.
extern "C" __global__ void scan_sums(const u32* data, i64 n, u32* sums) {
    const i64 base = (i64)blockIdx.x * SCAN_TILE + (i64)threadIdx.x * SCAN_ITEMS;
    u32 s = 0;
#pragma unroll
    for (int k = 0; k < SCAN_ITEMS; ++k) s += base + k < n ? data[base + k] : 0;
    u32 total;
    block_exclusive(s, &total);
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

extern "C" __global__ void scan_tiles(u32* data, i64 n, const u32* sums) {
    u32 mine = 0;
    for (u32 t = threadIdx.x; t < blockIdx.x; t += blockDim.x) mine += sums[t];
    u32 before;
    block_exclusive(mine, &before);
    scan_tile(data, n, before, nullptr);
}

extern "C" __global__ void scan_add(u32* data, i64 n, const u32* sums) {
    const i64 base = (i64)blockIdx.x * SCAN_TILE + (i64)threadIdx.x * SCAN_ITEMS;
    const u32 add = sums[blockIdx.x];
#pragma unroll
    for (int k = 0; k < SCAN_ITEMS; ++k)
        if (base + k < n) data[base + k] += add;
}

// ---- stable LSD radix sort of (u32 key, u32 row), 10 bits per pass, 2048 pairs per tile ----
// Ten bits a pass sort the keys of up to a million targets in two passes; the per-warp digit
// counts of a tile (8 x 1024) still fit the static shared memory.
#define RADIX_BITS 10
#define RADIX (1 << RADIX_BITS)
#define TILE_ITEMS 8
#define TILE (256 * TILE_ITEMS)
#define PER_THREAD (RADIX / 256)

// counts[digit * tiles + tile]: so that one exclusive scan gives every tile its offset per digit.
extern "C" __global__ void radix_count(const u32* keys, i64 n, int shift, u32* counts, i64 tiles) {
    __shared__ u32 h[RADIX];
#pragma unroll
    for (int q = 0; q < PER_THREAD; ++q) h[threadIdx.x + 256 * q] = 0;
    __syncthreads();
    const i64 base = (i64)blockIdx.x * TILE;
#pragma unroll
    for (int k = 0; k < TILE_ITEMS; ++k) {
        i64 i = base + k * 256 + threadIdx.x;
        if (i < n) atomicAdd(&h[(keys[i] >> shift) & (RADIX - 1)], 1u);
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < PER_THREAD; ++q) {
        const int d = threadIdx.x + 256 * q;
        counts[(i64)d * tiles + blockIdx.x] = h[d];
    }
}

// Each tile places its pairs at its offsets, in input order within each digit (a rank among
// equal digits of the same warp from __match_any_sync, plus the counts of the warps before it).
extern "C" __global__ void radix_scatter(const u32* kin, const u32* vin, u32* kout, u32* vout,
                                         i64 n, int shift, const u32* offsets, i64 tiles) {
    __shared__ u32 run[RADIX];
    __shared__ u32 wc[8][RADIX];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int q = 0; q < PER_THREAD; ++q) {
        const int d = threadIdx.x + 256 * q;
        run[d] = offsets[(i64)d * tiles + blockIdx.x];
    }
    const u32 lt = (1u << lane) - 1u;
    const i64 base = (i64)blockIdx.x * TILE;
    for (int k = 0; k < TILE_ITEMS; ++k) {
#pragma unroll
        for (int w = 0; w < 8; ++w)
#pragma unroll
            for (int q = 0; q < PER_THREAD; ++q) wc[w][threadIdx.x + 256 * q] = 0;
        __syncthreads();
        i64 i = base + k * 256 + threadIdx.x;
        bool valid = i < n;
        u32 key = valid ? kin[i] : 0, val = valid ? vin[i] : 0;
        u32 digit = valid ? (key >> shift) & (RADIX - 1) : RADIX;
        u32 peers = __match_any_sync(0xffffffffu, digit);
        u32 rank = __popc(peers & lt);
        if (valid && rank == 0) wc[warp][digit] = __popc(peers);
        __syncthreads();
        if (valid) {
            u32 pos = run[digit] + rank;
            for (int w = 0; w < warp; ++w) pos += wc[w][digit];
            kout[pos] = key;
            vout[pos] = val;
        }
        __syncthreads();
#pragma unroll
        for (int q = 0; q < PER_THREAD; ++q) {
            const int d = threadIdx.x + 256 * q;
            u32 add = 0;
#pragma unroll
            for (int w = 0; w < 8; ++w) add += wc[w][d];
            run[d] += add;
        }
        __syncthreads();
    }
}

// ---- the counting sort: place rows into their key's run, then order each run ----
// `starts` is the exclusive scan of the counts (nkeys + 1 entries), `ranks` each row's place in
// its run from the keys kernel. `kout` may be null: run k is key k, which the row kernel knows.
// Every key is a run: nruns[0] = nkeys.
extern "C" __global__ void count_place(const u32* keys, const u32* ranks, i64 n, const u32* starts,
                                       u32* kout, u32* rout, u32* nruns, i64 nkeys) {
    if (blockIdx.x == 0 && threadIdx.x == 0) nruns[0] = (u32)nkeys;
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 r0 = (i64)blockIdx.x * blockDim.x + threadIdx.x; r0 < n; r0 += KEYS_BATCH * step) {
        u32 k[KEYS_BATCH], rank[KEYS_BATCH], slot[KEYS_BATCH];
#pragma unroll
        for (int u = 0; u < KEYS_BATCH; ++u) {
            const i64 r = r0 + u * step;
            rank[u] = RANK_NONE;
            if (r < n) {
                k[u] = keys[r];
                rank[u] = ranks[r];
            }
        }
#pragma unroll
        for (int u = 0; u < KEYS_BATCH; ++u)
            if (rank[u] != RANK_NONE) slot[u] = starts[k[u]] + rank[u];
#pragma unroll
        for (int u = 0; u < KEYS_BATCH; ++u) {
            if (rank[u] == RANK_NONE) continue;
            if (kout) kout[slot[u]] = k[u];
            rout[slot[u]] = (u32)(r0 + u * step);
        }
    }
}

// A warp's bitonic sort of 32 * K values, element i = lane * K + k in v[k] (ascending).
template <int K> __device__ __forceinline__ void warp_sort(u32 (&v)[K]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int size = 2; size <= 32 * K; size <<= 1) {
#pragma unroll
        for (int j = size >> 1; j > 0; j >>= 1) {
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int i = lane * K + k;
                const bool up = (i & size) == 0;
                if (j >= K) {
                    const u32 o = __shfl_xor_sync(0xffffffffu, v[k], j / K);
                    const bool lower = (i & j) == 0;
                    v[k] = lower == up ? min(v[k], o) : max(v[k], o);
                } else if ((k ^ j) > k) {
                    const u32 a = v[k], b = v[k ^ j];
                    v[k] = up ? min(a, b) : max(a, b);
                    v[k ^ j] = up ? max(a, b) : min(a, b);
                }
            }
        }
    }
}

template <int K> __device__ __forceinline__ void warp_sort_run(u32* rows, u32 s, u32 len) {
    const int lane = threadIdx.x & 31;
    u32 v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const u32 i = lane * K + k;
        v[k] = i < len ? rows[s + i] : 0xffffffffu;
    }
    warp_sort<K>(v);
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const u32 i = lane * K + k;
        if (i < len) rows[s + i] = v[k];
    }
}

// A warp per key orders its run's rows; runs longer than a warp's registers go to a list for
// count_sort_long.
extern "C" __global__ void count_sort_runs(u32* rows, const u32* starts, i64 nkeys,
                                           u32* long_runs, u32* n_long) {
    const i64 wstep = (i64)gridDim.x * (blockDim.x >> 5);
    for (i64 w = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < nkeys; w += wstep) {
        const u32 s = starts[w], len = starts[w + 1] - s;
        if (len <= 1) continue;
        if (len <= 32) {
            warp_sort_run<1>(rows, s, len);
        } else if (len <= WARP_RUN_MAX) {
            warp_sort_run<4>(rows, s, len);
        } else if ((threadIdx.x & 31) == 0) {
            long_runs[atomicAdd(n_long, 1u)] = (u32)w;
        }
    }
}

// A block per listed run (at most COUNT_RUN_MAX rows): a bitonic sort in shared memory. The
// list is count_sort_runs' long runs, or the keys kernel's runs past SHORT_RUN for the row
// kernel, which orders the shorter ones itself.
extern "C" __global__ void count_sort_long(u32* rows, const u32* starts, const u32* long_runs,
                                           const u32* n_long) {
    __shared__ u32 sh[COUNT_RUN_MAX];
    const u32 listed = n_long[0];
    for (u32 b = blockIdx.x; b < listed; b += gridDim.x) {
        const u32 w = long_runs[b], s = starts[w], len = starts[w + 1] - s;
        u32 p = 1;
        while (p < len) p <<= 1;
        for (u32 i = threadIdx.x; i < p; i += blockDim.x) sh[i] = i < len ? rows[s + i] : 0xffffffffu;
        __syncthreads();
        for (u32 size = 2; size <= p; size <<= 1) {
            for (u32 j = size >> 1; j > 0; j >>= 1) {
                for (u32 t = threadIdx.x; t < p / 2; t += blockDim.x) {
                    const u32 i = 2 * t - (t & (j - 1)), l = i + j;
                    const u32 a = sh[i], c = sh[l];
                    if ((a > c) == ((i & size) == 0)) {
                        sh[i] = c;
                        sh[l] = a;
                    }
                }
                __syncthreads();
            }
        }
        for (u32 i = threadIdx.x; i < len; i += blockDim.x) rows[s + i] = sh[i];
        __syncthreads();
    }
}

// ---- runs of equal keys in the sorted keys ----
__device__ __forceinline__ u32 run_flag(const u32* keys, i64 i) {
    return (i == 0 || keys[i] != keys[i - 1]) ? 1u : 0u;
}
extern "C" __global__ void run_flags(const u32* keys, i64 n, u32* flags) {
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        flags[i] = run_flag(keys, i);
}
// starts[j] = first sorted position of run j; starts[runs] = n; nruns[0] = runs.
extern "C" __global__ void run_starts(const u32* keys, const u32* scanned, i64 n, u32* starts,
                                      u32* nruns) {
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        u32 f = run_flag(keys, i);
        if (f) starts[scanned[i]] = (u32)i;
        if (i == n - 1) {
            starts[scanned[i] + f] = (u32)n;
            nruns[0] = scanned[i] + f;
        }
    }
}

// One output element: the run's rows for one lane, folded in sorted (= index) order, four rows
// read ahead of their folding. `src == 0` means the value form: every row contributes `value`;
// `use_alpha`: every contribution is multiplied by `alpha` first (index_add).
template <typename N, typename T>
__device__ __forceinline__ void fold_one(T* out, i64 ooff, const T* src, T value, T alpha,
                                         int use_alpha, const u32* rows, u32 s, u32 e,
                                         const Layout& rmap, i64 lsrc, int reduce,
                                         int include_self) {
    typedef typename N::Acc A;
    if (reduce == R_SET) {
        out[ooff] = src ? src[offset_of(rmap, rows[e - 1]) + lsrc] : value;
        return;
    }
    auto load = [&](u32 row) -> A {
        A v = N::ld(src ? src[offset_of(rmap, row) + lsrc] : value);
        return use_alpha ? N::mul(v, N::ld(alpha)) : v;
    };
    u32 r = s;
    A acc = include_self ? N::ld(out[ooff]) : load(rows[r++]);
    for (; r + 4 <= e; r += 4) {
        const u32 i0 = rows[r], i1 = rows[r + 1], i2 = rows[r + 2], i3 = rows[r + 3];
        const A v0 = load(i0), v1 = load(i1), v2 = load(i2), v3 = load(i3);
        acc = combine<N>(reduce, acc, v0);
        acc = combine<N>(reduce, acc, v1);
        acc = combine<N>(reduce, acc, v2);
        acc = combine<N>(reduce, acc, v3);
    }
    for (; r < e; ++r) acc = combine<N>(reduce, acc, load(rows[r]));
    if (reduce == R_MEAN) acc = N::mean(acc, (i64)(e - s) + (include_self ? 1 : 0));
    out[ooff] = N::st(acc);
}

// Warp per run when there are many lanes (each thread a lane, then the next 32), else a thread
// per (run, lane). `kmap` maps a key to its offset in out, `lout`/`lsrc` a lane to its offset in
// out/src, `rmap` a row to its offset in src. No keys: the counting sort's runs, where run w is
// key w (a scatter plan keeps none).
template <typename N, typename T>
__device__ void apply_impl(T* out, const T* src, T value, T alpha, int use_alpha, const u32* keys, const u32* rows,
                           const u32* starts, const u32* nruns, Layout kmap, Layout lout,
                           Layout lsrc, Layout rmap, i64 lanes, int reduce, int include_self,
                           int warp_mode) {
    const u32 runs = nruns[0];
    if (warp_mode) {
        const i64 wstep = (i64)gridDim.x * (blockDim.x >> 5);
        const int lane = threadIdx.x & 31;
        for (i64 w = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < runs; w += wstep) {
            u32 s = starts[w], e = starts[w + 1];
            if (s == e) continue;
            i64 kbase = offset_of(kmap, keys ? (i64)keys[s] : w);
            for (i64 l = lane; l < lanes; l += 32)
                fold_one<N, T>(out, kbase + offset_of(lout, l), src, value, alpha, use_alpha, rows, s, e, rmap,
                               offset_of(lsrc, l), reduce, include_self);
        }
    } else {
        const i64 step = (i64)gridDim.x * blockDim.x;
        const i64 total = (i64)runs * lanes;
        for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {
            i64 w = divq(t, lanes), l = t - w * lanes;
            u32 s = starts[w], e = starts[w + 1];
            if (s == e) continue;
            fold_one<N, T>(out, offset_of(kmap, keys ? (i64)keys[s] : w) + offset_of(lout, l), src, value, alpha, use_alpha, rows,
                           s, e, rmap, offset_of(lsrc, l), reduce, include_self);
        }
    }
}

#define APPLY(NAME, N, T)                                                                       \
    extern "C" __global__ void apply_##NAME(T* out, const T* src, T value, T alpha,            \
                                            int use_alpha, const u32* keys,                    \
                                            const u32* rows, const u32* starts,                \
                                            const u32* nruns, Layout kmap, Layout lout,        \
                                            Layout lsrc, Layout rmap, i64 lanes, int reduce,   \
                                            int include_self, int warp_mode) {                 \
        apply_impl<N, T>(out, src, value, alpha, use_alpha, keys, rows, starts, nruns, kmap,   \
                         lout, lsrc, rmap,                                                     \
                         lanes, reduce, include_self, warp_mode);                              \
    }
APPLY(f32, NumF32, float)
APPLY(f64, NumF64, double)
APPLY(f16, NumF16, u16)
APPLY(bf16, NumBF16, u16)
APPLY(bool, NumBool, u8)
APPLY(u8, Num<u8>, u8)
APPLY(i8, Num<i8>, i8)
APPLY(i16, Num<i16>, i16)
APPLY(u16, Num<u16>, u16)
APPLY(i32, Num<i32>, i32)
APPLY(u32, Num<u32>, u32)
APPLY(i64, Num<i64>, i64)
APPLY(u64, Num<u64>, u64)


// The common shape of a row scatter (scatter_add of src rows into dst rows, an index expanded
// over the columns): keys and rows are plain row numbers and the lanes are contiguous columns.
// A warp folds one run, each thread RKMAX columns of 64 at a time, RA rows read ahead.
// PAIR (the `_wide` f32 kernel, unless GATHER_CUDA_APPLY=narrow): a lane reads its two columns
// as one 8-byte pair (columns 2 lane, 2 lane + 1 of the 64), with 8 rows ahead.
#define RKMAX 2
template <typename T> struct alignas(2 * sizeof(T)) Pair { T a, b; };

// Lane j's row: the j-th smallest of rows[base, base + cnt), cnt <= 32 (0 past cnt). The
// counting sort leaves runs of up to SHORT_RUN rows in the order they were placed; a longer run
// comes sorted, and ordering each of its 32-row pieces again changes nothing. The rows of a run
// are distinct, so each lane's rank (how many are smaller) is its place.
// `mine` is rows[base + lane] for the lanes below cnt.
__device__ __forceinline__ u32 ordered(u32 mine, u32 cnt, int lane) {
    __shared__ u32 order[32][32];
    if ((u32)lane >= cnt) mine = 0xffffffffu;
    u32 rank = 0;
    for (u32 j = 0; j < cnt; ++j) rank += __shfl_sync(0xffffffffu, mine, (int)j) < mine;
    u32* o = order[threadIdx.x >> 5];
    if ((u32)lane < cnt) o[rank] = mine;
    __syncwarp();
    const u32 r = (u32)lane < cnt ? o[lane] : 0u;
    __syncwarp();
    return r;
}
// AHEAD (`apply_rows_ahead_f32`, GATHER_CUDA_APPLY=ahead, an experiment): a warp reads the
// next run's bounds when it starts a run and the next run's first 32 row numbers once its
// first rows are in flight, so that of the four waits for memory in a run (bounds, row
// numbers, two batches of rows for W6's runs of about 10) two overlap the run before.
template <typename N, typename T, int RA, bool PAIR, bool AHEAD = false>
__device__ void apply_rows_impl(T* out, const T* self_rows, const T* src, T alpha, int use_alpha, const u32* keys,
                                const u32* rows, const u32* starts, const u32* nruns,
                                i64 out_row, i64 src_row, int lanes, int reduce,
                                int include_self) {
    typedef typename N::Acc A;
    const u32 runs = nruns[0];
    const int lane = threadIdx.x & 31;
    const i64 wstep = (i64)gridDim.x * (blockDim.x >> 5);
    const A al = N::ld(alpha);
    i64 w = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    // With AHEAD, the bounds and first row numbers of run w, read during the run before.
    u32 s = 0, e = 0, first = 0;
    if (AHEAD && w < runs) {
        s = starts[w];
        e = starts[w + 1];
        if ((u32)lane < min(32u, e - s)) first = rows[s + lane];
    }
    for (; w < runs; w += wstep) {
        if (!AHEAD) {
            s = starts[w];
            e = starts[w + 1];
        }
        const i64 wn = w + wstep;
        u32 sn = 0, en = 0, first_n = 0;
        bool fetched = false;
        if (AHEAD && wn < runs) {
            sn = starts[wn];
            en = starts[wn + 1];
        }
        auto fetch_next = [&]() {
            if (AHEAD && !fetched) {
                fetched = true;
                if (wn < runs && (u32)lane < min(32u, en - sn)) first_n = rows[sn + lane];
            }
        };
        [&]() {
            // `self_rows` (x, when out holds no copy of it: the counting sort's runs are every key
            // in order, run w is row w, and the lanes are whole rows): untargeted rows are copied.
            if (s == e) {
                if (self_rows)
                    for (int l = lane; l < lanes; l += 32) out[w * out_row + l] = self_rows[w * out_row + l];
                return;
            }
            // No keys: the counting sort's runs, where run w is key w.
            const i64 key = keys ? (i64)keys[s] : w;
            T* o = out + key * out_row;
            const T* so = self_rows ? self_rows + key * out_row : o;
            if (reduce == R_SET) {
                // The last row in index order: the largest, whether the run is ordered or not.
                u32 last = 0;
                for (u32 base = s; base < e; base += 32)
                    if (base + lane < e) last = max(last, rows[base + lane]);
                for (int o2 = 16; o2 > 0; o2 >>= 1) last = max(last, __shfl_xor_sync(0xffffffffu, last, o2));
                const T* sr = src + (i64)last * src_row;
                for (int l = lane; l < lanes; l += 32) o[l] = sr[l];
                return;
            }
            // The run's row numbers come 32 at a time in one coalesced read (a lane each, then
            // shuffled), and its rows are read RA at a time, before any is folded, so that a run of
            // 10 rows waits for memory about 4 times rather than once per row. Columns go 64 at a
            // time (RKMAX per lane), which keeps the registers, and so the warps per
            // multiprocessor, where the one-row-at-a-time loop had them.
            const i64 n_run = (i64)(e - s) + (include_self ? 1 : 0);
            for (int c0 = 0; c0 < lanes; c0 += 32 * RKMAX) {
                // The column of this lane's k-th value: pairs side by side, or 32 columns apart.
                auto col = [&](int k) { return PAIR ? c0 + 2 * lane + k : c0 + lane + 32 * k; };
                A acc[RKMAX];
                bool started = include_self;
                if (include_self) {
#pragma unroll
                    for (int k = 0; k < RKMAX; ++k) {
                        const int l = col(k);
                        if (l < lanes) acc[k] = N::ld(so[l]);
                    }
                }
                for (u32 base = s; base < e; base += 32) {
                    const u32 cnt = min(32u, e - base);
                    const u32 raw = AHEAD && base == s ? first : (u32)lane < cnt ? rows[base + lane] : 0u;
                    const u32 mine = ordered(raw, cnt, lane);
                    for (u32 b = 0; b < cnt; b += RA) {
                        A v[RA][RKMAX];
#pragma unroll
                        for (int q = 0; q < RA; ++q) {
                            const u32 row = __shfl_sync(0xffffffffu, mine, (int)(b + q) & 31);
                            const T* sr = src + (i64)row * src_row;
                            if constexpr (PAIR) {
                                // lanes is even here, so a pair is whole or past the end.
                                const int l = col(0);
                                if (b + q < cnt && l < lanes) {
                                    const Pair<T> p = *(const Pair<T>*)(sr + l);
                                    const A x0 = N::ld(p.a), x1 = N::ld(p.b);
                                    v[q][0] = use_alpha ? N::mul(x0, al) : x0;
                                    v[q][1] = use_alpha ? N::mul(x1, al) : x1;
                                }
                            } else {
#pragma unroll
                                for (int k = 0; k < RKMAX; ++k) {
                                    const int l = col(k);
                                    if (b + q < cnt && l < lanes) {
                                        const A x = N::ld(sr[l]);
                                        v[q][k] = use_alpha ? N::mul(x, al) : x;
                                    }
                                }
                            }
                        }
                        // The next run's row numbers, its bounds being in by now.
                        fetch_next();
#pragma unroll
                        for (int q = 0; q < RA; ++q) {
                            if (b + q >= cnt) break;
#pragma unroll
                            for (int k = 0; k < RKMAX; ++k) {
                                const int l = col(k);
                                if (l < lanes)
                                    acc[k] = started ? combine<N>(reduce, acc[k], v[q][k]) : v[q][k];
                            }
                            started = true;
                        }
                    }
                }
#pragma unroll
                for (int k = 0; k < RKMAX; ++k) {
                    const int l = col(k);
                    if (l < lanes) o[l] = N::st(reduce == R_MEAN ? N::mean(acc[k], n_run) : acc[k]);
                }
            }
        }();
        if (AHEAD) {
            fetch_next();
            s = sn;
            e = en;
            first = first_n;
        }
    }
}

#define APPLY_ROWS_ARGS(T)                                                                      \
    T *out, const T *self_rows, const T *src, T alpha, int use_alpha, const u32 *keys,         \
        const u32 *rows, const u32 *starts, const u32 *nruns, i64 out_row, i64 src_row,        \
        int lanes, int reduce, int include_self
#define APPLY_ROWS_PASS                                                                         \
    out, self_rows, src, alpha, use_alpha, keys, rows, starts, nruns, out_row, src_row, lanes,  \
        reduce, include_self
#define APPLY_ROWS(NAME, N, T)                                                                  \
    extern "C" __global__ void apply_rows_##NAME(APPLY_ROWS_ARGS(T)) {                         \
        apply_rows_impl<N, T, 4, false>(APPLY_ROWS_PASS);                                       \
    }
extern "C" __global__ void apply_rows_wide_f32(APPLY_ROWS_ARGS(float)) {
    apply_rows_impl<NumF32, float, 8, true>(APPLY_ROWS_PASS);
}
extern "C" __global__ void __launch_bounds__(256, 4) apply_rows_ahead_f32(APPLY_ROWS_ARGS(float)) {
    apply_rows_impl<NumF32, float, 8, true, true>(APPLY_ROWS_PASS);
}
APPLY_ROWS(f32, NumF32, float)
APPLY_ROWS(f64, NumF64, double)
APPLY_ROWS(f16, NumF16, u16)
APPLY_ROWS(bf16, NumBF16, u16)
APPLY_ROWS(bool, NumBool, u8)
APPLY_ROWS(u8, Num<u8>, u8)
APPLY_ROWS(i8, Num<i8>, i8)
APPLY_ROWS(i16, Num<i16>, i16)
APPLY_ROWS(u16, Num<u16>, u16)
APPLY_ROWS(i32, Num<i32>, i32)
APPLY_ROWS(u32, Num<u32>, u32)
APPLY_ROWS(i64, Num<i64>, i64)
APPLY_ROWS(u64, Num<u64>, u64)
