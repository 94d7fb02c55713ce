//! The benchmark workloads of `../shared/bench/WORKLOADS.md` (W0–W11, plus W6p, W3s and W3b,
//! which time issue 6's additions beside them): their shapes, their deterministic data, the
//! library call each one times, its minimal byte count, and a cheap check of its result.
//!
//! `gather bench` (see [`crate::bench`]) and the criterion benches of `crates/gather/benches/`
//! both use this module, so the two always time the same calls on the same data.
//!
//! - **Data** is random with fixed seeds (the seeds of WORKLOADS.md, 1001–1011) from a
//!   counter-based splitmix64 stream: element `i` of a stream is a pure function of `(seed, i)`,
//!   so the arrays are generated in parallel and are identical for any number of threads.
//!   Floats are uniform in `[-1, 1)` (NumPy's generator draws normals; the values do not change
//!   how much memory an op moves); indices are uniform in range, as in WORKLOADS.md.
//! - **Calls** are the typed public API, exactly as a user writes them: expanded indices are
//!   stride-0 broadcast views (`insert_axis` + `broadcast`), never materialised; scatters are
//!   out of place (they clone the destination, as every peer's out-of-place call does).
//! - **Minimal bytes** follow WORKLOADS.md: for gather-like ops, the distinct input elements
//!   touched + the index as stored (an expanded index costs only its storage) + the output;
//!   for scatters, src + index as stored + 2 × the destination (read-modify-write). The number
//!   of distinct elements a uniform random index touches is its expectation computed from the
//!   shapes: `n · (1 − (1 − 1/n)^m)` per group of `n` candidates drawn `m` times.
//! - **Checks** compare a deterministic sample of output positions (or whole rows) with the
//!   definition computed directly from the inputs, so a wrong fast path cannot report a fast
//!   wrong number.
//!
//! ```
//! use gather_cli::workloads::{Id, Workload};
//! let w = Workload::new(Id::W1, 0.01);
//! let data = w.make();
//! let out = w.run(&data).unwrap();
//! assert_eq!(out.shape(), &[10, 500]);
//! assert!(w.verify(&data, &out).is_ok());
//! ```

use ndarray::{Array1, Array2, Array3, ArrayD, Axis};
use rayon::prelude::*;

use gather::Reduce;

/// One workload of WORKLOADS.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Id {
    /// `W0_tiny`: the 2×3 seed example, per-call latency.
    W0,
    /// `W1_seed`: gather dim 1 of `x[1000,1000]` with `index[1000,500]`.
    W1,
    /// `W2_token_logits`: gather dim -1 of `logits[8,512,32000]` with `labels[8,512,1]`.
    W2,
    /// `W3_topk_patches`: gather dim 1 of `patches[64,196,768]`, index `[64,49]` expanded.
    W3,
    /// `W4_roi_labels`: gather dim 1 of `roi_loc[65536,21,4]`, labels expanded to `[65536,1,4]`.
    W4,
    /// `W5_dim0_random`: gather dim 0 of `x[4096,4096]` with `index[4096,4096]`.
    W5,
    /// `W6_scatter_add_rows`: scatter_add dim 0 of `src[1e6,64]` rows into `zeros[1e5,64]`.
    W6,
    /// `W7_scatter_amax_rows`: scatter_reduce amax (include_self=false) on W6's data.
    W7,
    /// `W8_index_select_rows`: index_select dim 0 of `table[100000,256]` with `ids[50000]`.
    W8,
    /// `W9_take_1d`: take of `x[16777216]` with `idx[16777216]`.
    W9,
    /// `W10_cube`: gather dim 1 of `x[100,100,100]` with `index[100,100,100]`.
    W10,
    /// `W11a_scatter_2d_set`: scatter dim 1 of `src[1000,500]` into `self[1000,1000]`.
    W11a,
    /// `W11b_scatter_2d_add`: scatter_add dim 1 on W11a's data.
    W11b,
    /// `W6p_scatter_add_plan`: W6 through a [`gather::ScatterPlan`] of its index, built once
    /// (untimed) and reused: how much a reused plan saves over a fresh W6 call (issue 6).
    W6p,
    /// `W3s_topk_select_batched`: W3's data through [`gather::select_batched`] (`axis=1`,
    /// `batch_dims=1`), the index `[64,49]` as it is: the batched select beside W3 (issue 6).
    W3s,
    /// `W3b_topk_gather_broadcast`: W3's data through [`gather::Options`] with broadcasting, the index
    /// viewed `[64,49,1]` (no expand): the broadcasting gather beside W3 (issue 6).
    W3b,
}

/// Every workload, in WORKLOADS.md's order.
pub const ALL: [Id; 16] = [
    Id::W0,
    Id::W1,
    Id::W2,
    Id::W3,
    Id::W4,
    Id::W5,
    Id::W6,
    Id::W7,
    Id::W8,
    Id::W9,
    Id::W10,
    Id::W11a,
    Id::W11b,
    Id::W6p,
    Id::W3s,
    Id::W3b,
];

impl Id {
    /// The name WORKLOADS.md and the JSON use.
    ///
    /// ```
    /// assert_eq!(gather_cli::workloads::Id::W3.name(), "W3_topk_patches");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Id::W0 => "W0_tiny",
            Id::W1 => "W1_seed",
            Id::W2 => "W2_token_logits",
            Id::W3 => "W3_topk_patches",
            Id::W4 => "W4_roi_labels",
            Id::W5 => "W5_dim0_random",
            Id::W6 => "W6_scatter_add_rows",
            Id::W7 => "W7_scatter_amax_rows",
            Id::W8 => "W8_index_select_rows",
            Id::W9 => "W9_take_1d",
            Id::W10 => "W10_cube",
            Id::W11a => "W11a_scatter_2d_set",
            Id::W11b => "W11b_scatter_2d_add",
            Id::W6p => "W6p_scatter_add_plan",
            Id::W3s => "W3s_topk_select_batched",
            Id::W3b => "W3b_topk_gather_broadcast",
        }
    }

    /// The short name (`W3`, `W11a`).
    ///
    /// ```
    /// assert_eq!(gather_cli::workloads::Id::W11a.short(), "W11a");
    /// ```
    pub fn short(self) -> &'static str {
        self.name().split('_').next().unwrap_or_default()
    }

    /// The call, in PyTorch's words (WORKLOADS.md's definition).
    pub fn describe(self) -> &'static str {
        match self {
            Id::W0 => "gather([[10,20,30],[40,50,60]], 1, [[0,2],[1,0]])",
            Id::W1 => "gather(x[1000,1000], 1, index[1000,500])",
            Id::W2 => "gather(logits[8,512,32000], -1, labels[8,512].unsqueeze(-1)).squeeze(-1)",
            Id::W3 => {
                "gather(patches[64,196,768], 1, indices[64,49].unsqueeze(-1).expand(-1,-1,768))"
            }
            Id::W4 => {
                "roi_loc[65536,21,4].gather(1, labels[65536].view(-1,1,1).expand(-1,1,4)).squeeze(1)"
            }
            Id::W5 => "gather(x[4096,4096], 0, index[4096,4096])",
            Id::W6 => {
                "zeros[100000,64].scatter_add(0, index[1e6].unsqueeze(1).expand(-1,64), src[1e6,64])"
            }
            Id::W7 => {
                "zeros[100000,64].scatter_reduce(0, index expanded, src, 'amax', include_self=False)"
            }
            Id::W8 => "index_select(table[100000,256], 0, ids[50000])",
            Id::W9 => "take(x[16777216], idx[16777216])",
            Id::W10 => "gather(x[100,100,100], 1, index[100,100,100])",
            Id::W11a => "zeros[1000,1000].scatter(1, index[1000,500], src[1000,500])",
            Id::W11b => "zeros[1000,1000].scatter_add(1, index[1000,500], src[1000,500])",
            Id::W6p => {
                "ScatterPlan::new(index[1e6], 100000) once, then plan.scatter_add(zeros[100000,64], src[1e6,64])"
            }
            Id::W3s => "select_batched(patches[64,196,768], axis=1, indices[64,49], batch_dims=1)",
            Id::W3b => "gather_broadcast(patches[64,196,768], 1, indices[64,49].unsqueeze(-1))",
        }
    }

    /// Whether the workload is timed as a per-call latency (W0) rather than a throughput.
    pub fn is_latency(self) -> bool {
        self == Id::W0
    }

    /// Workloads that share their data (W6/W7, W11a/W11b) have the same key.
    pub fn data_key(self) -> Id {
        match self {
            Id::W7 => Id::W6,
            Id::W11b => Id::W11a,
            Id::W3s | Id::W3b => Id::W3,
            other => other,
        }
    }

    /// WORKLOADS.md's seed of the workload's data.
    pub fn seed(self) -> u64 {
        match self.data_key() {
            Id::W0 => 1000,
            Id::W1 => 1001,
            Id::W2 => 1002,
            Id::W3 | Id::W3s | Id::W3b => 1003,
            Id::W4 => 1004,
            Id::W5 => 1005,
            Id::W6 | Id::W7 | Id::W6p => 1006,
            Id::W8 => 1008,
            Id::W9 => 1009,
            Id::W10 => 1010,
            Id::W11a | Id::W11b => 1011,
        }
    }
}

/// Parses `--only`: a comma-separated list of short names (`W3`), full names
/// (`W3_topk_patches`), or `W11` for both W11a and W11b; in WORKLOADS.md's order, without
/// repeats. `None` or `all` selects every workload.
///
/// ```
/// use gather_cli::workloads::{Id, select};
/// assert_eq!(select(Some("W6,W3_topk_patches")).unwrap(), vec![Id::W3, Id::W6]);
/// assert_eq!(select(Some("W11")).unwrap(), vec![Id::W11a, Id::W11b]);
/// assert!(select(Some("W12")).is_err());
/// ```
pub fn select(only: Option<&str>) -> Result<Vec<Id>, String> {
    let Some(list) = only.map(str::trim).filter(|s| !s.is_empty() && *s != "all") else {
        return Ok(ALL.to_vec());
    };
    let mut chosen = Vec::new();
    for tok in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let t = tok.to_ascii_lowercase();
        let hits: Vec<Id> = ALL
            .iter()
            .copied()
            .filter(|w| {
                let short = w.short().to_ascii_lowercase();
                w.name().eq_ignore_ascii_case(&t)
                    || short == t
                    || (t == "w11" && short.starts_with("w11"))
            })
            .collect();
        if hits.is_empty() {
            return Err(format!(
                "unknown workload `{tok}` (the workloads are {})",
                ALL.iter().map(|w| w.short()).collect::<Vec<_>>().join(", ")
            ));
        }
        chosen.extend(hits);
    }
    Ok(ALL.iter().copied().filter(|w| chosen.contains(w)).collect())
}

// ---------------------------------------------------------------------------------------------
// Deterministic data
// ---------------------------------------------------------------------------------------------

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The splitmix64 output function.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The key of stream `k` of a seed (each array of a workload has its own stream).
fn stream(seed: u64, k: u64) -> u64 {
    mix(seed.wrapping_mul(GAMMA) ^ mix(k.wrapping_add(GAMMA)))
}

/// Element `i` of the stream `key`: a pure function, so streams fill in parallel.
#[inline]
fn nth(key: u64, i: u64) -> u64 {
    mix(key.wrapping_add(i.wrapping_add(1).wrapping_mul(GAMMA)))
}

#[inline]
fn unit_f32(r: u64) -> f32 {
    // 24 random bits → [0, 1), then [-1, 1).
    ((r >> 40) as f32) * (1.0 / 16_777_216.0) * 2.0 - 1.0
}

#[inline]
fn below(r: u64, n: usize) -> usize {
    ((u128::from(r) * n as u128) >> 64) as usize
}

/// `n` floats uniform in `[-1, 1)`.
pub fn random_f32(n: usize, key: u64) -> Vec<f32> {
    filled(n, |i| unit_f32(nth(key, i as u64)))
}

/// `n` indices uniform in `[0, bound)`.
pub fn random_index(n: usize, bound: usize, key: u64) -> Vec<i64> {
    filled(n, |i| below(nth(key, i as u64), bound) as i64)
}

/// `n` zeros (a scatter destination).
fn zeros(n: usize) -> Vec<f32> {
    filled(n, |_| 0.0)
}

/// `f(0), ..., f(n - 1)`, computed in parallel into memory laid out as NumPy lays out the
/// workloads' arrays: a buffer of 4 MiB or more on transparent huge pages (NumPy's default on
/// Linux, which `torch.from_numpy` tensors share). On 4 KiB pages every random read of W5, W8 or
/// W9's tables would pay a page-table walk that the peers' runs do not.
fn filled<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    let mut v = gather::memory::huge_page_vec(n).expect("workload data fits in memory");
    (0..n)
        .into_par_iter()
        .with_min_len(1 << 14)
        .map(f)
        .collect_into_vec(&mut v);
    v
}

/// A small sequential generator (for samples and permutations).
#[derive(Debug, Clone)]
pub struct Rng {
    key: u64,
    i: u64,
}

impl Rng {
    /// A generator of the stream `k` of `seed`.
    pub fn new(seed: u64, k: u64) -> Rng {
        Rng {
            key: stream(seed, k),
            i: 0,
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.i += 1;
        nth(self.key, self.i)
    }

    /// A value uniform in `[0, n)` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        below(self.next_u64(), n)
    }
}

fn arr2<T>(shape: (usize, usize), v: Vec<T>) -> Array2<T> {
    Array2::from_shape_vec(shape, v).expect("the length is the shape's product")
}

fn arr3<T>(shape: (usize, usize, usize), v: Vec<T>) -> Array3<T> {
    Array3::from_shape_vec(shape, v).expect("the length is the shape's product")
}

/// The inputs of a workload (W6/W7 and W11a/W11b share theirs). Index arrays are stored
/// unexpanded, as a user holds them before broadcasting.
#[derive(Debug, Clone)]
pub enum Data {
    /// W0, W1, W5: `x`, `index` (2-D).
    Gather2 {
        /// The input.
        x: Array2<f32>,
        /// The index, the output's shape.
        index: Array2<i64>,
    },
    /// W2: `logits[B,L,V]`, `labels[B,L]`.
    Logits {
        /// The input.
        logits: Array3<f32>,
        /// One label per position.
        labels: Array2<i64>,
    },
    /// W3: `patches[B,N,D]`, `indices[B,K]` (distinct per row).
    Patches {
        /// The input.
        patches: Array3<f32>,
        /// The kept patches per image.
        indices: Array2<i64>,
    },
    /// W4: `roi_loc[R,C,4]`, `labels[R]`.
    Roi {
        /// The input.
        roi_loc: Array3<f32>,
        /// One class per region.
        labels: Array1<i64>,
    },
    /// W6, W7: `dst[V,F]` (zeros), `src[E,F]`, `index[E]`.
    Rows {
        /// The destination (zeros).
        dst: Array2<f32>,
        /// The rows scattered.
        src: Array2<f32>,
        /// The destination row of each source row.
        index: Array1<i64>,
        /// W6p: the index's plan, built with the data (untimed).
        plan: Option<gather::ScatterPlan>,
    },
    /// W8: `table[V,F]`, `ids[n]`.
    Table {
        /// The table.
        table: Array2<f32>,
        /// The rows selected.
        ids: Array1<i64>,
    },
    /// W9: `x[n]`, `idx[n]`.
    Flat {
        /// The input.
        x: Array1<f32>,
        /// Flat indices into it.
        idx: Array1<i64>,
    },
    /// W10: `x[A,B,C]`, `index[A,B,C]`.
    Cube {
        /// The input.
        x: Array3<f32>,
        /// The index.
        index: Array3<i64>,
    },
    /// W11a, W11b: `self[R,C]` (zeros), `index[R,K]`, `src[R,K]`.
    Scatter2 {
        /// The destination (zeros).
        dst: Array2<f32>,
        /// Columns, with duplicates within rows.
        index: Array2<i64>,
        /// The values scattered.
        src: Array2<f32>,
    },
}

impl Data {
    /// Bytes of every array held.
    pub fn bytes(&self) -> usize {
        fn b<T, D: ndarray::Dimension>(a: &ndarray::Array<T, D>) -> usize {
            a.len() * std::mem::size_of::<T>()
        }
        match self {
            Data::Gather2 { x, index } => b(x) + b(index),
            Data::Logits { logits, labels } => b(logits) + b(labels),
            Data::Patches { patches, indices } => b(patches) + b(indices),
            Data::Roi { roi_loc, labels } => b(roi_loc) + b(labels),
            Data::Rows {
                dst, src, index, ..
            } => b(dst) + b(src) + b(index),
            Data::Table { table, ids } => b(table) + b(ids),
            Data::Flat { x, idx } => b(x) + b(idx),
            Data::Cube { x, index } => b(x) + b(index),
            Data::Scatter2 { dst, index, src } => b(dst) + b(index) + b(src),
        }
    }
}

/// A workload at a scale: `scale < 1` shrinks its large (batch-like) dims for quick runs and
/// tests; `1` is WORKLOADS.md's shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Workload {
    /// Which workload.
    pub id: Id,
    /// The factor on its large dims (1 = WORKLOADS.md).
    pub scale: f64,
}

/// `n · scale`, rounded, at least 1.
fn sc(n: usize, scale: f64) -> usize {
    ((n as f64 * scale).round() as usize).max(1)
}

/// Expected number of distinct values among `m` uniform draws from `n` candidates.
///
/// ```
/// let u = gather_cli::workloads::expected_distinct(1000.0, 500.0);
/// assert!((u - 393.6).abs() < 0.1);
/// assert_eq!(gather_cli::workloads::expected_distinct(7.0, 1.0), 1.0);
/// ```
pub fn expected_distinct(n: f64, m: f64) -> f64 {
    if n <= 1.0 {
        return n.min(m);
    }
    n * -(m * (-1.0 / n).ln_1p()).exp_m1()
}

impl Workload {
    /// The workload `id` at `scale`.
    pub fn new(id: Id, scale: f64) -> Workload {
        Workload { id, scale }
    }

    fn s(&self, n: usize) -> usize {
        sc(n, self.scale)
    }

    /// The shapes of its arrays, for the report: `name[shape]` joined with spaces.
    pub fn shapes(&self) -> String {
        let s = |n| self.s(n);
        match self.id {
            Id::W0 => "x[2,3] index[2,2]".into(),
            Id::W1 => format!("x[{},1000] index[{},500]", s(1000), s(1000)),
            Id::W2 => format!("logits[8,{},32000] labels[8,{}]", s(512), s(512)),
            Id::W3 | Id::W3s | Id::W3b => {
                format!("patches[{},196,768] indices[{},49]", s(64), s(64))
            }
            Id::W4 => format!("roi_loc[{},21,4] labels[{}]", s(65536), s(65536)),
            Id::W5 => format!("x[4096,{}] index[4096,{}]", s(4096), s(4096)),
            Id::W6 | Id::W7 | Id::W6p => format!(
                "dst[{},64] src[{},64] index[{}]",
                s(100_000),
                s(1_000_000),
                s(1_000_000)
            ),
            Id::W8 => format!("table[{},256] ids[{}]", s(100_000), s(50_000)),
            Id::W9 => format!("x[{}] idx[{}]", s(16_777_216), s(16_777_216)),
            Id::W10 => format!("x[{},100,100] index[{},100,100]", s(100), s(100)),
            Id::W11a | Id::W11b => format!(
                "self[{},1000] index[{},500] src[{},500]",
                s(1000),
                s(1000),
                s(1000)
            ),
        }
    }

    /// Generates the inputs (deterministic; parallel on the current rayon pool).
    pub fn make(&self) -> Data {
        let seed = self.id.seed();
        let key = |k| stream(seed, k);
        match self.id.data_key() {
            Id::W0 => Data::Gather2 {
                x: ndarray::array![[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]],
                index: ndarray::array![[0, 2], [1, 0]],
            },
            Id::W1 => {
                let r = self.s(1000);
                Data::Gather2 {
                    x: arr2((r, 1000), random_f32(r * 1000, key(0))),
                    index: arr2((r, 500), random_index(r * 500, 1000, key(1))),
                }
            }
            Id::W2 => {
                let l = self.s(512);
                Data::Logits {
                    logits: arr3((8, l, 32000), random_f32(8 * l * 32000, key(0))),
                    labels: arr2((8, l), random_index(8 * l, 32000, key(1))),
                }
            }
            Id::W3 | Id::W3s | Id::W3b => {
                let b = self.s(64);
                let mut idx = Vec::with_capacity(b * 49);
                for row in 0..b {
                    // The first 49 of a random permutation of the 196 patches.
                    let mut rng = Rng::new(seed, 100 + row as u64);
                    let mut perm: Vec<i64> = (0..196).collect();
                    for i in 0..49 {
                        let j = i + rng.below(196 - i);
                        perm.swap(i, j);
                    }
                    idx.extend_from_slice(&perm[..49]);
                }
                Data::Patches {
                    patches: arr3((b, 196, 768), random_f32(b * 196 * 768, key(0))),
                    indices: arr2((b, 49), idx),
                }
            }
            Id::W4 => {
                let r = self.s(65536);
                Data::Roi {
                    roi_loc: arr3((r, 21, 4), random_f32(r * 21 * 4, key(0))),
                    labels: Array1::from(random_index(r, 21, key(1))),
                }
            }
            Id::W5 => {
                let c = self.s(4096);
                Data::Gather2 {
                    x: arr2((4096, c), random_f32(4096 * c, key(0))),
                    index: arr2((4096, c), random_index(4096 * c, 4096, key(1))),
                }
            }
            Id::W6 | Id::W7 | Id::W6p => {
                let (v, e) = (self.s(100_000), self.s(1_000_000));
                let index = Array1::from(random_index(e, v, key(1)));
                // W6p: the plan is part of the prepared data, like the index itself.
                let plan = (self.id == Id::W6p)
                    .then(|| gather::ScatterPlan::new(&index, v).expect("ids are in 0..v"));
                Data::Rows {
                    dst: arr2((v, 64), zeros(v * 64)),
                    src: arr2((e, 64), random_f32(e * 64, key(0))),
                    index,
                    plan,
                }
            }
            Id::W8 => {
                let (v, n) = (self.s(100_000), self.s(50_000));
                Data::Table {
                    table: arr2((v, 256), random_f32(v * 256, key(0))),
                    ids: Array1::from(random_index(n, v, key(1))),
                }
            }
            Id::W9 => {
                let n = self.s(16_777_216);
                Data::Flat {
                    x: Array1::from(random_f32(n, key(0))),
                    idx: Array1::from(random_index(n, n, key(1))),
                }
            }
            Id::W10 => {
                let a = self.s(100);
                Data::Cube {
                    x: arr3((a, 100, 100), random_f32(a * 10_000, key(0))),
                    index: arr3((a, 100, 100), random_index(a * 10_000, 100, key(1))),
                }
            }
            Id::W11a | Id::W11b => {
                let r = self.s(1000);
                Data::Scatter2 {
                    dst: arr2((r, 1000), zeros(r * 1000)),
                    index: arr2((r, 500), random_index(r * 500, 1000, key(1))),
                    src: arr2((r, 500), random_f32(r * 500, key(0))),
                }
            }
        }
    }

    /// Runs the library call once, out of place, and returns its result (dynamic rank).
    ///
    /// # Errors
    /// The library's error, as text; or a note that `data` belongs to another workload.
    pub fn run(&self, data: &Data) -> Result<ArrayD<f32>, String> {
        let e = |e: gather::Error| e.to_string();
        let out = match (self.id, data) {
            (Id::W0 | Id::W1, Data::Gather2 { x, index }) => {
                gather::gather(x, 1, index).map_err(e)?.into_dyn()
            }
            (Id::W10, Data::Cube { x, index }) => {
                gather::gather(x, 1, index).map_err(e)?.into_dyn()
            }
            (Id::W5, Data::Gather2 { x, index }) => {
                gather::gather(x, 0, index).map_err(e)?.into_dyn()
            }
            (Id::W2, Data::Logits { logits, labels }) => {
                let idx = labels.view().insert_axis(Axis(2));
                gather::gather(logits, -1, &idx)
                    .map_err(e)?
                    .index_axis_move(Axis(2), 0)
                    .into_dyn()
            }
            (Id::W3, Data::Patches { patches, indices }) => {
                let (b, k) = indices.dim();
                let d = patches.shape()[2];
                let idx = indices.view().insert_axis(Axis(2));
                let idx = idx.broadcast((b, k, d)).ok_or("W3: broadcast failed")?;
                gather::gather(patches, 1, &idx).map_err(e)?.into_dyn()
            }
            (Id::W3s, Data::Patches { patches, indices }) => {
                gather::select_batched(patches, 1, indices, 1).map_err(e)?
            }
            (Id::W3b, Data::Patches { patches, indices }) => {
                let idx = indices.view().insert_axis(Axis(2));
                gather::Options::new()
                    .broadcast(true)
                    .gather(patches, 1, &idx)
                    .map_err(e)?
                    .into_dyn()
            }
            (Id::W4, Data::Roi { roi_loc, labels }) => {
                let r = labels.len();
                let idx = labels.view().insert_axis(Axis(1)).insert_axis(Axis(2));
                let idx = idx.broadcast((r, 1, 4)).ok_or("W4: broadcast failed")?;
                gather::gather(roi_loc, 1, &idx)
                    .map_err(e)?
                    .index_axis_move(Axis(1), 0)
                    .into_dyn()
            }
            (
                Id::W6p,
                Data::Rows {
                    dst,
                    src,
                    plan: Some(plan),
                    ..
                },
            ) => plan.scatter_add(dst, src).map_err(e)?.into_dyn(),
            (
                Id::W6 | Id::W7,
                Data::Rows {
                    dst, src, index, ..
                },
            ) => {
                let idx = index.view().insert_axis(Axis(1));
                let idx = idx.broadcast(src.dim()).ok_or("W6: broadcast failed")?;
                if self.id == Id::W6 {
                    gather::scatter_add(dst, 0, &idx, src)
                        .map_err(e)?
                        .into_dyn()
                } else {
                    gather::scatter_reduce(dst, 0, &idx, src, Reduce::Amax, false)
                        .map_err(e)?
                        .into_dyn()
                }
            }
            (Id::W8, Data::Table { table, ids }) => {
                gather::index_select(table, 0, ids).map_err(e)?.into_dyn()
            }
            (Id::W9, Data::Flat { x, idx }) => gather::take(x, idx).map_err(e)?.into_dyn(),
            (Id::W11a, Data::Scatter2 { dst, index, src }) => {
                gather::scatter(dst, 1, index, src).map_err(e)?.into_dyn()
            }
            (Id::W11b, Data::Scatter2 { dst, index, src }) => {
                gather::scatter_add(dst, 1, index, src)
                    .map_err(e)?
                    .into_dyn()
            }
            (id, _) => return Err(format!("{}: the data of another workload", id.name())),
        };
        Ok(out)
    }

    /// The output's shape.
    pub fn out_shape(&self) -> Vec<usize> {
        let s = |n| self.s(n);
        match self.id {
            Id::W0 => vec![2, 2],
            Id::W1 => vec![s(1000), 500],
            Id::W2 => vec![8, s(512)],
            Id::W3 | Id::W3s | Id::W3b => vec![s(64), 49, 768],
            Id::W4 => vec![s(65536), 4],
            Id::W5 => vec![4096, s(4096)],
            Id::W6 | Id::W7 | Id::W6p => vec![s(100_000), 64],
            Id::W8 => vec![s(50_000), 256],
            Id::W9 => vec![s(16_777_216)],
            Id::W10 => vec![s(100), 100, 100],
            Id::W11a | Id::W11b => vec![s(1000), 1000],
        }
    }

    /// Bytes of the output (`float32`).
    pub fn out_bytes(&self) -> usize {
        4 * self.out_shape().iter().product::<usize>()
    }

    /// WORKLOADS.md's minimal byte count (see the module docs for the formula).
    ///
    /// ```
    /// use gather_cli::workloads::{Id, Workload};
    /// let mb = Workload::new(Id::W6, 1.0).min_bytes() / 1e6;
    /// assert!((mb - 315.2).abs() < 0.01);
    /// ```
    pub fn min_bytes(&self) -> f64 {
        const F: f64 = 4.0; // float32
        const I: f64 = 8.0; // int64
        let s = |n| self.s(n) as f64;
        let out = self.out_bytes() as f64;
        // gather-like: distinct elements read + index as stored + output written
        let gather_like = |touched: f64, index_elems: f64| touched * F + index_elems * I + out;
        // scatter: src + index as stored + read and write of the destination
        let scatter = |src: f64, index_elems: f64| src * F + index_elems * I + 2.0 * out;
        match self.id {
            Id::W0 => gather_like(4.0, 4.0),
            Id::W1 => gather_like(s(1000) * expected_distinct(1000.0, 500.0), s(1000) * 500.0),
            Id::W2 => gather_like(8.0 * s(512), 8.0 * s(512)),
            // W3s/W3b: the same minimum (the index is stored [64,49] in every form).
            Id::W3 | Id::W3s | Id::W3b => gather_like(s(64) * 49.0 * 768.0, s(64) * 49.0),
            Id::W4 => gather_like(s(65536) * 4.0, s(65536)),
            Id::W5 => gather_like(
                s(4096) * expected_distinct(4096.0, 4096.0),
                4096.0 * s(4096),
            ),
            Id::W6 | Id::W7 | Id::W6p => scatter(s(1_000_000) * 64.0, s(1_000_000)),
            Id::W8 => gather_like(expected_distinct(s(100_000), s(50_000)) * 256.0, s(50_000)),
            Id::W9 => gather_like(
                expected_distinct(s(16_777_216), s(16_777_216)),
                s(16_777_216),
            ),
            Id::W10 => gather_like(
                s(100) * 100.0 * expected_distinct(100.0, 100.0),
                s(100) * 10_000.0,
            ),
            Id::W11a | Id::W11b => scatter(s(1000) * 500.0, s(1000) * 500.0),
        }
    }

    /// Extra memory the issue's target allows beyond the output: the CSR (a sorted permutation
    /// of the row index plus row offsets, 8 bytes each) for the row scatters W6/W7, else 0.
    pub fn csr_allowance(&self) -> usize {
        match self.id {
            Id::W6 | Id::W7 | Id::W6p => 8 * (self.s(1_000_000) + self.s(100_000) + 1),
            _ => 0,
        }
    }

    /// Checks `out` against the definition on a deterministic sample of positions (whole rows
    /// for the row ops and the scatters). Returns what was checked.
    ///
    /// # Errors
    /// The first wrong position, with the expected and the actual value; or a wrong shape.
    ///
    /// ```
    /// use gather_cli::workloads::{Id, Workload};
    /// let w = Workload::new(Id::W9, 0.001);
    /// let data = w.make();
    /// let mut out = w.run(&data).unwrap();
    /// assert!(w.verify(&data, &out).is_ok());
    /// out.iter_mut().for_each(|v| *v += 1.0);
    /// assert!(w.verify(&data, &out).is_err());
    /// ```
    pub fn verify(&self, data: &Data, out: &ArrayD<f32>) -> Result<String, String> {
        let want = self.out_shape();
        if out.shape() != want.as_slice() {
            return Err(format!(
                "{}: output shape {:?}, expected {:?}",
                self.id.name(),
                out.shape(),
                want
            ));
        }
        let mut rng = Rng::new(self.id.seed(), 7);
        const SAMPLES: usize = 4096;
        const ROWS: usize = 64;
        let name = self.id.name();
        let mismatch = |at: String, got: f32, exp: f32| {
            Err(format!("{name}: out{at} = {got}, expected {exp}"))
        };
        match (self.id, data) {
            (Id::W0, Data::Gather2 { .. }) => {
                let exp = [10.0, 30.0, 50.0, 40.0];
                for (i, (&g, &e)) in out.iter().zip(exp.iter()).enumerate() {
                    if g != e {
                        return mismatch(format!("[{}][{}]", i / 2, i % 2), g, e);
                    }
                }
                Ok("every element".into())
            }
            (Id::W1 | Id::W5, Data::Gather2 { x, index }) => {
                let (r, c) = index.dim();
                for _ in 0..SAMPLES {
                    let (i, j) = (rng.below(r), rng.below(c));
                    let k = index[[i, j]] as usize;
                    let e = if self.id == Id::W1 {
                        x[[i, k]]
                    } else {
                        x[[k, j]]
                    };
                    let g = out[[i, j]];
                    if g.to_bits() != e.to_bits() {
                        return mismatch(format!("[{i}][{j}]"), g, e);
                    }
                }
                Ok(format!("{SAMPLES} sampled elements"))
            }
            (Id::W2, Data::Logits { logits, labels }) => {
                let (b, l) = labels.dim();
                for _ in 0..SAMPLES {
                    let (i, j) = (rng.below(b), rng.below(l));
                    let e = logits[[i, j, labels[[i, j]] as usize]];
                    let g = out[[i, j]];
                    if g.to_bits() != e.to_bits() {
                        return mismatch(format!("[{i}][{j}]"), g, e);
                    }
                }
                Ok(format!("{SAMPLES} sampled elements"))
            }
            (Id::W3 | Id::W3s | Id::W3b, Data::Patches { patches, indices }) => {
                let (b, k) = indices.dim();
                let d = patches.shape()[2];
                for _ in 0..SAMPLES {
                    let (i, j, f) = (rng.below(b), rng.below(k), rng.below(d));
                    let e = patches[[i, indices[[i, j]] as usize, f]];
                    let g = out[[i, j, f]];
                    if g.to_bits() != e.to_bits() {
                        return mismatch(format!("[{i}][{j}][{f}]"), g, e);
                    }
                }
                Ok(format!("{SAMPLES} sampled elements"))
            }
            (Id::W4, Data::Roi { roi_loc, labels }) => {
                for _ in 0..SAMPLES {
                    let (i, f) = (rng.below(labels.len()), rng.below(4));
                    let e = roi_loc[[i, labels[i] as usize, f]];
                    let g = out[[i, f]];
                    if g.to_bits() != e.to_bits() {
                        return mismatch(format!("[{i}][{f}]"), g, e);
                    }
                }
                Ok(format!("{SAMPLES} sampled elements"))
            }
            (Id::W10, Data::Cube { x, index }) => {
                let (a, b, c) = index.dim();
                for _ in 0..SAMPLES {
                    let (i, j, k) = (rng.below(a), rng.below(b), rng.below(c));
                    let e = x[[i, index[[i, j, k]] as usize, k]];
                    let g = out[[i, j, k]];
                    if g.to_bits() != e.to_bits() {
                        return mismatch(format!("[{i}][{j}][{k}]"), g, e);
                    }
                }
                Ok(format!("{SAMPLES} sampled elements"))
            }
            (Id::W8, Data::Table { table, ids }) => {
                for _ in 0..ROWS {
                    let i = rng.below(ids.len());
                    let row = table.row(ids[i] as usize);
                    for (f, (&g, &e)) in out.index_axis(Axis(0), i).iter().zip(row).enumerate() {
                        if g.to_bits() != e.to_bits() {
                            return mismatch(format!("[{i}][{f}]"), g, e);
                        }
                    }
                }
                Ok(format!("{ROWS} sampled rows"))
            }
            (Id::W9, Data::Flat { x, idx }) => {
                for _ in 0..SAMPLES {
                    let i = rng.below(idx.len());
                    let e = x[idx[i] as usize];
                    let g = out[[i]];
                    if g.to_bits() != e.to_bits() {
                        return mismatch(format!("[{i}]"), g, e);
                    }
                }
                Ok(format!("{SAMPLES} sampled elements"))
            }
            (
                Id::W6 | Id::W7 | Id::W6p,
                Data::Rows {
                    dst, src, index, ..
                },
            ) => {
                // The source rows of a sample of destination rows, in index order.
                let v = dst.nrows();
                let mut slot = vec![usize::MAX; v];
                let mut rows: Vec<usize> = Vec::new();
                for _ in 0..ROWS.min(v) {
                    let r = rng.below(v);
                    if slot[r] == usize::MAX {
                        slot[r] = rows.len();
                        rows.push(r);
                    }
                }
                let mut sources: Vec<Vec<usize>> = vec![Vec::new(); rows.len()];
                for (e, &t) in index.iter().enumerate() {
                    let s = slot[t as usize];
                    if s != usize::MAX {
                        sources[s].push(e);
                    }
                }
                let mut inexact = 0usize;
                for (&r, srcs) in rows.iter().zip(&sources) {
                    for f in 0..dst.ncols() {
                        let exp = if self.id != Id::W7 {
                            srcs.iter().fold(dst[[r, f]], |acc, &e| acc + src[[e, f]])
                        } else if srcs.is_empty() {
                            dst[[r, f]]
                        } else {
                            srcs.iter().fold(f32::NEG_INFINITY, |m, &e| {
                                let s = src[[e, f]];
                                if s.is_nan() || m.is_nan() {
                                    f32::NAN
                                } else {
                                    m.max(s)
                                }
                            })
                        };
                        let g = out[[r, f]];
                        if g.to_bits() != exp.to_bits() {
                            let close = (g - exp).abs() <= 1e-5 + 1e-5 * exp.abs();
                            if self.id == Id::W7 || !close {
                                return mismatch(format!("[{r}][{f}]"), g, exp);
                            }
                            inexact += 1;
                        }
                    }
                }
                Ok(if inexact == 0 {
                    format!("{} sampled destination rows, bitwise", rows.len())
                } else {
                    format!(
                        "{} sampled destination rows, {inexact} elements within 1e-5 only",
                        rows.len()
                    )
                })
            }
            (Id::W11a | Id::W11b, Data::Scatter2 { dst, index, src }) => {
                for _ in 0..ROWS.min(index.nrows()) {
                    let i = rng.below(index.nrows());
                    let mut exp = dst.row(i).to_owned();
                    for (&c, &s) in index.row(i).iter().zip(src.row(i)) {
                        let c = c as usize;
                        // scatter keeps the last write in index order (the library's rule)
                        exp[c] = if self.id == Id::W11a { s } else { exp[c] + s };
                    }
                    for (c, (&g, &e)) in out.index_axis(Axis(0), i).iter().zip(&exp).enumerate() {
                        if g.to_bits() != e.to_bits() {
                            return mismatch(format!("[{i}][{c}]"), g, e);
                        }
                    }
                }
                Ok(format!("{} sampled rows, bitwise", ROWS.min(index.nrows())))
            }
            (id, _) => Err(format!("{}: the data of another workload", id.name())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_bytes_match_workloads_md() {
        // WORKLOADS.md's table, in MB (W8's figure is NumPy's realisation: 0.05% off the
        // expectation).
        let table = [
            (Id::W1, 7.57),
            (Id::W2, 0.07),
            (Id::W3, 19.29),
            (Id::W3s, 19.29),
            (Id::W3b, 19.29),
            (Id::W4, 2.62),
            (Id::W5, 243.75),
            (Id::W6, 315.20),
            (Id::W7, 315.20),
            (Id::W8, 91.85),
            (Id::W9, 243.75),
            (Id::W10, 14.54),
            (Id::W11a, 14.00),
            (Id::W11b, 14.00),
        ];
        for (id, mb) in table {
            let got = Workload::new(id, 1.0).min_bytes() / 1e6;
            assert!(
                (got - mb).abs() <= 0.006 + 0.0006 * mb,
                "{}: {got} MB, WORKLOADS.md says {mb}",
                id.name()
            );
        }
    }

    #[test]
    fn data_is_a_pure_function_of_the_seed_and_thread_count_free() {
        let w = Workload::new(Id::W1, 0.05);
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| w.make());
        let three = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap()
            .install(|| w.make());
        match (one, three) {
            (Data::Gather2 { x: x1, index: i1 }, Data::Gather2 { x: x3, index: i3 }) => {
                assert_eq!(x1, x3);
                assert_eq!(i1, i3);
                assert!(i1.iter().all(|&v| (0..1000).contains(&v)));
                assert!(x1.iter().all(|&v| (-1.0..1.0).contains(&v)));
                // not constant: the generator draws different values
                assert!(i1.iter().any(|&v| v != i1[[0, 0]]));
            }
            _ => panic!("W1 makes Gather2"),
        }
    }

    #[test]
    fn topk_indices_are_distinct_per_row() {
        let Data::Patches { indices, .. } = Workload::new(Id::W3, 0.1).make() else {
            panic!("W3 makes Patches")
        };
        for row in indices.rows() {
            let mut v = row.to_vec();
            v.sort();
            v.dedup();
            assert_eq!(v.len(), 49);
            assert!(v.iter().all(|&i| (0..196).contains(&i)));
        }
    }

    #[test]
    fn every_workload_runs_and_verifies_at_a_small_scale() {
        for id in ALL {
            let w = Workload::new(id, 0.002);
            let data = w.make();
            let out = w.run(&data).unwrap();
            assert_eq!(out.len() * 4, w.out_bytes(), "{}", id.name());
            w.verify(&data, &out)
                .unwrap_or_else(|e| panic!("{}: {e}", id.name()));
        }
    }

    #[test]
    fn a_wrong_element_fails_the_check() {
        for id in [
            Id::W3,
            Id::W3s,
            Id::W3b,
            Id::W6,
            Id::W7,
            Id::W6p,
            Id::W8,
            Id::W11a,
            Id::W11b,
        ] {
            let w = Workload::new(id, 0.01);
            let data = w.make();
            let mut out = w.run(&data).unwrap();
            // change every element: whichever positions are sampled, one is wrong
            out.iter_mut().for_each(|v| *v = *v * 2.0 + 0.5);
            assert!(w.verify(&data, &out).is_err(), "{}", id.name());
        }
        let w = Workload::new(Id::W1, 0.01);
        let data = w.make();
        let out = ArrayD::<f32>::zeros(vec![3, 3]);
        assert!(w.verify(&data, &out).unwrap_err().contains("shape"));
    }

    #[test]
    fn select_accepts_short_and_full_names() {
        assert_eq!(select(None).unwrap().len(), 16);
        // W3 is W3 alone, not its select_batched/gather_broadcast variants.
        assert_eq!(select(Some("W3")).unwrap(), vec![Id::W3]);
        assert_eq!(
            select(Some("W3s,W3b_topk_gather_broadcast")).unwrap(),
            vec![Id::W3s, Id::W3b]
        );
        assert_eq!(
            select(Some("w5_dim0_random, W0")).unwrap(),
            vec![Id::W0, Id::W5]
        );
        assert_eq!(select(Some("W11b")).unwrap(), vec![Id::W11b]);
        assert!(select(Some("W1,nope")).unwrap_err().contains("nope"));
    }
}
