//! The CUDA ops against the CPU library. The GPU tests run where `GATHER_CUDA_TESTS=1` says a GPU
//! is there (`scripts/gpu_check.sh` on a lent GPU); elsewhere they check that a missing GPU is an
//! error, not a crash, and that every kernel compiles with NVRTC.

use gather::{Element, Reduce};
use gather_cuda::{Cuda, CudaTensor, Scalar};
use half::{bf16, f16};
use ndarray::{Array, ArrayD, IxDyn};

fn gpu_expected() -> bool {
    std::env::var("GATHER_CUDA_TESTS").is_ok_and(|v| v == "1")
}

/// The GPU, where the environment says there is one; `None` elsewhere.
fn gpu() -> Option<Cuda> {
    if !gpu_expected() {
        return None;
    }
    Some(Cuda::new(0).expect("GATHER_CUDA_TESTS=1 but no usable GPU"))
}

/// Needs NVRTC (no GPU): `.ci/run` installs it from PyPI and sets `GATHER_REQUIRE_NVRTC=1`, so
/// that CI fails if a kernel does not compile. Elsewhere a missing NVRTC is only reported.
#[test]
fn every_kernel_compiles_with_nvrtc() {
    let required = std::env::var("GATHER_REQUIRE_NVRTC").is_ok_and(|v| v == "1") || gpu_expected();
    for arch in ["compute_80", "compute_90"] {
        match gather_cuda::compile_all(arch) {
            Ok(()) => {}
            Err(e) if !required && e.to_string().contains("was not found") => {
                eprintln!("kernels not compiled: {e}");
                return;
            }
            Err(e) => panic!("{arch}: {e}"),
        }
    }
}

#[test]
fn a_missing_gpu_is_an_error_not_a_crash() {
    match Cuda::new(0) {
        Ok(g) => assert!(gpu_expected(), "found {g:?} but GATHER_CUDA_TESTS is not 1"),
        Err(e) => {
            assert!(!gpu_expected(), "GATHER_CUDA_TESTS=1 but: {e}");
            let m = e.to_string();
            assert!(m.starts_with("CUDA: "), "{m}");
            assert!(e.op().is_none());
        }
    }
    assert_eq!(Cuda::is_available(), gpu_expected());
}

/// The number of random cases of a test: `n`, or a sixth of it (at least 2) under
/// `GATHER_CUDA_QUICK=1`, which `scripts/gpu_check.sh` sets for compute-sanitizer (tens of times
/// slower), so that its run covers every listed test within its time.
fn quick() -> bool {
    std::env::var("GATHER_CUDA_QUICK").is_ok_and(|v| v == "1")
}

fn cases(n: usize) -> usize {
    if quick() { (n / 6).max(2) } else { n }
}

// ---- data ----

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 17
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn values<T: Element>(rng: &mut Rng, shape: &[usize], f: impl Fn(i64) -> T) -> ArrayD<T> {
    let n: usize = shape.iter().product();
    let v: Vec<T> = (0..n).map(|_| f(rng.below(2001) as i64 - 1000)).collect();
    Array::from_shape_vec(IxDyn(shape), v).unwrap()
}

fn index(rng: &mut Rng, shape: &[usize], size: usize) -> ArrayD<i64> {
    let n: usize = shape.iter().product();
    Array::from_shape_vec(
        IxDyn(shape),
        (0..n).map(|_| rng.below(size) as i64).collect(),
    )
    .unwrap()
}

fn up<T: Element>(g: &Cuda, a: &ArrayD<T>) -> CudaTensor {
    CudaTensor::from_host(g, a).unwrap()
}

/// An output larger than the device's memory is an op's error, as on the CPU (no panic, no
/// abort), with the sizes, what is free and where memory goes; the device serves calls after it.
#[test]
fn an_output_past_the_devices_memory_is_an_error_with_the_sizes() {
    let Some(g) = gpu() else { return };
    let one = up(&g, &ndarray::arr1(&[1.5f32]).into_dyn());
    // 2^36 views of one element: an output of 256 GiB, past an H200 and the emulator's 80 GiB.
    let huge = one.broadcast(&[1, 1 << 36]).unwrap();
    let ids = up(&g, &ndarray::arr1(&[0i64]).into_dyn());
    let e = gather_cuda::index_select(&huge, 0, &ids).unwrap_err();
    let op = e.op().expect("an op's error, as the CPU library's");
    let message = op.message();
    assert!(
        message.contains(
            "could not allocate 274877906944 bytes (256.0 GiB) of device memory on cuda:0, with "
        ) && message.contains(" free of "),
        "{message}"
    );
    let hint = op.hint().unwrap();
    assert!(
        hint.contains("XLA_PYTHON_CLIENT_PREALLOCATE=false") && !hint.contains("  "),
        "{hint}"
    );
    let back = gather_cuda::index_select(&one, 0, &ids).unwrap();
    assert_eq!(
        back.to_host::<f32>().unwrap(),
        ndarray::arr1(&[1.5f32]).into_dyn()
    );
}

fn close(a: &ArrayD<f64>, b: &ArrayD<f64>, rtol: f64, what: &str) {
    assert_eq!(a.shape(), b.shape(), "{what}");
    for (x, y) in a.iter().zip(b) {
        let ok = (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-6 + rtol * y.abs() || x == y;
        assert!(ok, "{what}: {x} vs {y}");
    }
}

fn as_f64<T: Element>(a: &ArrayD<T>) -> ArrayD<f64> {
    a.mapv(|v| v.to_f64())
}

// ---- gather, index_select, take ----

fn check_gather<T: Element + PartialEq>(g: &Cuda, rng: &mut Rng, f: impl Fn(i64) -> T + Copy) {
    for case in 0..cases(60) {
        let nd = 1 + rng.below(4);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(7)).collect();
        let d = rng.below(nd);
        let ishape: Vec<usize> = (0..nd)
            .map(|a| {
                if a == d {
                    1 + rng.below(9)
                } else {
                    1 + rng.below(shape[a])
                }
            })
            .collect();
        let x = values(rng, &shape, f);
        let i = index(rng, &ishape, shape[d]);
        let want = gather::gather(&x, d as isize, &i).unwrap();
        let got = gather_cuda::gather(&up(g, &x), d as isize, &up(g, &i))
            .unwrap()
            .to_host::<T>()
            .unwrap();
        assert!(
            got == want,
            "case {case}: gather {shape:?} dim {d} index {ishape:?}"
        );
        // The same through transposed views of input and index.
        if nd >= 2 {
            let xt = up(g, &x.t().to_owned())
                .permuted_axes(&(0..nd).rev().collect::<Vec<_>>())
                .unwrap();
            let it = up(g, &i.t().to_owned())
                .permuted_axes(&(0..nd).rev().collect::<Vec<_>>())
                .unwrap();
            let got = gather_cuda::gather(&xt, d as isize, &it)
                .unwrap()
                .to_host::<T>()
                .unwrap();
            assert!(got == want, "case {case}: gather through transposed views");
        }
    }
}

#[test]
fn gather_equals_the_cpu_library_for_every_width() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(1);
    check_gather::<f32>(&g, &mut rng, |v| v as f32 * 0.25);
    check_gather::<i64>(&g, &mut rng, |v| v * 1_000_000_007);
    check_gather::<u8>(&g, &mut rng, |v| v as u8);
    check_gather::<f16>(&g, &mut rng, |v| f16::from_f32(v as f32));
    check_gather::<bool>(&g, &mut rng, |v| v % 3 == 0);
}

#[test]
fn gather_with_an_expanded_index_copies_whole_rows() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(2);
    // W3's shape: patches [b, n, c], indices [b, k] expanded over c.
    for (b, n, c, k) in [(4, 19, 768, 7), (3, 5, 3, 4), (2, 21, 4, 1), (5, 9, 1, 3)] {
        let x = values(&mut rng, &[b, n, c], |v| v as f32);
        let small = index(&mut rng, &[b, k, 1], n);
        let i = small.broadcast(IxDyn(&[b, k, c])).unwrap().to_owned();
        let want = gather::gather(&x, 1, &i).unwrap();
        let iv = up(&g, &small).broadcast(&[b, k, c]).unwrap();
        let got = gather_cuda::gather(&up(&g, &x), 1, &iv)
            .unwrap()
            .to_host::<f32>()
            .unwrap();
        assert_eq!(got, want, "{b}x{n}x{c}, k {k}");
    }
}

#[test]
fn index_select_and_take_equal_the_cpu_library() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(3);
    for case in 0..cases(40) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(9)).collect();
        let d = rng.below(nd);
        let x = values(&mut rng, &shape, |v| v as i32);
        let n_ids = rng.below(12);
        let ids = index(&mut rng, &[n_ids], shape[d]);
        let want = gather::index_select(&x, d as isize, &ids).unwrap();
        let got = gather_cuda::index_select(&up(&g, &x), d as isize, &up(&g, &ids)).unwrap();
        assert_eq!(
            got.to_host::<i32>().unwrap(),
            want,
            "case {case}: index_select"
        );
        let n = x.len() as i64;
        let flat = ids.mapv(|v| (v * 7919) % (2 * n) - n);
        let want = gather::take(&x, &flat).unwrap();
        let got = gather_cuda::take(&up(&g, &x), &up(&g, &flat)).unwrap();
        assert_eq!(got.to_host::<i32>().unwrap(), want, "case {case}: take");
    }
    // int32 and uint8 indices.
    let x = values(&mut rng, &[5, 3], |v| v as f64);
    let want = gather::index_select(&x, 0, &ndarray::arr1(&[4i64, 0, 4]).into_dyn()).unwrap();
    for ids in [
        up(&g, &ndarray::arr1(&[4i32, 0, 4]).into_dyn()),
        up(&g, &ndarray::arr1(&[4u8, 0, 4]).into_dyn()),
    ] {
        let got = gather_cuda::index_select(&up(&g, &x), 0, &ids).unwrap();
        assert_eq!(got.to_host::<f64>().unwrap(), want);
    }
}

/// Gathers large enough that each thread takes several positions (or rows) a grid-stride apart
/// and loops over the grid more than once (the emulator has 4 multiprocessors, so a grid holds
/// at most 32 768 threads), with bad values late in a batch: the smallest bad position is the one
/// reported.
#[test]
fn large_gathers_take_every_batch_of_the_grid_stride_loops() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(31);
    // One element per row (the row kernel, short rows), and a W10-like cube (the element-wise
    // kernel).
    for (shape, ishape, d) in [
        (vec![300, 1000], vec![300, 500], 1),
        (vec![40, 50, 60], vec![40, 50, 60], 1),
        (vec![70, 30, 20], vec![70, 30, 20], 0),
    ] {
        let x = values(&mut rng, &shape, |v| v as f32);
        let mut i = index(&mut rng, &ishape, shape[d]);
        let want = gather::gather(&x, d as isize, &i).unwrap();
        let got = gather_cuda::gather(&up(&g, &x), d as isize, &up(&g, &i)).unwrap();
        assert_eq!(
            got.to_host::<f32>().unwrap(),
            want,
            "gather {shape:?} dim {d}"
        );
        let n = i.len();
        let flat = i.as_slice_mut().unwrap();
        flat[n - 7] = -1;
        flat[n / 2 + 3] = shape[d] as i64;
        let cpu = gather::gather(&x, d as isize, &i).unwrap_err();
        let gpu = gather_cuda::gather(&up(&g, &x), d as isize, &up(&g, &i)).unwrap_err();
        assert_eq!(
            gpu.op().unwrap(),
            &cpu,
            "gather {shape:?} dim {d}, bad values"
        );
    }
    // Rows of 6 words (short: one word per lane of a team of 8) and of 75 words (long).
    for (rows, cols, ids) in [(5000, 24, 20_000), (3000, 300, 6000)] {
        let x = values(&mut rng, &[rows, cols], |v| v as f32);
        let mut i = index(&mut rng, &[ids], rows);
        let want = gather::index_select(&x, 0, &i).unwrap();
        let got = gather_cuda::index_select(&up(&g, &x), 0, &up(&g, &i)).unwrap();
        assert_eq!(
            got.to_host::<f32>().unwrap(),
            want,
            "index_select {rows}x{cols}"
        );
        i[ids - 2] = rows as i64;
        i[ids - 1] = -1;
        let cpu = gather::index_select(&x, 0, &i).unwrap_err();
        let gpu = gather_cuda::index_select(&up(&g, &x), 0, &up(&g, &i)).unwrap_err();
        assert_eq!(
            gpu.op().unwrap(),
            &cpu,
            "index_select {rows}x{cols}, bad values"
        );
    }
    // take, negative positions counting from the end.
    let x = values(&mut rng, &[1000, 300], |v| v as i32);
    let n = x.len() as i64;
    let flat = index(&mut rng, &[200_000], 2 * x.len()).mapv(|v| v - n);
    let want = gather::take(&x, &flat).unwrap();
    let got = gather_cuda::take(&up(&g, &x), &up(&g, &flat)).unwrap();
    assert_eq!(got.to_host::<i32>().unwrap(), want, "take");
}

/// Gathers whose index spans the axes after dim (W5's dim-0 gather of a square matrix) stage
/// tiles of x in shared memory: partial last tiles, more tiles than the grid (the emulator's grid
/// holds 128 blocks of 256), merged axes before and after dim, strided, transposed and expanded
/// views (those that do not merge take the element-wise kernel), every width, i32 indices, slabs
/// past 48 KB, and the first bad position reported. CI runs it with `GATHER_CUDA_TILE` at each
/// of its values.
#[test]
fn gathers_by_tiles_of_shared_memory_equal_the_cpu_library() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(47);
    for (shape, ishape, d) in [
        (vec![300, 70], vec![500, 70], 0),
        (vec![64, 513], vec![64, 513], 0),
        (vec![9, 40, 3, 11], vec![9, 60, 3, 11], 1),
        (vec![50, 20, 33], vec![50, 20, 33], 1),
        (vec![3, 5, 4000], vec![3, 5, 4000], 1),
        (vec![2, 7, 3], vec![2, 7, 9], 2),
        // A slab of 64 KB at every width: past the 48 KB a kernel has without opting in.
        (vec![2048, 40], vec![2048, 40], 0),
    ] {
        let x = values(&mut rng, &shape, |v| v as f32 * 0.5);
        let i = index(&mut rng, &ishape, shape[d]);
        let want = gather::gather(&x, d as isize, &i).unwrap();
        let got = gather_cuda::gather(&up(&g, &x), d as isize, &up(&g, &i)).unwrap();
        assert_eq!(
            got.to_host::<f32>().unwrap(),
            want,
            "gather {shape:?} dim {d} index {ishape:?}"
        );
        // Every width, an i32 index.
        let i32s = i.mapv(|v| v as i32);
        let xb = values(&mut rng, &shape, |v| v as u8);
        let want = gather::gather(&xb, d as isize, &i32s).unwrap();
        let got = gather_cuda::gather(&up(&g, &xb), d as isize, &up(&g, &i32s)).unwrap();
        assert_eq!(got.to_host::<u8>().unwrap(), want, "u8 {shape:?}");
        let xh = values(&mut rng, &shape, |v| f16::from_f32(v as f32));
        let want = gather::gather(&xh, d as isize, &i).unwrap();
        let got = gather_cuda::gather(&up(&g, &xh), d as isize, &up(&g, &i)).unwrap();
        assert_eq!(got.to_host::<f16>().unwrap(), want, "f16 {shape:?}");
        let xd = values(&mut rng, &shape, |v| v * 1_000_000_007);
        let want = gather::gather(&xd, d as isize, &i).unwrap();
        let got = gather_cuda::gather(&up(&g, &xd), d as isize, &up(&g, &i)).unwrap();
        assert_eq!(got.to_host::<i64>().unwrap(), want, "i64 {shape:?}");
        // Transposed views of x and index (the axes after dim strided, not contiguous).
        let nd = shape.len();
        let rev: Vec<usize> = (0..nd).rev().collect();
        let xt = up(&g, &x.t().to_owned()).permuted_axes(&rev).unwrap();
        let it = up(&g, &i.t().to_owned()).permuted_axes(&rev).unwrap();
        let want = gather::gather(&x, d as isize, &i).unwrap();
        let got = gather_cuda::gather(&xt, d as isize, &it).unwrap();
        assert_eq!(
            got.to_host::<f32>().unwrap(),
            want,
            "transposed views {shape:?}"
        );
        // Every other position of the last axis of x (a stride of 2).
        let mut wide = shape.clone();
        wide[nd - 1] *= 2;
        let xw = values(&mut rng, &wide, |v| v as f32);
        let xs = xw
            .slice_axis(ndarray::Axis(nd - 1), ndarray::Slice::new(0, None, 2))
            .to_owned();
        let want = gather::gather(&xs, d as isize, &i).unwrap();
        let xv = up(&g, &xw).slice_axis(nd - 1, 0, wide[nd - 1], 2).unwrap();
        let got = gather_cuda::gather(&xv, d as isize, &up(&g, &i)).unwrap();
        assert_eq!(got.to_host::<f32>().unwrap(), want, "strided x {shape:?}");
        // Bad values: the first in row-major order is reported, though a later one comes first
        // in its tile.
        let mut bad = i.clone();
        let n = bad.len();
        let flat = bad.as_slice_mut().unwrap();
        flat[n - 3] = shape[d] as i64;
        flat[n / 3 + 1] = -(shape[d] as i64) - 1;
        let cpu = gather::gather(&x, d as isize, &bad).unwrap_err();
        let gpu = gather_cuda::gather(&up(&g, &x), d as isize, &up(&g, &bad)).unwrap_err();
        assert_eq!(gpu.op().unwrap(), &cpu, "bad values {shape:?}");
    }
    // An index expanded (stride 0) along an axis after dim, not over all of them (no row copy).
    let x = values(&mut rng, &[40, 30, 8], |v| v as f32);
    let small = index(&mut rng, &[40, 50, 1], 30);
    let i = small.broadcast(IxDyn(&[40, 50, 8])).unwrap().to_owned();
    let mut i2 = i.clone();
    i2.slice_mut(ndarray::s![.., .., 7]).fill(3);
    let want = gather::gather(&x, 1, &i2).unwrap();
    let got = gather_cuda::gather(&up(&g, &x), 1, &up(&g, &i2)).unwrap();
    assert_eq!(
        got.to_host::<f32>().unwrap(),
        want,
        "index with an odd last column"
    );
    let want = gather::gather(&x, 1, &i).unwrap();
    let iv = up(&g, &small).broadcast(&[40, 50, 8]).unwrap();
    let xt = up(&g, &x.view().permuted_axes(IxDyn(&[2, 1, 0])).to_owned())
        .permuted_axes(&[2, 1, 0])
        .unwrap();
    let got = gather_cuda::gather(&xt, 1, &iv).unwrap();
    assert_eq!(
        got.to_host::<f32>().unwrap(),
        want,
        "expanded index, transposed x"
    );
}

#[test]
fn bad_indices_give_the_cpu_librarys_error_and_touch_nothing() {
    let Some(g) = gpu() else { return };
    let x = ndarray::arr2(&[[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]).into_dyn();
    let i = ndarray::arr2(&[[0i64, 1], [3, -1]]).into_dyn();
    let cpu_gather = gather::gather(&x, 1, &i).unwrap_err();
    let gpu = gather_cuda::gather(&up(&g, &x), 1, &up(&g, &i)).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu_gather);

    let ids = ndarray::arr1(&[0i64, 2, 5]).into_dyn();
    let cpu = gather::index_select(&x, 0, &ids).unwrap_err();
    let gpu = gather_cuda::index_select(&up(&g, &x), 0, &up(&g, &ids)).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu);

    let flat = ndarray::arr1(&[0i64, -7, 2]).into_dyn();
    let cpu = gather::take(&x, &flat).unwrap_err();
    let gpu = gather_cuda::take(&up(&g, &x), &up(&g, &flat)).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu);

    let src = ndarray::Array2::<f32>::ones((2, 2)).into_dyn();
    let cpu = gather::scatter_add(&x, 1, &i, &src).unwrap_err();
    let input = up(&g, &x);
    let gpu = gather_cuda::scatter_add(&input, 1, &up(&g, &i), &up(&g, &src)).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu);
    assert_eq!(input.to_host::<f32>().unwrap(), x, "the input is unchanged");

    // A failing call leaves no trace in the flag: the next good call succeeds, every time.
    let good = ndarray::arr2(&[[0i64, 2], [1, 0]]).into_dyn();
    for _ in 0..3 {
        let bad = gather_cuda::gather(&up(&g, &x), 1, &up(&g, &i));
        assert_eq!(bad.unwrap_err().op().unwrap(), &cpu_gather);
        let got = gather_cuda::gather(&up(&g, &x), 1, &up(&g, &good)).unwrap();
        assert_eq!(
            got.to_host::<f32>().unwrap(),
            gather::gather(&x, 1, &good).unwrap()
        );
    }

    // Shape errors are the CPU library's too.
    let short = ndarray::arr1(&[0i64]).into_dyn();
    let cpu = gather::gather(&x, 1, &short).unwrap_err();
    let gpu = gather_cuda::gather(&up(&g, &x), 1, &up(&g, &short)).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu);
}

#[test]
fn take_along_dim_and_put_equal_the_cpu_library() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(11);
    for case in 0..cases(40) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(6)).collect();
        let d = rng.below(nd);
        let x = values(&mut rng, &shape, |v| v as f32);
        // The index broadcasts against the input: size 1 on some other axes, any length on d,
        // values beyond the dim in both directions (take_along_dim maps them modulo).
        let ishape: Vec<usize> = (0..nd)
            .map(|a| match (a == d, rng.below(3)) {
                (true, _) => 1 + rng.below(5),
                (false, 0) => 1,
                _ => shape[a],
            })
            .collect();
        let n = shape[d] as i64;
        let idx = index(&mut rng, &ishape, 4 * shape[d]).mapv(|v| v - 2 * n);
        let want = gather::take_along_dim(&x, &idx, Some(d as isize)).unwrap();
        let got = gather_cuda::take_along_dim(&up(&g, &x), &up(&g, &idx), Some(d as isize));
        assert_eq!(got.unwrap().to_host::<f32>().unwrap(), want, "case {case}");
        let m = 1 + rng.below(7);
        let flat = index(&mut rng, &[m], x.len());
        let want = gather::take_along_dim(&x, &flat, None).unwrap();
        let got = gather_cuda::take_along_dim(&up(&g, &x), &up(&g, &flat), None).unwrap();
        assert_eq!(got.to_host::<f32>().unwrap(), want, "case {case}: no dim");

        // put: duplicates and negative positions, plain and accumulated (f16 rounds once).
        let k = 1 + rng.below(10);
        let total = x.len() as i64;
        let pos = index(&mut rng, &[k], 2 * x.len()).mapv(|v| v - total);
        let src = values(&mut rng, &[k], |v| v as f32 / 8.0);
        for accumulate in [false, true] {
            let want = gather::put(&x, &pos, &src, accumulate).unwrap();
            let got = gather_cuda::put(&up(&g, &x), &up(&g, &pos), &up(&g, &src), accumulate);
            assert_eq!(got.unwrap().to_host::<f32>().unwrap(), want, "case {case}");
            let (xh, sh) = (x.mapv(f16::from_f32), src.mapv(f16::from_f32));
            let want = gather::put(&xh, &pos, &sh, accumulate).unwrap();
            let got = gather_cuda::put(&up(&g, &xh), &up(&g, &pos), &up(&g, &sh), accumulate);
            assert_eq!(
                got.unwrap().to_host::<f16>().unwrap(),
                want,
                "case {case}: f16"
            );
        }
    }
    // A transposed input is flattened in its logical order.
    let x = values(&mut rng, &[3, 4], |v| v as i32);
    let xt = up(&g, &x).permuted_axes(&[1, 0]).unwrap();
    let pos = ndarray::arr1(&[1i64, 11, -1, 5]).into_dyn();
    let src = ndarray::arr1(&[7, 8, 9, 10]).into_dyn();
    let want = gather::put(&x.t(), &pos, &src, true).unwrap();
    let got = gather_cuda::put(&xt, &up(&g, &pos), &up(&g, &src), true).unwrap();
    assert_eq!(got.to_host::<i32>().unwrap(), want);
    // Without a dim, negative positions are errors (PyTorch's gather on the flattening).
    let e = gather_cuda::take_along_dim(&xt, &up(&g, &pos), None).unwrap_err();
    assert_eq!(
        e.to_string(),
        gather::take_along_dim(&x.t(), &pos, None)
            .unwrap_err()
            .to_string()
    );
    let pos = ndarray::arr1(&[1i64, 11, 0, 5]).into_dyn();
    let want = gather::take_along_dim(&x.t(), &pos, None).unwrap();
    let got = gather_cuda::take_along_dim(&xt, &up(&g, &pos), None).unwrap();
    assert_eq!(got.to_host::<i32>().unwrap(), want);

    // Errors: the CPU library's, and an input that stays as it was.
    let x = ndarray::arr2(&[[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]).into_dyn();
    let bad = ndarray::arr1(&[0i64, 6, 2]).into_dyn();
    let cpu = gather::take_along_dim(&x, &bad, None).unwrap_err();
    let gpu = gather_cuda::take_along_dim(&up(&g, &x), &up(&g, &bad), None).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu);
    // The gradient's error for a bad flat value: the forward's words, under the gradient's name
    // (no dim rejects negative values, unlike take).
    let gl = ndarray::arr1(&[1.0f32, 1.0, 1.0]).into_dyn();
    for v in [6i64, -1] {
        let bad = ndarray::arr1(&[0i64, v, 2]).into_dyn();
        let cpu = gather::grad::take_along_dim(&gl, IxDyn(&[2, 3]), &bad, None).unwrap_err();
        let gpu = gather_cuda::grad::take_along_dim(&up(&g, &gl), &[2, 3], &up(&g, &bad), None)
            .unwrap_err();
        assert_eq!(gpu.op().unwrap(), &cpu);
        let want = format!("grad::take_along_dim: index {v} is out of bounds for dimension 0");
        assert!(cpu.message().starts_with(&want), "{cpu}");
    }
    let wide = ndarray::Array2::<i64>::zeros((3, 1)).into_dyn();
    let cpu = gather::take_along_dim(&x, &wide, Some(1)).unwrap_err();
    let gpu = gather_cuda::take_along_dim(&up(&g, &x), &up(&g, &wide), Some(1)).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu);
    let src = ndarray::arr1(&[1.0f32, 2.0, 3.0]).into_dyn();
    let input = up(&g, &x);
    let far = ndarray::arr1(&[0i64, -7, 2]).into_dyn();
    let cpu = gather::put(&x, &far, &src, true).unwrap_err();
    let gpu = gather_cuda::put(&input, &up(&g, &far), &up(&g, &src), true).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu);
    assert_eq!(input.to_host::<f32>().unwrap(), x, "the input is unchanged");
    let short = ndarray::arr1(&[1.0f32]).into_dyn();
    let cpu = gather::put(&x, &bad, &short, false).unwrap_err();
    let gpu = gather_cuda::put(&input, &up(&g, &bad), &up(&g, &short), false).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu);
}

#[test]
fn masked_select_and_scatter_equal_the_cpu_library() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(13);
    for case in 0..cases(40) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(6)).collect();
        // Input and mask broadcast against each other: either may have size 1 on an axis.
        let (mut xs, mut ms) = (shape.clone(), shape.clone());
        for a in 0..nd {
            match rng.below(4) {
                0 => xs[a] = 1,
                1 => ms[a] = 1,
                _ => {}
            }
        }
        let x = values(&mut rng, &xs, |v| v as f64);
        let m = values(&mut rng, &ms, |v| v % 3 == 0);
        let want = gather::masked_select(&x, &m).unwrap().into_dyn();
        let got = gather_cuda::masked_select(&up(&g, &x), &up(&g, &m)).unwrap();
        assert_eq!(got.to_host::<f64>().unwrap(), want, "case {case}");
        let ones = want.len();
        let extra = rng.below(3);
        let src = values(&mut rng, &[ones + extra], |v| v as f64);
        let want = gather::masked_scatter(&x, &m, &src).unwrap();
        let got = gather_cuda::masked_scatter(&up(&g, &x), &up(&g, &m), &up(&g, &src)).unwrap();
        assert_eq!(got.to_host::<f64>().unwrap(), want, "case {case}: scatter");
        // Every width: the same positions, moved as bytes.
        let xb = x.mapv(|v| v as i8);
        let want = gather::masked_select(&xb, &m).unwrap().into_dyn();
        let got = gather_cuda::masked_select(&up(&g, &xb), &up(&g, &m)).unwrap();
        assert_eq!(got.to_host::<i8>().unwrap(), want, "case {case}: i8");
        let xh = x.mapv(bf16::from_f64);
        let sh = src.mapv(bf16::from_f64);
        let want = gather::masked_scatter(&xh, &m, &sh).unwrap();
        let got = gather_cuda::masked_scatter(&up(&g, &xh), &up(&g, &m), &up(&g, &sh)).unwrap();
        assert_eq!(got.to_host::<bf16>().unwrap(), want, "case {case}: bf16");
    }
    // A transposed source is read in its logical order.
    let x = ndarray::Array2::<i32>::zeros((2, 3)).into_dyn();
    let m = ndarray::arr2(&[[true, false, true], [true, true, false]]).into_dyn();
    let s = values(&mut rng, &[2, 2], |v| v as i32);
    let want = gather::masked_scatter(&x, &m, &s.t()).unwrap();
    let st = up(&g, &s).permuted_axes(&[1, 0]).unwrap();
    let got = gather_cuda::masked_scatter(&up(&g, &x), &up(&g, &m), &st).unwrap();
    assert_eq!(got.to_host::<i32>().unwrap(), want);
    // Errors: the CPU library's.
    let short = ndarray::arr1(&[1i32, 2]).into_dyn();
    let cpu = gather::masked_scatter(&x, &m, &short).unwrap_err();
    let gpu = gather_cuda::masked_scatter(&up(&g, &x), &up(&g, &m), &up(&g, &short)).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu);
    let wide = ndarray::arr1(&[true, false]).into_dyn();
    let cpu = gather::masked_select(&x, &wide).unwrap_err();
    let gpu = gather_cuda::masked_select(&up(&g, &x), &up(&g, &wide)).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu);
    let bytes = ndarray::arr1(&[1u8, 0, 1]).into_dyn();
    let e = gather_cuda::masked_select(&up(&g, &x), &up(&g, &bytes)).unwrap_err();
    assert_eq!(e.op().unwrap().kind(), gather::ErrorKind::InvalidArgument);
}

#[test]
fn repeat_interleave_equals_the_cpu_library_in_every_form() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(17);
    for case in 0..cases(40) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(5)).collect();
        let d = rng.below(nd);
        let x = values(&mut rng, &shape, |v| v as i16);
        let counts = index(&mut rng, &[shape[d]], 4);
        let want = gather::repeat_interleave(&x, &counts, Some(d as isize), None).unwrap();
        let got =
            gather_cuda::repeat_interleave(&up(&g, &x), &up(&g, &counts), Some(d as isize), None);
        assert_eq!(got.unwrap().to_host::<i16>().unwrap(), want, "case {case}");
        let flat_counts = index(&mut rng, &[x.len()], 3);
        let want = gather::repeat_interleave(&x, &flat_counts, None, None).unwrap();
        let got = gather_cuda::repeat_interleave(&up(&g, &x), &up(&g, &flat_counts), None, None);
        assert_eq!(
            got.unwrap().to_host::<i16>().unwrap(),
            want,
            "case {case}: no dim"
        );
        let r = rng.below(4);
        let want = gather::ops::repeat::repeat_interleave_scalar(&x, r, Some(d as isize), None);
        let got = gather_cuda::repeat_interleave_scalar(&up(&g, &x), r, Some(d as isize), None);
        assert_eq!(
            got.unwrap().to_host::<i16>().unwrap(),
            want.unwrap(),
            "case {case}: scalar"
        );
        let want = gather::ops::repeat::repeat_interleave_repeats(&counts, None).unwrap();
        let got = gather_cuda::repeat_interleave_repeats(&up(&g, &counts), None).unwrap();
        assert_eq!(
            got.to_host::<i64>().unwrap(),
            want.into_dyn(),
            "case {case}: positions"
        );
    }
    // int32 repeats give int32 positions; a 0-d count applies to every slice.
    let r32 = ndarray::arr1(&[2i32, 0, 1]).into_dyn();
    let got = gather_cuda::repeat_interleave_repeats(&up(&g, &r32), Some(3)).unwrap();
    assert_eq!(
        got.to_host::<i32>().unwrap(),
        ndarray::arr1(&[0, 0, 2]).into_dyn()
    );
    // So do the narrow dtypes (as PyTorch), and positions past the dtype are an error.
    let r8 = ndarray::arr1(&[2u8, 0, 1]).into_dyn();
    let got = gather_cuda::repeat_interleave_repeats(&up(&g, &r8), None).unwrap();
    assert_eq!(
        got.to_host::<u8>().unwrap(),
        ndarray::arr1(&[0u8, 0, 2]).into_dyn()
    );
    let long = ndarray::Array1::<i8>::from_elem(200, 1).into_dyn();
    let e = gather_cuda::repeat_interleave_repeats(&up(&g, &long), None).unwrap_err();
    assert!(e.to_string().contains("int8"), "{e}");
    let x = ndarray::arr2(&[[1.0f32, 2.0], [3.0, 4.0]]).into_dyn();
    let one = ndarray::arr0(3i64).into_dyn();
    let want = gather::repeat_interleave(&x, &one, Some(1), None).unwrap();
    let got = gather_cuda::repeat_interleave(&up(&g, &x), &up(&g, &one), Some(1), None).unwrap();
    assert_eq!(got.to_host::<f32>().unwrap(), want);
    // Errors: the CPU library's.
    for (counts, dim, size) in [
        (ndarray::arr1(&[1i64, -1]).into_dyn(), Some(0), None),
        (ndarray::arr1(&[1i64, 2, 3]).into_dyn(), Some(0), None),
        (ndarray::arr1(&[1i64, 2]).into_dyn(), Some(1), Some(4)),
        (
            ndarray::Array2::<i64>::ones((2, 2)).into_dyn(),
            Some(0),
            None,
        ),
    ] {
        let cpu = gather::repeat_interleave(&x, &counts, dim, size).unwrap_err();
        let gpu = gather_cuda::repeat_interleave(&up(&g, &x), &up(&g, &counts), dim, size);
        assert_eq!(gpu.unwrap_err().op().unwrap(), &cpu, "{counts:?}");
    }
}

fn check_sorts<T: Element + PartialEq>(g: &Cuda, rng: &mut Rng, f: impl Fn(i64) -> T + Copy) {
    for case in 0..cases(30) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(9)).collect();
        let d = rng.below(nd) as isize;
        // Few distinct values, so that ties are common and their order is checked.
        let x = values(rng, &shape, |v| f(v % 5));
        let gx = up(g, &x);
        for flip in [false, true] {
            let (v, i) = gather::sort(&x, d, flip, false).unwrap();
            let (gv, gi) = gather_cuda::sort(&gx, d, flip, false).unwrap();
            assert_eq!(gi.to_host::<i64>().unwrap(), i, "case {case}: sort indices");
            assert_eq!(
                as_f64(&gv.to_host::<T>().unwrap()),
                as_f64(&v),
                "case {case}"
            );
            let a = gather::argsort(&x, d, flip, true).unwrap();
            let ga = gather_cuda::argsort(&gx, d, flip, true).unwrap();
            assert_eq!(ga.to_host::<i64>().unwrap(), a, "case {case}: argsort");
            if T::DTYPE != gather::DType::Bool {
                let k = rng.below(shape[d as usize] + 1);
                let (v, i) = gather::topk(&x, k, d, flip, true).unwrap();
                let (gv, gi) = gather_cuda::topk(&gx, k, d, flip, true).unwrap();
                assert_eq!(gi.to_host::<i64>().unwrap(), i, "case {case}: topk k={k}");
                assert_eq!(
                    as_f64(&gv.to_host::<T>().unwrap()),
                    as_f64(&v),
                    "case {case}"
                );
            }
        }
    }
}

#[test]
fn sort_argsort_and_topk_equal_the_cpu_library_for_every_dtype() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(19);
    check_sorts(&g, &mut rng, |v| v as f32);
    check_sorts(&g, &mut rng, |v| v as f64);
    check_sorts(&g, &mut rng, |v| f16::from_f32(v as f32));
    check_sorts(&g, &mut rng, |v| bf16::from_f32(v as f32));
    check_sorts(&g, &mut rng, |v| v as i8);
    check_sorts(&g, &mut rng, |v| v as i16);
    check_sorts(&g, &mut rng, |v| v as i32);
    check_sorts(&g, &mut rng, |v| v);
    check_sorts(&g, &mut rng, |v| v as u8);
    check_sorts(&g, &mut rng, |v| v as u16);
    check_sorts(&g, &mut rng, |v| v as u32);
    check_sorts(&g, &mut rng, |v| v as u64);
    check_sorts(&g, &mut rng, |v| v > 0);
    // NaN is the largest, -0.0 equals 0.0, infinities at the ends; a transposed input; 0-d.
    let x = ndarray::arr2(&[
        [3.0f32, f32::NAN, 1.0, 3.0],
        [0.0, 5.0, -0.0, f32::NEG_INFINITY],
    ])
    .into_dyn();
    for gx in [
        up(&g, &x),
        up(&g, &x.t().to_owned()).permuted_axes(&[1, 0]).unwrap(),
    ] {
        for flip in [false, true] {
            let (v, i) = gather::sort(&x, 1, flip, true).unwrap();
            let (gv, gi) = gather_cuda::sort(&gx, 1, flip, true).unwrap();
            assert_eq!(gi.to_host::<i64>().unwrap(), i);
            close(
                &as_f64(&gv.to_host::<f32>().unwrap()),
                &as_f64(&v),
                0.0,
                "specials",
            );
            let (_, i) = gather::topk(&x, 2, 1, flip, true).unwrap();
            let (_, gi) = gather_cuda::topk(&gx, 2, 1, flip, true).unwrap();
            assert_eq!(gi.to_host::<i64>().unwrap(), i);
        }
    }
    let s = ndarray::arr0(7i32).into_dyn();
    let (v, i) = gather_cuda::topk(&up(&g, &s), 0, 0, true, true).unwrap();
    assert_eq!(
        (v.shape(), i.to_host::<i64>().unwrap()),
        (&[][..], ndarray::arr0(0i64).into_dyn())
    );
    // Errors: the CPU library's.
    let cpu = gather::topk(&x, 5, 1, true, true).unwrap_err();
    let gpu = gather_cuda::topk(&up(&g, &x), 5, 1, true, true).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu);
    let b = ndarray::arr1(&[true, false]).into_dyn();
    let cpu = gather::topk(&b, 1, 0, true, true).unwrap_err();
    let gpu = gather_cuda::topk(&up(&g, &b), 1, 0, true, true).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu);
}

#[test]
fn select_batched_equals_the_cpu_library() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(23);
    for case in 0..cases(40) {
        let nd = 1 + rng.below(4);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(5)).collect();
        let axis = rng.below(nd);
        let batch_dims = rng.below(axis + 1);
        let mut ishape = shape[..batch_dims].to_vec();
        for _ in 0..rng.below(3) {
            ishape.push(1 + rng.below(4));
        }
        let x = values(&mut rng, &shape, |v| v as f32);
        let idx = index(&mut rng, &ishape, shape[axis]);
        let want = gather::select_batched(&x, axis as isize, &idx, batch_dims).unwrap();
        let got =
            gather_cuda::select_batched(&up(&g, &x), axis as isize, &up(&g, &idx), batch_dims);
        assert_eq!(got.unwrap().to_host::<f32>().unwrap(), want, "case {case}");
    }
    let x = values(&mut rng, &[2, 3, 2], |v| v as f32);
    let bad = ndarray::arr2(&[[0i64, 2], [3, 1]]).into_dyn();
    let cpu = gather::select_batched(&x, 1, &bad, 1).unwrap_err();
    let gpu = gather_cuda::select_batched(&up(&g, &x), 1, &up(&g, &bad), 1).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu);
}

// ---- the scatter family ----

const REDUCES: [Reduce; 5] = [
    Reduce::Sum,
    Reduce::Prod,
    Reduce::Mean,
    Reduce::Amax,
    Reduce::Amin,
];

fn check_scatter<T: Element>(g: &Cuda, rng: &mut Rng, f: impl Fn(i64) -> T + Copy, exact: bool) {
    for case in 0..cases(40) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(6)).collect();
        let d = rng.below(nd);
        let ishape: Vec<usize> = (0..nd)
            .map(|a| {
                if a == d {
                    1 + rng.below(12)
                } else {
                    1 + rng.below(shape[a])
                }
            })
            .collect();
        let x = values(rng, &shape, f);
        let src = values(rng, &ishape, f);
        // Half the cases repeat the index along the last axis (a stride-0 lane axis).
        let lanes = case % 2 == 1 && nd >= 2 && d != nd - 1;
        let (i, iv) = if lanes {
            let mut s = ishape.clone();
            s[nd - 1] = 1;
            let small = index(rng, &s, shape[d]);
            let full = small.broadcast(IxDyn(&ishape)).unwrap().to_owned();
            let v = up(g, &small).broadcast(&ishape).unwrap();
            (full, v)
        } else {
            let i = index(rng, &ishape, shape[d]);
            let v = up(g, &i);
            (i, v)
        };
        let (xg, sg) = (up(g, &x), up(g, &src));
        let what = format!(
            "case {case}: {} {shape:?} dim {d} index {ishape:?} lanes {lanes}",
            T::DTYPE
        );
        check_scatter_reduces((&x, &i, &src), (&xg, &iv, &sg), d, exact, &what);
        let want = gather::scatter_add(&x, d as isize, &i, &src).unwrap();
        let got = gather_cuda::scatter_add(&xg, d as isize, &iv, &sg)
            .unwrap()
            .to_host::<T>()
            .unwrap();
        close(
            &as_f64(&got),
            &as_f64(&want),
            if exact { 0.0 } else { 1e-2 },
            &format!("{what}: scatter_add"),
        );
    }
}

/// `scatter` bit for bit and every reduction, with and without self, against the CPU library:
/// integers and amax/amin exactly, float sums, products and means within 1e-2.
fn check_scatter_reduces<T: Element>(
    (x, i, src): (&ArrayD<T>, &ArrayD<i64>, &ArrayD<T>),
    (xg, iv, sg): (&CudaTensor, &CudaTensor, &CudaTensor),
    d: usize,
    exact: bool,
    what: &str,
) {
    let dim = d as isize;
    let want = gather::scatter(x, dim, i, src).unwrap();
    let got = gather_cuda::scatter(xg, dim, iv, sg)
        .unwrap()
        .to_host::<T>()
        .unwrap();
    assert!(as_f64(&got) == as_f64(&want), "{what}: scatter");
    for r in REDUCES {
        for include_self in [true, false] {
            let want = gather::scatter_reduce(x, dim, i, src, r, include_self).unwrap();
            let got = gather_cuda::scatter_reduce(xg, dim, iv, sg, r, include_self)
                .unwrap()
                .to_host::<T>()
                .unwrap();
            let tol = if exact || matches!(r, Reduce::Amax | Reduce::Amin) {
                0.0
            } else {
                1e-2
            };
            close(
                &as_f64(&got),
                &as_f64(&want),
                tol,
                &format!("{what}: {r:?} include_self {include_self}"),
            );
        }
    }
}

#[test]
fn scatter_family_equals_the_cpu_library_for_every_dtype() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(4);
    check_scatter::<f32>(&g, &mut rng, |v| v as f32 / 64.0, false);
    check_scatter::<f64>(&g, &mut rng, |v| v as f64 / 64.0, false);
    check_scatter::<f16>(&g, &mut rng, |v| f16::from_f32(v as f32 / 256.0), false);
    check_scatter::<bf16>(&g, &mut rng, |v| bf16::from_f32(v as f32 / 256.0), false);
    check_scatter::<i64>(&g, &mut rng, |v| v * 123_456_789, true);
    check_scatter::<i32>(&g, &mut rng, |v| v as i32, true);
    check_scatter::<i8>(&g, &mut rng, |v| v as i8, true);
    check_scatter::<u8>(&g, &mut rng, |v| v as u8, true);
    check_scatter::<u64>(&g, &mut rng, |v| v as u64, true);
}

/// Fibers longer than one block sorts (2048 positions along dim) take the global radix sort.
fn check_long_fibers<T: Element>(
    g: &Cuda,
    rng: &mut Rng,
    f: impl Fn(i64) -> T + Copy,
    exact: bool,
) {
    for (m, cols, targets, lanes) in [
        (3000usize, 3usize, 37usize, false),
        (5000, 40, 300, true),
        (2049, 1, 2, false),
        // More targets than the emulator's grid has warps (1024): each warp of the row kernel
        // (rows of 16 to 128 lanes) folds several runs, some empty, then some of 32 rows and
        // more.
        (12_000, 16, 3000, true),
        (36_000, 16, 1100, true),
    ] {
        let x = values(rng, &[targets, cols], f);
        let src = values(rng, &[m, cols], f);
        let (i, iv) = if lanes {
            let small = index(rng, &[m, 1], targets);
            let full = small.broadcast(IxDyn(&[m, cols])).unwrap().to_owned();
            (full, up(g, &small).broadcast(&[m, cols]).unwrap())
        } else {
            let i = index(rng, &[m, cols], targets);
            let v = up(g, &i);
            (i, v)
        };
        let (xg, sg) = (up(g, &x), up(g, &src));
        let what = format!(
            "{} m {m} cols {cols} targets {targets} lanes {lanes}",
            T::DTYPE
        );
        check_scatter_reduces((&x, &i, &src), (&xg, &iv, &sg), 0, exact, &what);
    }
}

/// Runs at each limit of the counting sort (a warp orders up to 32 and 128 rows, a block up to
/// 4096; a longer run sends the call to the radix sort), and a key space too large for it. Float
/// sums must be bitwise the CPU's: both fold each target in index order.
#[test]
fn scatter_runs_at_the_counting_sorts_limits_equal_the_cpu_library() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(21);
    for run in [1usize, 2, 31, 32, 33, 127, 128, 129, 4095, 4096, 4097] {
        // Target 1 takes `run` rows and 200 others share the rest of 5000 (more than one
        // block's fiber, so the sorted path runs), all in shuffled index order.
        let mut idx = vec![1i64; run];
        idx.extend((run..5000).map(|_| 2 + rng.below(200) as i64));
        for k in (1..idx.len()).rev() {
            idx.swap(k, rng.below(k + 1));
        }
        // 100 columns: the row kernel's two chunks of 64 (a partial one among them).
        let (m, c) = (idx.len(), 100);
        let small = ArrayD::from_shape_vec(IxDyn(&[m, 1]), idx).unwrap();
        let i = small.broadcast(IxDyn(&[m, c])).unwrap().to_owned();
        let iv = up(&g, &small).broadcast(&[m, c]).unwrap();
        // Magnitudes from 1e-3 to 1e5, so that a sum's bits depend on its order.
        let f = |v: i64| v as f32 / 3.0 * 10f32.powi(v.rem_euclid(7) as i32 - 3);
        let x = values(&mut rng, &[202, c], f);
        let src = values(&mut rng, &[m, c], f);
        let (xg, sg) = (up(&g, &x), up(&g, &src));
        check_scatter_reduces(
            (&x, &i, &src),
            (&xg, &iv, &sg),
            0,
            true,
            &format!("run {run}"),
        );
    }
    // 20000 targets for 3000 rows: too many keys for the counting sort.
    let x = values(&mut rng, &[20_000], |v| v as f32 / 8.0);
    let i = index(&mut rng, &[3000], 20_000);
    let src = values(&mut rng, &[3000], |v| v as f32 / 8.0);
    let (xg, iv, sg) = (up(&g, &x), up(&g, &i), up(&g, &src));
    check_scatter_reduces((&x, &i, &src), (&xg, &iv, &sg), 0, true, "20000 keys");
}

#[test]
fn long_fibers_take_the_radix_sort_and_equal_the_cpu_library() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(8);
    check_long_fibers::<f32>(&g, &mut rng, |v| v as f32 / 512.0, false);
    check_long_fibers::<i32>(&g, &mut rng, |v| v as i32, true);
    check_long_fibers::<u8>(&g, &mut rng, |v| v as u8, true);
    check_long_fibers::<bf16>(&g, &mut rng, |v| bf16::from_f32(v as f32 / 512.0), false);
}

/// Fibers (the index's positions along dim at one coordinate of the other axes) of every length
/// the block sort takes, up to 2048: its stages by shuffles, within one thread and through shared
/// memory all run. Float sums are bitwise the CPU library's, which folds each target's
/// contributions in index order, on values whose sums depend on that order.
#[test]
fn scatters_along_fibers_of_every_block_sort_length_equal_the_cpu_library() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(32);
    let bits = |a: &ArrayD<f32>| a.mapv(f32::to_bits);
    for m in [2usize, 17, 33, 64, 100, 255, 256, 500, 1024, 1500, 2048] {
        for d in [0usize, 1] {
            let (targets, fibers) = (m / 3 + 1, 3);
            let (xs, is) = if d == 0 {
                ([targets, fibers], [m, fibers])
            } else {
                ([fibers, targets], [fibers, m])
            };
            let x = values(&mut rng, &xs, |v| (v as f32 / 7.0).powi(3));
            let src = values(&mut rng, &is, |v| (v as f32 / 7.0).powi(3));
            let i = index(&mut rng, &is, targets);
            let (xg, ig, sg) = (up(&g, &x), up(&g, &i), up(&g, &src));
            let dim = d as isize;
            let want = gather::scatter(&x, dim, &i, &src).unwrap();
            let got = gather_cuda::scatter(&xg, dim, &ig, &sg).unwrap();
            let got = got.to_host::<f32>().unwrap();
            assert_eq!(bits(&got), bits(&want), "scatter, m {m} dim {d}");
            for r in [Reduce::Sum, Reduce::Mean, Reduce::Amax] {
                for include_self in [true, false] {
                    let want = gather::scatter_reduce(&x, dim, &i, &src, r, include_self).unwrap();
                    let got = gather_cuda::scatter_reduce(&xg, dim, &ig, &sg, r, include_self);
                    let got = got.unwrap().to_host::<f32>().unwrap();
                    let what = format!("{r:?} include_self {include_self}, m {m} dim {d}");
                    assert_eq!(bits(&got), bits(&want), "{what}");
                }
            }
        }
    }
}

#[test]
fn amax_and_amin_keep_the_cpu_librarys_bits_on_ties_zeros_and_nans() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(9);
    // Long fibers (the atomic path) and short ones (the block sort), with many ties.
    for m in [3000usize, 40] {
        let pool = [
            0.0f32,
            -0.0,
            1.0,
            -1.0,
            f32::from_bits(0x7fc0_0001),
            f32::from_bits(0xffc0_0002),
            2.0,
        ];
        let pick = |rng: &mut Rng, n: usize| -> Vec<f32> {
            (0..n).map(|_| pool[rng.below(pool.len())]).collect()
        };
        let x = ArrayD::from_shape_vec(IxDyn(&[5, 3]), pick(&mut rng, 15)).unwrap();
        let src = ArrayD::from_shape_vec(IxDyn(&[m, 3]), pick(&mut rng, m * 3)).unwrap();
        let i = index(&mut rng, &[m, 3], 5);
        for r in [Reduce::Amax, Reduce::Amin] {
            for inc in [true, false] {
                let want = gather::scatter_reduce(&x, 0, &i, &src, r, inc).unwrap();
                let got =
                    gather_cuda::scatter_reduce(&up(&g, &x), 0, &up(&g, &i), &up(&g, &src), r, inc)
                        .unwrap()
                        .to_host::<f32>()
                        .unwrap();
                let bits = |a: &ArrayD<f32>| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "m {m} {r:?} include_self {inc}");
            }
        }
        // Integer extremes: i32::MAX and MIN order correctly.
        let xi = ArrayD::from_shape_vec(IxDyn(&[5, 3]), vec![0i32; 15]).unwrap();
        let si = src.mapv(|v| {
            if v.is_nan() {
                i32::MAX
            } else if v == 1.0 {
                i32::MIN
            } else {
                v as i32
            }
        });
        for r in [Reduce::Amax, Reduce::Amin] {
            let want = gather::scatter_reduce(&xi, 0, &i, &si, r, false).unwrap();
            let got =
                gather_cuda::scatter_reduce(&up(&g, &xi), 0, &up(&g, &i), &up(&g, &si), r, false)
                    .unwrap();
            assert_eq!(got.to_host::<i32>().unwrap(), want, "m {m} {r:?} i32");
        }
    }
}

#[test]
fn scatter_reduce_propagates_nan_and_keeps_untouched_targets() {
    let Some(g) = gpu() else { return };
    let x = ndarray::arr1(&[1.0f32, 2.0, 3.0]).into_dyn();
    let i = ndarray::arr1(&[0i64, 0, 2]).into_dyn();
    let s = ndarray::arr1(&[f32::NAN, 5.0, -1.0]).into_dyn();
    for r in REDUCES {
        for inc in [true, false] {
            let want = gather::scatter_reduce(&x, 0, &i, &s, r, inc).unwrap();
            let got = gather_cuda::scatter_reduce(&up(&g, &x), 0, &up(&g, &i), &up(&g, &s), r, inc)
                .unwrap();
            close(
                &as_f64(&got.to_host::<f32>().unwrap()),
                &as_f64(&want),
                1e-6,
                &format!("{r:?} {inc}"),
            );
        }
    }
}

#[test]
fn scatter_add_is_bitwise_repeatable() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(5);
    let (rows, cols, targets) = (200_000, 64, 1000);
    let src = values(&mut rng, &[rows, cols], |v| v as f32 * 1e-3 + 0.1);
    let ids = index(&mut rng, &[rows, 1], targets);
    let dst = ndarray::ArrayD::<f32>::zeros(IxDyn(&[targets, cols]));
    let iv = up(&g, &ids).broadcast(&[rows, cols]).unwrap();
    let (dg, sg) = (up(&g, &dst), up(&g, &src));
    let a = gather_cuda::scatter_add(&dg, 0, &iv, &sg)
        .unwrap()
        .to_host::<f32>()
        .unwrap();
    for _ in 0..3 {
        let b = gather_cuda::scatter_add(&dg, 0, &iv, &sg)
            .unwrap()
            .to_host::<f32>()
            .unwrap();
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
    }
    let full = ids.broadcast(IxDyn(&[rows, cols])).unwrap().to_owned();
    let want = gather::scatter_add(&dst, 0, &full, &src).unwrap();
    close(&as_f64(&a), &as_f64(&want), 1e-4, "W6-like scatter_add");
}

#[test]
fn index_add_with_alpha_equals_the_cpu_library() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(6);
    let x = values(&mut rng, &[6, 5], |v| v);
    let s = values(&mut rng, &[4, 5], |v| v);
    let ids = ndarray::arr1(&[5i64, 0, 5, 2]).into_dyn();
    let want = gather::index_add(&x, 0, &ids, &s, 3i64).unwrap();
    let got =
        gather_cuda::index_add(&up(&g, &x), 0, &up(&g, &ids), &up(&g, &s), Scalar::Int(3)).unwrap();
    assert_eq!(got.to_host::<i64>().unwrap(), want);
    let s1 = values(&mut rng, &[6, 4], |v| v);
    let want = gather::index_add(&x, 1, &ids.mapv(|v| v % 5), &s1, 1i64).unwrap();
    let got = gather_cuda::index_add(
        &up(&g, &x),
        1,
        &up(&g, &ids.mapv(|v| v % 5)),
        &up(&g, &s1),
        Scalar::Int(1),
    )
    .unwrap();
    assert_eq!(got.to_host::<i64>().unwrap(), want);
}

#[test]
fn index_copy_fill_and_reduce_equal_the_cpu_library() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(10);
    for case in 0..cases(30) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(6)).collect();
        let d = rng.below(nd);
        // Long index vectors (beyond one block's fiber) now and then.
        let n = if case % 5 == 4 {
            2100 + rng.below(100)
        } else {
            rng.below(9)
        };
        let mut sshape = shape.clone();
        sshape[d] = n;
        let x = values(&mut rng, &shape, |v| v as f32 / 8.0);
        let src = values(&mut rng, &sshape, |v| v as f32 / 8.0);
        let ids = index(&mut rng, &[n], shape[d]);
        let what = format!("case {case}: {shape:?} dim {d} n {n}");
        let (xg, sg, ig) = (up(&g, &x), up(&g, &src), up(&g, &ids));
        let want = gather::index_copy(&x, d as isize, &ids, &src).unwrap();
        let got = gather_cuda::index_copy(&xg, d as isize, &ig, &sg).unwrap();
        assert_eq!(got.to_host::<f32>().unwrap(), want, "{what}: index_copy");
        let neg = ids.mapv(|v| v - shape[d] as i64);
        let want = gather::index_fill(&x, d as isize, &neg, 2.5f32).unwrap();
        let got =
            gather_cuda::index_fill(&xg, d as isize, &up(&g, &neg), Scalar::Float(2.5)).unwrap();
        assert_eq!(got.to_host::<f32>().unwrap(), want, "{what}: index_fill");
        for r in [Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin] {
            for inc in [true, false] {
                let want = gather::index_reduce(&x, d as isize, &ids, &src, r, inc).unwrap();
                let got = gather_cuda::index_reduce(&xg, d as isize, &ig, &sg, r, inc).unwrap();
                close(
                    &as_f64(&got.to_host::<f32>().unwrap()),
                    &as_f64(&want),
                    1e-4,
                    &format!("{what}: {r:?} {inc}"),
                );
            }
        }
    }
    // Errors are the CPU library's: a bad fill position, index_reduce's missing sum.
    let x = ndarray::Array2::<f32>::zeros((2, 3)).into_dyn();
    let bad = ndarray::arr1(&[0i64, -4]).into_dyn();
    let cpu = gather::index_fill(&x, 1, &bad, 1.0f32).unwrap_err();
    let gpu =
        gather_cuda::index_fill(&up(&g, &x), 1, &up(&g, &bad), Scalar::Float(1.0)).unwrap_err();
    assert_eq!(gpu.op().unwrap(), &cpu);
    let s = ndarray::Array2::<f32>::zeros((2, 2)).into_dyn();
    let ok = ndarray::arr1(&[0i64, 1]).into_dyn();
    let gpu =
        gather_cuda::index_reduce(&up(&g, &x), 1, &up(&g, &ok), &up(&g, &s), Reduce::Sum, true)
            .unwrap_err();
    assert_eq!(gpu.op().unwrap().kind(), gather::ErrorKind::InvalidArgument);
}

#[test]
fn scatter_with_a_value_writes_it_where_the_index_points() {
    let Some(g) = gpu() else { return };
    let x = ndarray::Array2::<f32>::zeros((2, 3)).into_dyn();
    let i = ndarray::arr2(&[[2i64], [0]]).into_dyn();
    let want = gather::scatter(&x, 1, &i, 1.5f32).unwrap();
    let got = gather_cuda::scatter(&up(&g, &x), 1, &up(&g, &i), Scalar::Float(1.5)).unwrap();
    assert_eq!(got.to_host::<f32>().unwrap(), want);
}

#[test]
fn empty_and_zero_d_operands_follow_the_cpu_library() {
    let Some(g) = gpu() else { return };
    let x = ndarray::arr0(7.0f32).into_dyn();
    let i = ndarray::arr0(0i64).into_dyn();
    let want = gather::gather(&x, 0, &i).unwrap();
    assert_eq!(
        gather_cuda::gather(&up(&g, &x), 0, &up(&g, &i))
            .unwrap()
            .to_host::<f32>()
            .unwrap(),
        want
    );
    let e = ndarray::ArrayD::<i64>::zeros(IxDyn(&[0, 3]));
    let x2 = ndarray::Array2::<f32>::ones((2, 3)).into_dyn();
    let want = gather::gather(&x2, 1, &e).unwrap();
    assert_eq!(
        gather_cuda::gather(&up(&g, &x2), 1, &up(&g, &e))
            .unwrap()
            .to_host::<f32>()
            .unwrap(),
        want
    );
    let src = ndarray::ArrayD::<f32>::zeros(IxDyn(&[0, 3]));
    let want = gather::scatter_add(&x2, 1, &e, &src).unwrap();
    let got = gather_cuda::scatter_add(&up(&g, &x2), 1, &up(&g, &e), &up(&g, &src)).unwrap();
    assert_eq!(got.to_host::<f32>().unwrap(), want);
}

// ---- bounds policies and broadcasting (Options) ----

/// An index of `shape` with values in `-size - 2..size + 2`: in range, wrapped and out of range.
fn wild_index(rng: &mut Rng, shape: &[usize], size: usize) -> ArrayD<i64> {
    let n: usize = shape.iter().product();
    let v = (0..n).map(|_| rng.below(2 * size + 4) as i64 - size as i64 - 2);
    Array::from_shape_vec(IxDyn(shape), v.collect()).unwrap()
}

/// The same outcome on both sides: equal values (within `tol`), or the same error.
fn same_outcome<T: Element>(
    got: gather_cuda::Result<CudaTensor>,
    want: gather::Result<ArrayD<T>>,
    tol: f64,
    what: &str,
) {
    match (got, want) {
        (Ok(g), Ok(w)) => close(&as_f64(&g.to_host::<T>().unwrap()), &as_f64(&w), tol, what),
        (Err(g), Err(w)) => {
            let g = g.op().unwrap_or_else(|| panic!("{what}: device error {g}"));
            assert_eq!((g.kind(), g.message()), (w.kind(), w.message()), "{what}");
        }
        (g, w) => panic!(
            "{what}: GPU {:?} but CPU {:?}",
            g.map(|_| ()),
            w.map(|_| ())
        ),
    }
}

fn check_options<T: Element>(g: &Cuda, rng: &mut Rng, f: impl Fn(i64) -> T + Copy, exact: bool) {
    use gather::OutOfBounds::{Clip, Drop, Fill, Wrap};
    let tol = if exact { 0.0 } else { 1e-2 };
    let policies = [Wrap, Clip, Fill(Scalar::Int(7)), Drop];
    for case in 0..cases(12) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(5)).collect();
        let d = rng.below(nd);
        let dim = d as isize;
        let ishape: Vec<usize> = (0..nd)
            .map(|a| {
                if a == d {
                    1 + rng.below(6)
                } else {
                    1 + rng.below(shape[a])
                }
            })
            .collect();
        let x = values(rng, &shape, f);
        let i = wild_index(rng, &ishape, shape[d]);
        let src = values(rng, &ishape, f);
        let k = 1 + rng.below(5);
        let ids = wild_index(rng, &[k], shape[d]);
        let rows: Vec<usize> = shape
            .iter()
            .enumerate()
            .map(|(a, &n)| if a == d { ids.len() } else { n })
            .collect();
        let source = values(rng, &rows, f);
        let (xg, ig, sg, idg, sog) = (
            up(g, &x),
            up(g, &i),
            up(g, &src),
            up(g, &ids),
            up(g, &source),
        );
        for p in policies {
            let cpu = gather::Options::new().bounds(p.map(|v| T::from_scalar(v).unwrap()));
            let gpu = gather_cuda::Options::new().bounds(p);
            let what = |op: &str| {
                format!(
                    "case {case}: {op} {} {shape:?} dim {d} index {i} policy {}",
                    T::DTYPE,
                    p.name()
                )
            };
            same_outcome(
                gpu.gather(&xg, dim, &ig),
                cpu.gather(&x, dim, &i),
                0.0,
                &what("gather"),
            );
            same_outcome(gpu.take(&xg, &ig), cpu.take(&x, &i), 0.0, &what("take"));
            for td in [Some(dim), None] {
                let w = what(&format!("take_along_dim {td:?}"));
                same_outcome(
                    gpu.take_along_dim(&xg, &ig, td),
                    cpu.take_along_dim(&x, &i, td),
                    0.0,
                    &w,
                );
            }
            same_outcome(
                gpu.index_select(&xg, dim, &idg),
                cpu.index_select(&x, dim, &ids),
                0.0,
                &what("index_select"),
            );
            let b = rng.below(d + 1);
            let bshape: Vec<usize> = shape[..b]
                .iter()
                .copied()
                .chain([1 + rng.below(3)])
                .collect();
            let bi = wild_index(rng, &bshape, shape[d]);
            same_outcome(
                gpu.select_batched(&xg, dim, &up(g, &bi), b),
                cpu.select_batched(&x, dim, &bi, b),
                0.0,
                &what(&format!("select_batched {bi}")),
            );
            same_outcome(
                gpu.scatter(&xg, dim, &ig, &sg),
                cpu.scatter(&x, dim, &i, &src),
                0.0,
                &what("scatter"),
            );
            same_outcome(
                gpu.scatter_add(&xg, dim, &ig, &sg),
                cpu.scatter_add(&x, dim, &i, &src),
                tol,
                &what("scatter_add"),
            );
            for r in REDUCES {
                for incl in [true, false] {
                    let t = if matches!(r, Reduce::Amax | Reduce::Amin) {
                        0.0
                    } else {
                        tol
                    };
                    same_outcome(
                        gpu.scatter_reduce(&xg, dim, &ig, &sg, r, incl),
                        cpu.scatter_reduce(&x, dim, &i, &src, r, incl),
                        t,
                        &what(&format!("scatter_reduce {r:?} {incl}")),
                    );
                }
            }
            let alpha = T::from_scalar(Scalar::Int(2)).unwrap();
            same_outcome(
                gpu.index_add(&xg, dim, &idg, &sog, Scalar::Int(2)),
                cpu.index_add(&x, dim, &ids, &source, alpha),
                tol,
                &what("index_add"),
            );
            same_outcome(
                gpu.index_copy(&xg, dim, &idg, &sog),
                cpu.index_copy(&x, dim, &ids, &source),
                0.0,
                &what("index_copy"),
            );
            let v = T::from_scalar(Scalar::Int(5)).unwrap();
            same_outcome(
                gpu.index_fill(&xg, dim, &idg, Scalar::Int(5)),
                cpu.index_fill(&x, dim, &ids, v),
                0.0,
                &what("index_fill"),
            );
            for r in [Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin] {
                let t = if matches!(r, Reduce::Amax | Reduce::Amin) {
                    0.0
                } else {
                    tol
                };
                same_outcome(
                    gpu.index_reduce(&xg, dim, &idg, &sog, r, true),
                    cpu.index_reduce(&x, dim, &ids, &source, r, true),
                    t,
                    &what(&format!("index_reduce {r:?}")),
                );
            }
            let k = 1 + rng.below(6);
            let flat = wild_index(rng, &[k], x.len());
            let fsrc = values(rng, flat.shape(), f);
            for acc in [false, true] {
                same_outcome(
                    gpu.put(&xg, &up(g, &flat), &up(g, &fsrc), acc),
                    cpu.put(&x, &flat, &fsrc, acc),
                    tol,
                    &what(&format!("put {flat} accumulate {acc}")),
                );
            }
        }
    }
}

#[test]
fn bounds_policies_give_the_cpu_librarys_results_and_errors() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(31);
    check_options::<f32>(&g, &mut rng, |v| v as f32 / 64.0, false);
    check_options::<i64>(&g, &mut rng, |v| v, true);
    check_options::<f16>(&g, &mut rng, |v| f16::from_f32(v as f32 / 256.0), false);
    check_options::<u8>(&g, &mut rng, |v| v as u8, true);
}

#[test]
fn broadcasting_gather_and_scatters_equal_the_cpu_library() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(37);
    for case in 0..cases(40) {
        // [B, N, D] with [B, K, 1] row ids (gather), [E, 1] edge targets into [M, D] (scatter).
        let (b, n, dd, k) = (
            1 + rng.below(3),
            1 + rng.below(6),
            1 + rng.below(5),
            1 + rng.below(6),
        );
        let x = values(&mut rng, &[b, n, dd], |v| v as f32);
        let ids = index(&mut rng, &[b, k, 1], n);
        let policy = [
            gather::OutOfBounds::Error,
            gather::OutOfBounds::Fill(Scalar::Int(-1)),
        ][case % 2];
        let cpu = gather::Options::new()
            .broadcast(true)
            .bounds(policy.map(|v| f32::from_scalar(v).unwrap()));
        let gpu = gather_cuda::Options::new().broadcast(true).bounds(policy);
        let ids = if case % 2 == 1 {
            wild_index(&mut rng, &[b, k, 1], n)
        } else {
            ids
        };
        let what = format!("case {case}: gather_broadcast {ids}");
        same_outcome(
            gpu.gather(&up(&g, &x), 1, &up(&g, &ids)),
            cpu.gather(&x, 1, &ids),
            0.0,
            &what,
        );
        let (m, e) = (1 + rng.below(5), 1 + rng.below(9));
        let dst = values(&mut rng, &[m, dd], |v| v as f32);
        let msgs = values(&mut rng, &[e, dd], |v| v as f32);
        let to = index(&mut rng, &[e, 1], m);
        let wp = [gather::OutOfBounds::Error, gather::OutOfBounds::Drop][case % 2];
        let to = if case % 2 == 1 {
            wild_index(&mut rng, &[e, 1], m)
        } else {
            to
        };
        let cpu = gather::Options::new()
            .broadcast(true)
            .bounds(wp.map(|_: Scalar| 0.0f32));
        let gpu = gather_cuda::Options::new().broadcast(true).bounds(wp);
        let (dg, tg, mg) = (up(&g, &dst), up(&g, &to), up(&g, &msgs));
        let what = format!("case {case}: scatter broadcast {to}");
        same_outcome(
            gpu.scatter_add(&dg, 0, &tg, &mg),
            cpu.scatter_add(&dst, 0, &to, &msgs),
            0.0,
            &what,
        );
        same_outcome(
            gpu.scatter(&dg, 0, &tg, &mg),
            cpu.scatter(&dst, 0, &to, &msgs),
            0.0,
            &what,
        );
        for r in REDUCES {
            same_outcome(
                gpu.scatter_reduce(&dg, 0, &tg, &mg, r, false),
                cpu.scatter_reduce(&dst, 0, &to, &msgs, r, false),
                1e-5,
                &format!("{what} {r:?}"),
            );
        }
        // One value everywhere the index points (src of all-1 axes on the CPU).
        let one = ndarray::arr2(&[[3.0f32]]).into_dyn();
        same_outcome(
            gpu.scatter(&dg, 0, &tg, Scalar::Float(3.0)),
            cpu.scatter(&dst, 0, &to, &one),
            0.0,
            &what,
        );
    }
    // Sizes that neither match nor are 1: the CPU library's error.
    let x = values(&mut rng, &[2, 4, 3], |v| v as f32);
    let bad = index(&mut rng, &[3, 2, 1], 4);
    same_outcome(
        gather_cuda::Options::new()
            .broadcast(true)
            .gather(&up(&g, &x), 1, &up(&g, &bad)),
        gather::Options::new().broadcast(true).gather(&x, 1, &bad),
        0.0,
        "mismatched broadcast",
    );
}

// ---- arg-reductions and segment reductions ----

/// Values with many ties, and (for floats) NaNs and signed zeros.
fn tied<T: Element>(rng: &mut Rng, shape: &[usize], f: impl Fn(f64) -> T) -> ArrayD<T> {
    let n: usize = shape.iter().product();
    let v = (0..n).map(|_| match rng.below(12) {
        0 => f(f64::NAN),
        1 => f(-0.0),
        k => f(k as f64 - 6.0),
    });
    Array::from_shape_vec(IxDyn(shape), v.collect()).unwrap()
}

/// Bitwise-equal values (NaN equals NaN) and equal args.
fn same_arg<T: Element>(got: (CudaTensor, CudaTensor), want: (ArrayD<T>, ArrayD<i64>), what: &str) {
    let gv = as_f64(&got.0.to_host::<T>().unwrap());
    let wv = as_f64(&want.0);
    assert_eq!(gv.shape(), wv.shape(), "{what}");
    for (a, b) in gv.iter().zip(&wv) {
        assert!(
            (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits(),
            "{what}: {gv} vs {wv}"
        );
    }
    assert_eq!(got.1.to_host::<i64>().unwrap(), want.1, "{what}: args");
}

fn check_scatter_arg<T: gather::ops::reduce::ReduceElement>(
    g: &Cuda,
    rng: &mut Rng,
    f: impl Fn(f64) -> T + Copy,
) {
    use gather::ops::reduce::{ArgReduce, scatter_reduce_arg};
    for case in 0..cases(30) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(5)).collect();
        let d = rng.below(nd);
        let ishape: Vec<usize> = (0..nd)
            .map(|a| {
                if a == d {
                    1 + rng.below(10)
                } else {
                    1 + rng.below(shape[a])
                }
            })
            .collect();
        let x = tied(rng, &shape, f);
        let src = tied(rng, &ishape, f);
        let i = index(rng, &ishape, shape[d]);
        let (xg, ig, sg) = (up(g, &x), up(g, &i), up(g, &src));
        for r in [ArgReduce::Amax, ArgReduce::Amin] {
            for incl in [true, false] {
                let what = format!(
                    "case {case}: {} {shape:?} dim {d} index {i} {r:?} {incl}",
                    T::DTYPE
                );
                let want = scatter_reduce_arg(&x, d as isize, &i, &src, r, incl).unwrap();
                let got =
                    gather_cuda::scatter_reduce_arg(&xg, d as isize, &ig, &sg, r, incl).unwrap();
                same_arg(got, want, &what);
            }
        }
    }
}

#[test]
fn scatter_reduce_arg_equals_the_cpu_library_on_ties_and_nans() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(41);
    check_scatter_arg::<f32>(&g, &mut rng, |v| v as f32);
    check_scatter_arg::<f64>(&g, &mut rng, |v| v);
    check_scatter_arg::<bf16>(&g, &mut rng, bf16::from_f64);
    check_scatter_arg::<i32>(&g, &mut rng, |v| if v.is_nan() { 7 } else { v as i32 });
    check_scatter_arg::<u8>(
        &g,
        &mut rng,
        |v| if v.is_nan() { 7 } else { (v + 6.0) as u8 },
    );
}

/// Random segments of an axis of length n, in the three forms: offsets (possibly starting after
/// 0 and ending before n), and the ids and lengths of all n positions.
fn random_segments(
    rng: &mut Rng,
    n: usize,
) -> (
    ndarray::Array1<i64>,
    ndarray::Array1<i64>,
    ndarray::Array1<i64>,
) {
    let s = rng.below(5);
    let mut cuts: Vec<i64> = (0..s + 1).map(|_| rng.below(n + 1) as i64).collect();
    cuts.sort();
    let mut ids = Vec::with_capacity(n);
    let mut lengths = Vec::new();
    let mut id = 0i64;
    let mut left = n;
    while left > 0 {
        let l = rng.below(left.min(4) + 1);
        let l = if lengths.len() > 6 { left } else { l };
        lengths.push(l as i64);
        ids.extend(std::iter::repeat_n(id, l));
        id += 1;
        left -= l;
    }
    (cuts.into(), ids.into(), lengths.into())
}

#[test]
fn segment_reductions_equal_the_cpu_library_in_every_form() {
    use gather::ops::reduce::{ArgReduce, EmptyFill, GroupReduce};
    use gather::ops::segment::{segment_arg_reduce, segment_reduce};
    use gather_cuda::Segments;
    let Some(g) = gpu() else { return };
    let mut rng = Rng(43);
    let reduces = [
        GroupReduce::Sum,
        GroupReduce::Prod,
        GroupReduce::Mean,
        GroupReduce::Amax,
        GroupReduce::Amin,
        GroupReduce::First,
        GroupReduce::Last,
        GroupReduce::LogSumExp,
        GroupReduce::Var { correction: 1 },
        GroupReduce::Std { correction: 0 },
    ];
    for case in 0..cases(30) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(6)).collect();
        let axis = rng.below(nd);
        let n = shape[axis];
        let x = tied(&mut rng, &shape, |v| v as f32);
        let xi = tied(&mut rng, &shape, |v| if v.is_nan() { 9 } else { v as i64 });
        let (off, ids, len) = random_segments(&mut rng, n);
        let (og, idg, lg) = (
            up(&g, &off.clone().into_dyn()),
            up(&g, &ids.clone().into_dyn()),
            up(&g, &len.clone().into_dyn()),
        );
        let forms: [(&str, gather::Segments<'_, i64>, Segments<'_>); 4] = [
            (
                "offsets",
                gather::Segments::offsets(&off),
                Segments::Offsets(&og),
            ),
            ("ids", gather::Segments::ids(&ids), Segments::ids(&idg)),
            (
                "ids_with",
                gather::Segments::ids_with(&ids, 9),
                Segments::ids_with(&idg, 9),
            ),
            (
                "lengths",
                gather::Segments::lengths(&len),
                Segments::Lengths(&lg),
            ),
        ];
        let (xg, xig) = (up(&g, &x), up(&g, &xi));
        for (form, cpu_seg, gpu_seg) in forms {
            let what = format!("case {case}: {shape:?} axis {axis} {form} {off} {ids} {len}");
            for r in reduces {
                for (fc, fg) in [
                    (EmptyFill::Identity, EmptyFill::Identity),
                    (
                        EmptyFill::Value(3.5f32),
                        EmptyFill::Value(Scalar::Float(3.5)),
                    ),
                ] {
                    let want = segment_reduce(&x, axis as isize, cpu_seg.clone(), r, fc);
                    let got = gather_cuda::segment_reduce(&xg, axis as isize, gpu_seg, r, fg);
                    same_outcome(got, want, 1e-5, &format!("{what} {r:?} f32"));
                }
                let want = segment_reduce(&xi, axis as isize, cpu_seg.clone(), r, EmptyFill::Zero);
                let got =
                    gather_cuda::segment_reduce(&xig, axis as isize, gpu_seg, r, EmptyFill::Zero);
                same_outcome(got, want, 0.0, &format!("{what} {r:?} i64"));
            }
            for r in [ArgReduce::Amax, ArgReduce::Amin] {
                let want =
                    segment_arg_reduce(&x, axis as isize, cpu_seg.clone(), r, EmptyFill::Nan)
                        .unwrap();
                let got =
                    gather_cuda::segment_arg_reduce(&xg, axis as isize, gpu_seg, r, EmptyFill::Nan)
                        .unwrap();
                same_arg(got, want, &format!("{what} {r:?}"));
            }
        }
    }
    // Bad segments: the CPU library's error, found on the GPU and worded on the host.
    let x = values(&mut rng, &[2, 6], |v| v as f32);
    let xg = up(&g, &x);
    let bad: [(&str, Vec<i64>); 5] = [
        ("offsets", vec![0, 3, 2]),
        ("offsets", vec![0, 7]),
        ("ids", vec![0, 1, 1, 0, 2, 2]),
        ("ids", vec![0, 0, -1, 1, 1, 1]),
        ("lengths", vec![2, 2, 1]),
    ];
    for (form, v) in bad {
        let host = ndarray::Array1::from(v.clone());
        let dev = up(&g, &host.clone().into_dyn());
        let (cpu_seg, gpu_seg) = match form {
            "offsets" => (gather::Segments::offsets(&host), Segments::Offsets(&dev)),
            "ids" => (gather::Segments::ids(&host), Segments::ids(&dev)),
            _ => (gather::Segments::lengths(&host), Segments::Lengths(&dev)),
        };
        let want = segment_reduce(&x, 1, cpu_seg, GroupReduce::Sum, EmptyFill::Identity);
        let got =
            gather_cuda::segment_reduce(&xg, 1, gpu_seg, GroupReduce::Sum, EmptyFill::Identity);
        same_outcome(got, want, 0.0, &format!("bad {form} {v:?}"));
    }
}

#[test]
fn scatter_groups_equal_the_cpu_library_for_every_reduction() {
    use gather::ops::reduce::{EmptyFill, GroupOptions, GroupReduce, scatter_groups};
    let Some(g) = gpu() else { return };
    let mut rng = Rng(47);
    let reduces = [
        GroupReduce::Sum,
        GroupReduce::Prod,
        GroupReduce::Mean,
        GroupReduce::Amax,
        GroupReduce::Amin,
        GroupReduce::First,
        GroupReduce::Last,
        GroupReduce::LogSumExp,
        GroupReduce::Var { correction: 1 },
        GroupReduce::Std { correction: 0 },
    ];
    for case in 0..cases(30) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(6)).collect();
        let d = rng.below(nd);
        let groups = 1 + rng.below(5);
        // Half the cases a 1-D index (one group per position along d for every lane), half an
        // index of src's rank that covers a leading block.
        let ishape: Vec<usize> = if case % 2 == 0 {
            vec![1 + rng.below(shape[d])]
        } else {
            shape.iter().map(|&n| 1 + rng.below(n)).collect()
        };
        let i = index(&mut rng, &ishape, groups);
        let x = tied(&mut rng, &shape, |v| v as f32);
        let xi = tied(&mut rng, &shape, |v| if v.is_nan() { 9 } else { v as i64 });
        let (xg, xig, ig) = (up(&g, &x), up(&g, &xi), up(&g, &i));
        for dim_size in [None, Some(groups + 1)] {
            let what = format!("case {case}: {shape:?} dim {d} index {i} dim_size {dim_size:?}");
            for r in reduces {
                let cpu = GroupOptions {
                    dim_size,
                    fill: EmptyFill::Value(-2.5f32),
                };
                let gpu = GroupOptions {
                    dim_size,
                    fill: EmptyFill::Value(Scalar::Float(-2.5)),
                };
                let want = scatter_groups(&x, d as isize, &i, r, cpu);
                let got = gather_cuda::scatter_groups(&xg, d as isize, &ig, r, gpu);
                same_outcome(got, want, 1e-5, &format!("{what} {r:?} f32"));
                let opts = GroupOptions {
                    dim_size,
                    fill: EmptyFill::Identity,
                };
                let want = scatter_groups(&xi, d as isize, &i, r, opts);
                let opts = GroupOptions {
                    dim_size,
                    fill: EmptyFill::Identity,
                };
                let got = gather_cuda::scatter_groups(&xig, d as isize, &ig, r, opts);
                same_outcome(got, want, 0.0, &format!("{what} {r:?} i64"));
            }
        }
    }
    // A value out of range for the given dim_size: the CPU library's error.
    let x = values(&mut rng, &[4, 3], |v| v as f32);
    let bad = ndarray::arr1(&[0i64, 2, 5, 1]).into_dyn();
    let opts = |n| GroupOptions::<f32>::default().dim_size(n);
    let want = scatter_groups(&x, 0, &bad, GroupReduce::Sum, opts(3));
    let gpu_opts = GroupOptions::<Scalar>::default().dim_size(3);
    let got =
        gather_cuda::scatter_groups(&up(&g, &x), 0, &up(&g, &bad), GroupReduce::Sum, gpu_opts);
    same_outcome(got, want, 0.0, "group id out of range");
}

#[test]
fn softmax_any_and_all_over_groups_and_segments_equal_the_cpu_library() {
    use gather::ops::reduce::{
        EmptyFill, GroupOptions, scatter_all, scatter_any, scatter_log_softmax, scatter_softmax,
    };
    use gather::ops::segment::{segment_all, segment_any, segment_log_softmax, segment_softmax};
    use gather_cuda::Segments;
    let Some(g) = gpu() else { return };
    let mut rng = Rng(53);
    for case in 0..cases(30) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(6)).collect();
        let d = rng.below(nd);
        let n = shape[d];
        let x = tied(&mut rng, &shape, |v| v as f32);
        let xh = tied(&mut rng, &shape, f16::from_f64);
        let (xg, xhg) = (up(&g, &x), up(&g, &xh));
        let i = if case % 2 == 0 {
            index(&mut rng, &[n], 4)
        } else {
            index(&mut rng, &shape, 4)
        };
        let ig = up(&g, &i);
        let what = format!("case {case}: {shape:?} dim {d} index {i}");
        let dim = d as isize;
        same_outcome(
            gather_cuda::scatter_softmax(&xg, dim, &ig),
            scatter_softmax(&x, dim, &i),
            1e-5,
            &what,
        );
        same_outcome(
            gather_cuda::scatter_log_softmax(&xhg, dim, &ig),
            scatter_log_softmax(&xh, dim, &i),
            1e-2,
            &what,
        );
        let opts = GroupOptions::default().dim_size(5);
        let (got, want) = (
            gather_cuda::scatter_any(&xg, dim, &ig, opts),
            scatter_any(&x, dim, &i, opts),
        );
        same_outcome(got, want, 0.0, &format!("{what} any"));
        let opts = GroupOptions::default().fill(EmptyFill::Value(false));
        let (got, want) = (
            gather_cuda::scatter_all(&xhg, dim, &ig, opts),
            scatter_all(&xh, dim, &i, opts),
        );
        same_outcome(got, want, 0.0, &format!("{what} all"));
        let (off, ids, len) = random_segments(&mut rng, n);
        let (og, idg, lg) = (
            up(&g, &off.clone().into_dyn()),
            up(&g, &ids.clone().into_dyn()),
            up(&g, &len.clone().into_dyn()),
        );
        let forms: [(&str, gather::Segments<'_, i64>, Segments<'_>); 3] = [
            (
                "offsets",
                gather::Segments::offsets(&off),
                Segments::Offsets(&og),
            ),
            ("ids", gather::Segments::ids(&ids), Segments::ids(&idg)),
            (
                "lengths",
                gather::Segments::lengths(&len),
                Segments::Lengths(&lg),
            ),
        ];
        for (form, cs, gs) in forms {
            let what = format!("case {case}: {shape:?} axis {d} {form} {off} {ids} {len}");
            // Offsets that leave positions out are the CPU library's error on both.
            same_outcome(
                gather_cuda::segment_softmax(&xg, dim, gs),
                segment_softmax(&x, dim, cs.clone()),
                1e-5,
                &what,
            );
            same_outcome(
                gather_cuda::segment_log_softmax(&xg, dim, gs),
                segment_log_softmax(&x, dim, cs.clone()),
                1e-5,
                &what,
            );
            let (got, want) = (
                gather_cuda::segment_any(&xg, dim, gs, EmptyFill::Identity),
                segment_any(&x, dim, cs.clone(), EmptyFill::Identity),
            );
            same_outcome(got, want, 0.0, &format!("{what} any"));
            let (got, want) = (
                gather_cuda::segment_all(&xg, dim, gs, EmptyFill::Identity),
                segment_all(&x, dim, cs.clone(), EmptyFill::Identity),
            );
            same_outcome(got, want, 0.0, &format!("{what} all"));
        }
    }
}

/// The ops' tensor arguments, in the cases of [`by_name`].
#[cfg(feature = "dynamic")]
const TENSORS: &[&str] = &[
    "src", "index", "input", "offsets", "ids", "lengths", "source", "mask", "repeats",
];

#[cfg(feature = "dynamic")]
fn down(t: &CudaTensor) -> gather::dynamic::Tensor {
    use gather::DType;
    use gather::dynamic::Tensor;
    match t.dtype() {
        DType::Bool => Tensor::from(t.to_host::<bool>().unwrap()),
        DType::U8 => Tensor::from(t.to_host::<u8>().unwrap()),
        DType::I8 => Tensor::from(t.to_host::<i8>().unwrap()),
        DType::I16 => Tensor::from(t.to_host::<i16>().unwrap()),
        DType::I32 => Tensor::from(t.to_host::<i32>().unwrap()),
        DType::I64 => Tensor::from(t.to_host::<i64>().unwrap()),
        DType::U16 => Tensor::from(t.to_host::<u16>().unwrap()),
        DType::U32 => Tensor::from(t.to_host::<u32>().unwrap()),
        DType::U64 => Tensor::from(t.to_host::<u64>().unwrap()),
        DType::F16 => Tensor::from(t.to_host::<f16>().unwrap()),
        DType::BF16 => Tensor::from(t.to_host::<bf16>().unwrap()),
        DType::F32 => Tensor::from(t.to_host::<f32>().unwrap()),
        _ => Tensor::from(t.to_host::<f64>().unwrap()),
    }
}

/// `v` as an integer, float or bool where it reads as one, else as a string.
#[cfg(feature = "dynamic")]
fn parse_args(kvs: &[(&str, &str)]) -> gather::dynamic::Args {
    use gather::dynamic::Arg;
    let mut args = gather::dynamic::Args::default();
    for &(k, v) in kvs {
        let arg = match (v.parse::<i64>(), v.parse::<f64>(), v.parse::<bool>()) {
            (Ok(i), ..) => Arg::Int(i),
            (_, Ok(f), _) if v != "nan" => Arg::Float(f),
            (.., Ok(b)) => Arg::Bool(b),
            _ => Arg::Str(v.to_string()),
        };
        args.set(k, arg);
    }
    args
}

/// Whether two errors say the same: kind, message, hint, index value and coordinate (else
/// both, as text).
#[cfg(feature = "dynamic")]
fn same_error(e: &gather::Error, w: &gather::Error) -> Result<(), String> {
    let parts = |e: &gather::Error| {
        let c = e.coordinate().map(<[usize]>::to_vec);
        (
            e.kind(),
            e.message().to_string(),
            e.hint().map(String::from),
            e.index_value(),
            c,
        )
    };
    if parts(e) == parts(w) {
        return Ok(());
    }
    Err(format!("GPU {:?}\nCPU {:?}", parts(e), parts(w)))
}

/// Runs `case` ("op arg=value ... tensor=array ...", the arrays named in `host`) through
/// `gather_cuda::dynamic::call` and `gather::dynamic::call`: the same output names, dtypes,
/// shapes and values (selections, integers and bools exactly, float arithmetic within 1e-5,
/// or 1e-2 in f16/bf16), or the same error. `fails`: whether the CPU must fail.
#[cfg(feature = "dynamic")]
fn by_name(g: &Cuda, host: &gather::dynamic::Tensors, case: &str, fails: Option<bool>) {
    use gather::DType;
    let what = case.to_string();
    let (op, rest) = case.split_once(' ').unwrap_or((case, ""));
    let (tensors, args): (Vec<_>, Vec<_>) = rest
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .partition(|(k, _)| TENSORS.contains(k));
    let args = parse_args(&args);
    let mut cpu = gather::dynamic::Tensors::new();
    let mut dev = gather_cuda::dynamic::CudaTensors::new();
    for (name, array) in tensors {
        let t = &host[array];
        cpu.insert(name.to_string(), t.clone());
        dev.insert(name.to_string(), gather::with_tensor!(t, a => up(g, a)));
    }
    let want = gather::dynamic::call(op, &args, &cpu);
    if let Some(fails) = fails {
        assert_eq!(want.is_err(), fails, "{what}: CPU {want:?}");
    }
    let got = gather_cuda::dynamic::call(op, &args, &dev);
    let (got, want) = match (got, want) {
        (Ok(got), Ok(want)) => (got, want),
        (Err(e), Err(w)) => {
            assert_eq!(same_error(&e, &w), Ok(()), "{what}");
            return;
        }
        (got, want) => panic!("{what}: GPU {got:?}, CPU {want:?}"),
    };
    let got_names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    let want_names: Vec<&str> = want.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(got_names, want_names, "{what}");
    let selects = ["amax", "amin", "first", "last"].contains(&args.str("reduce").unwrap_or(""));
    for ((name, got), (_, want)) in got.iter().zip(&want) {
        let got = down(got);
        let what = format!("{what}: {name}");
        assert_eq!(
            (got.dtype(), got.shape()),
            (want.dtype(), want.shape()),
            "{what}"
        );
        let (a, b) = (got.to_f64_vec(), want.to_f64_vec());
        if selects || !want.dtype().is_float() {
            let same = a
                .iter()
                .zip(&b)
                .all(|(x, y)| x == y || x.is_nan() && y.is_nan());
            assert!(same, "{what}: {a:?} vs {b:?}");
        } else {
            let arr = |v: Vec<f64>| ndarray::Array1::from(v).into_dyn();
            let tol = if matches!(want.dtype(), DType::F16 | DType::BF16) {
                1e-2
            } else {
                1e-5
            };
            close(&arr(a), &arr(b), tol, &what);
        }
    }
}

/// The group and segment ops by name: `gather_cuda::dynamic::call` against
/// `gather::dynamic::call` on the same arrays (the Python package's route for CUDA arrays), for
/// the same output names, dtypes, shapes and values, and the CPU's errors for bad arguments.
#[cfg(feature = "dynamic")]
#[test]
fn group_and_segment_ops_by_name_equal_the_cpu_librarys() {
    use gather::dynamic::{Tensor, Tensors};
    let Some(g) = gpu() else { return };
    let mut rng = Rng(59);
    // Values in -3..=3 (steps of 0.75 for floats): ties for amax/amin/first/last.
    let f = |rng: &mut Rng, shape: &[usize]| values(rng, shape, |v| (v % 4) as f32 * 0.75);
    let d = |rng: &mut Rng, shape: &[usize]| values(rng, shape, |v| (v % 4) as f64 * 0.75);
    let n = |rng: &mut Rng, shape: &[usize]| values(rng, shape, |v| (v % 4) as i32);
    let i64s = |v: &[i64]| Tensor::from(ndarray::arr1(v).into_dyn());
    let host: Tensors = [
        ("f32", Tensor::from(f(&mut rng, &[3, 6]))),
        ("f64", Tensor::from(d(&mut rng, &[3, 6]))),
        ("i32", Tensor::from(n(&mut rng, &[3, 6]))),
        ("f32_1d", Tensor::from(f(&mut rng, &[6]))),
        ("in_f32", Tensor::from(f(&mut rng, &[3, 4]))),
        ("in_f64", Tensor::from(d(&mut rng, &[3, 4]))),
        ("in_i32", Tensor::from(n(&mut rng, &[3, 4]))),
        // Indices along dim 1 (of src's rank, and 1-D with group 2 empty) and along dim 0.
        ("index", Tensor::from(index(&mut rng, &[3, 6], 4))),
        ("index_1d", i64s(&[3, 0, 3, 1, 0, 3])),
        ("index_dim0", i64s(&[1, 0, 1])),
        // Segments of the 6 positions along dim 1, an empty one in each form, and of dim 0.
        ("offsets", i64s(&[0, 2, 2, 5, 6])),
        ("ids", i64s(&[0, 0, 2, 2, 2, 3])),
        ("lengths", i64s(&[2, 0, 3, 1])),
        ("offsets_dim0", i64s(&[0, 1, 1, 3])),
        ("lengths_dim0", i64s(&[1, 0, 2])),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    // An op, its arguments, and its tensors as name=array; the CPU runs the cases and fails
    // the errors.
    let cases = [
        "scatter_groups dim=1 reduce=sum src=f32 index=index",
        "scatter_groups dim=1 reduce=mean dim_size=5 fill=nan src=f64 index=index_1d",
        "scatter_groups dim=1 reduce=var correction=0 fill=zero src=f32 index=index",
        "scatter_groups dim=1 reduce=std src=f64 index=index_1d",
        "scatter_groups dim=1 reduce=amax dim_size=6 fill=-1 src=i32 index=index_1d",
        "scatter_groups dim=-1 reduce=prod fill=identity src=i32 index=index",
        "scatter_groups dim=0 reduce=logsumexp fill=2.5 src=f32 index=index_dim0",
        "scatter_groups dim=0 reduce=first dim_size=4 src=f32_1d index=index_1d",
        "scatter_groups dim=0 reduce=last fill=-inf src=f32_1d index=index_1d",
        "scatter_any dim=1 dim_size=5 src=f32 index=index",
        "scatter_any dim=1 fill=true src=i32 index=index_1d",
        "scatter_all dim=1 dim_size=5 fill=false src=i32 index=index",
        "scatter_all dim=0 src=f64 index=index_dim0",
        "scatter_softmax dim=1 src=f32 index=index",
        "scatter_softmax dim=0 src=f64 index=index_dim0",
        "scatter_log_softmax dim=1 src=f64 index=index_1d",
        "scatter_reduce_arg dim=1 reduce=amax include_self=false input=in_f32 index=index src=f32",
        "scatter_reduce_arg dim=1 reduce=amin input=in_f64 index=index src=f64",
        "scatter_reduce_arg dim=1 reduce=amax input=in_i32 index=index src=i32",
        "segment_reduce dim=1 reduce=sum src=f32 offsets=offsets",
        "segment_reduce dim=1 reduce=mean num_segments=5 fill=nan src=f64 ids=ids",
        "segment_reduce dim=-1 reduce=var correction=0 fill=zero src=f32 lengths=lengths",
        "segment_reduce dim=1 reduce=std src=f64 offsets=offsets",
        "segment_reduce dim=1 reduce=amin fill=-1 src=i32 lengths=lengths",
        "segment_reduce dim=1 reduce=prod src=i32 ids=ids",
        "segment_reduce reduce=logsumexp fill=2.5 src=f32 offsets=offsets_dim0",
        "segment_arg_reduce dim=1 reduce=amax num_segments=5 fill=nan src=f32 ids=ids",
        "segment_arg_reduce dim=1 reduce=amin fill=-7 src=i32 lengths=lengths",
        "segment_arg_reduce reduce=amax src=f64 lengths=lengths_dim0",
        "segment_any dim=1 src=f32 offsets=offsets",
        "segment_any dim=1 num_segments=5 fill=zero src=i32 ids=ids",
        "segment_all dim=1 fill=false src=i32 lengths=lengths",
        "segment_all src=f64 offsets=offsets_dim0",
        "segment_softmax dim=1 src=f32 ids=ids",
        "segment_softmax src=f64 offsets=offsets_dim0",
        "segment_log_softmax dim=1 src=f64 lengths=lengths",
        "segment_log_softmax dim=-1 src=f32 offsets=offsets",
    ];
    let errors = [
        "scatter_groups dim=1 reduce=median src=f32 index=index",
        "scatter_groups dim=1 reduce=sum correction=1 src=f32 index=index",
        "scatter_groups dim=1 reduce=sum fill=max src=f32 index=index",
        "scatter_groups dim=1 reduce=amax fill=3000000000 src=i32 index=index",
        "segment_reduce dim=1 reduce=sum fill=3000000000 src=i32 offsets=offsets",
        "scatter_softmax dim=1 src=i32 index=index",
        "scatter_reduce_arg dim=1 reduce=sum input=in_f32 index=index src=f32",
        "segment_reduce dim=1 reduce=sum src=f32 offsets=offsets ids=ids",
        "segment_reduce dim=1 reduce=sum num_segments=4 src=f32 lengths=lengths",
        "segment_reduce dim=1 reduce=median src=f32 offsets=offsets",
        "segment_reduce dim=1 reduce=sum src=f32",
        "segment_arg_reduce dim=1 reduce=mean src=f32 offsets=offsets",
        "segment_softmax dim=1 src=i32 offsets=offsets",
    ];
    let all = cases.iter().map(|c| (c, false));
    for (case, fails) in all.chain(errors.iter().map(|c| (c, true))) {
        by_name(&g, &host, case, Some(fails));
    }
}

#[test]
fn ten_thousand_calls_leave_device_memory_where_it_started() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(7);
    let x = up(&g, &values(&mut rng, &[1000, 64], |v| v as f32));
    let i = up(&g, &index(&mut rng, &[5000, 1], 1000))
        .broadcast(&[5000, 64])
        .unwrap();
    let s = up(&g, &values(&mut rng, &[5000, 64], |v| v as f32));
    let ids = up(&g, &index(&mut rng, &[300], 1000));
    // A gradient too: a dozen ops and their temporaries per call.
    let out = gather_cuda::scatter_reduce(&x, 0, &i, &s, Reduce::Amax, true).unwrap();
    let grad =
        || gather_cuda::grad::scatter_reduce(&x, &x, 0, &i, &s, Reduce::Amax, true, &out).unwrap();
    for _ in 0..10 {
        gather_cuda::scatter_add(&x, 0, &i, &s).unwrap();
        gather_cuda::index_select(&x, 0, &ids).unwrap();
        grad();
    }
    g.synchronize().unwrap();
    let (before, _) = g.memory().unwrap();
    for k in 0..cases(10_000) {
        match k % 3 {
            0 => drop(gather_cuda::scatter_add(&x, 0, &i, &s).unwrap()),
            1 => drop(gather_cuda::index_select(&x, 0, &ids).unwrap()),
            _ => drop(grad()),
        }
    }
    g.synchronize().unwrap();
    let (after, _) = g.memory().unwrap();
    let grew = before.saturating_sub(after);
    assert!(
        grew <= 4 << 20,
        "device memory in use grew by {grew} bytes over {} calls",
        cases(10_000)
    );
}

// ---- gradients ----

fn host<T: Element>(t: &CudaTensor) -> ArrayD<f64> {
    as_f64(&t.to_host::<T>().unwrap())
}

/// Every gradient of `gather_cuda::grad` against `gather::grad` on random cases with ties and
/// zeros (values in -4..=4), both parities for the reductions.
fn check_grads<T: gather::grad::GradFloat>(
    g: &Cuda,
    rng: &mut Rng,
    f: impl Fn(i64) -> T + Copy,
    tol: f64,
) {
    use gather::grad::Parity;
    use gather_cuda::grad as gg;
    let small = move |v: i64| f(v % 5);
    for case in 0..cases(30) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(5)).collect();
        let d = rng.below(nd);
        let ishape: Vec<usize> = (0..nd)
            .map(|a| {
                if a == d {
                    1 + rng.below(8)
                } else {
                    1 + rng.below(shape[a])
                }
            })
            .collect();
        let dim = d as isize;
        let x = values(rng, &shape, small);
        let i = index(rng, &ishape, shape[d]);
        let src = values(rng, &ishape, small);
        let go = values(rng, &shape, f);
        let gi = values(rng, &ishape, f);
        let (xg, ig, sg, gog, gig) = (up(g, &x), up(g, &i), up(g, &src), up(g, &go), up(g, &gi));
        let what = format!(
            "case {case}: {} {shape:?} dim {d} index {ishape:?}",
            T::DTYPE
        );
        let want = gather::grad::gather(&gi, IxDyn(&shape), dim, &i).unwrap();
        let got = gg::gather(&gig, &shape, dim, &ig).unwrap();
        close(
            &host::<T>(&got),
            &as_f64(&want),
            tol,
            &format!("{what}: gather"),
        );
        let want = gather::grad::scatter(&go, dim, &i, IxDyn(&ishape)).unwrap();
        let got = gg::scatter(&gog, dim, &ig, &ishape).unwrap();
        close(
            &host::<T>(&got.input),
            &as_f64(&want.input),
            0.0,
            &format!("{what}: scatter input"),
        );
        close(
            &host::<T>(&got.src),
            &as_f64(&want.src),
            0.0,
            &format!("{what}: scatter src"),
        );
        let want = gather::grad::scatter_add(&go, dim, &i, IxDyn(&ishape)).unwrap();
        let got = gg::scatter_add(&gog, dim, &ig, &ishape).unwrap();
        close(
            &host::<T>(&got.src),
            &as_f64(&want.src),
            0.0,
            &format!("{what}: scatter_add src"),
        );
        for r in REDUCES {
            for include_self in [true, false] {
                let out = gather::scatter_reduce(&x, dim, &i, &src, r, include_self).unwrap();
                let outg =
                    gather_cuda::scatter_reduce(&xg, dim, &ig, &sg, r, include_self).unwrap();
                for parity in [Parity::Correct, Parity::PyTorch] {
                    let want = gather::grad::scatter_reduce_with(
                        &go,
                        &x,
                        dim,
                        &i,
                        &src,
                        r,
                        include_self,
                        &out,
                        parity,
                    )
                    .unwrap();
                    let got = gg::scatter_reduce_with(
                        &gog,
                        &xg,
                        dim,
                        &ig,
                        &sg,
                        r,
                        include_self,
                        &outg,
                        parity,
                    )
                    .unwrap();
                    let w = format!("{what}: {r:?} include_self {include_self} {parity:?}");
                    close(
                        &host::<T>(&got.input),
                        &as_f64(&want.input),
                        tol,
                        &format!("{w} input"),
                    );
                    close(
                        &host::<T>(&got.src),
                        &as_f64(&want.src),
                        tol,
                        &format!("{w} src"),
                    );
                }
            }
        }
        // The index_* family along d, with a 1-d index.
        let n = 1 + rng.below(6);
        let iv = index(rng, &[n], shape[d]);
        let ivg = up(g, &iv);
        let mut sshape = shape.clone();
        sshape[d] = n;
        let source = values(rng, &sshape, small);
        let gsel = values(rng, &sshape, f);
        let want = gather::grad::index_select(&gsel, IxDyn(&shape), dim, &iv).unwrap();
        let got = gg::index_select(&up(g, &gsel), &shape, dim, &ivg).unwrap();
        close(
            &host::<T>(&got),
            &as_f64(&want),
            tol,
            &format!("{what}: index_select"),
        );
        let alpha = T::from_scalar(Scalar::Float(-2.5)).unwrap();
        let want = gather::grad::index_add(&go, dim, &iv, IxDyn(&sshape), alpha).unwrap();
        let got = gg::index_add(&gog, dim, &ivg, &sshape, Scalar::Float(-2.5)).unwrap();
        close(
            &host::<T>(&got.source),
            &as_f64(&want.source),
            0.0,
            &format!("{what}: index_add"),
        );
        let want = gather::grad::index_copy(&go, dim, &iv, IxDyn(&sshape)).unwrap();
        let got = gg::index_copy(&gog, dim, &ivg, &sshape).unwrap();
        close(
            &host::<T>(&got.input),
            &as_f64(&want.input),
            0.0,
            &format!("{what}: index_copy"),
        );
        close(
            &host::<T>(&got.source),
            &as_f64(&want.source),
            0.0,
            &format!("{what}: index_copy source"),
        );
        let want = gather::grad::index_fill(&go, dim, &iv).unwrap();
        let got = gg::index_fill(&gog, dim, &ivg).unwrap();
        close(
            &host::<T>(&got),
            &as_f64(&want),
            0.0,
            &format!("{what}: index_fill"),
        );
        let sg2 = up(g, &source);
        for r in [Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin] {
            let include_self = case % 2 == 0;
            let out = gather::index_reduce(&x, dim, &iv, &source, r, include_self).unwrap();
            let outg = gather_cuda::index_reduce(&xg, dim, &ivg, &sg2, r, include_self).unwrap();
            let want = gather::grad::index_reduce_with(
                &go,
                &x,
                dim,
                &iv,
                &source,
                r,
                include_self,
                &out,
                Parity::Correct,
            )
            .unwrap();
            let got = gg::index_reduce_with(
                &gog,
                &xg,
                dim,
                &ivg,
                &sg2,
                r,
                include_self,
                &outg,
                Parity::Correct,
            )
            .unwrap();
            close(
                &host::<T>(&got.input),
                &as_f64(&want.input),
                tol,
                &format!("{what}: index_reduce {r:?}"),
            );
            close(
                &host::<T>(&got.source),
                &as_f64(&want.source),
                tol,
                &format!("{what}: index_reduce {r:?} source"),
            );
        }
        // take and put over the flat positions, negative values wrapping.
        let len: usize = shape.iter().product();
        let flat = index(rng, &ishape, 2 * len).mapv(|v| v - len as i64);
        let fg = up(g, &flat);
        let want = gather::grad::take(&gi, IxDyn(&shape), &flat).unwrap();
        let got = gg::take(&gig, &shape, &fg).unwrap();
        close(
            &host::<T>(&got),
            &as_f64(&want),
            tol,
            &format!("{what}: take"),
        );
        for accumulate in [true, false] {
            let want = gather::grad::put(&go, &flat, IxDyn(&ishape), accumulate).unwrap();
            let got = gg::put(&gog, &fg, &ishape, accumulate).unwrap();
            close(
                &host::<T>(&got.input),
                &as_f64(&want.input),
                0.0,
                &format!("{what}: put {accumulate}"),
            );
            close(
                &host::<T>(&got.source),
                &as_f64(&want.source),
                0.0,
                &format!("{what}: put source"),
            );
        }
        // take_along_dim with the input broadcast on a size-1 axis.
        let mut bshape = shape.clone();
        let wide = (0..nd).find(|&a| a != d);
        if let Some(a) = wide {
            bshape[a] = 1;
        }
        let mut ashape = shape.clone();
        ashape[d] = ishape[d];
        let along = index(rng, &ashape, 2 * shape[d]).mapv(|v| v - shape[d] as i64);
        let gl = values(rng, &ashape, f);
        let want = gather::grad::take_along_dim(&gl, IxDyn(&bshape), &along, Some(dim)).unwrap();
        let got = gg::take_along_dim(&up(g, &gl), &bshape, &up(g, &along), Some(dim)).unwrap();
        close(
            &host::<T>(&got),
            &as_f64(&want),
            tol,
            &format!("{what}: take_along_dim"),
        );
        // sort and topk: the values' gradient back where each value came from.
        let (_, idx) = gather::sort(&x, dim, false, true).unwrap();
        let want = gather::grad::sort(&go, IxDyn(&shape), dim, &idx).unwrap();
        let got = gg::sort(&gog, &shape, dim, &up(g, &idx)).unwrap();
        close(
            &host::<T>(&got),
            &as_f64(&want),
            0.0,
            &format!("{what}: sort"),
        );
        // masked_select and masked_scatter, the input broadcast along a size-1 axis.
        let m = values(rng, &shape, |v| v % 3 == 0);
        let count = m.iter().filter(|&&v| v).count();
        let (mg, gm) = (up(g, &m), values(rng, &[count], f));
        let want = gather::grad::masked_select(&gm, IxDyn(&bshape), &m).unwrap();
        let got = gg::masked_select(&up(g, &gm), &bshape, &mg).unwrap();
        close(
            &host::<T>(&got),
            &as_f64(&want),
            tol,
            &format!("{what}: masked_select"),
        );
        let want =
            gather::grad::masked_scatter(&go, IxDyn(&bshape), &m, IxDyn(&[count + 2])).unwrap();
        let got = gg::masked_scatter(&gog, &bshape, &mg, &[count + 2]).unwrap();
        close(
            &host::<T>(&got.input),
            &as_f64(&want.input),
            tol,
            &format!("{what}: masked_scatter"),
        );
        close(
            &host::<T>(&got.source),
            &as_f64(&want.source),
            0.0,
            &format!("{what}: masked_scatter source"),
        );
        // repeat_interleave along d with counts 0..=2, and a scalar count on the flattening.
        let reps = index(rng, &[shape[d]], 3);
        let total = reps.sum() as usize;
        let mut rshape = shape.clone();
        rshape[d] = total;
        let gr = values(rng, &rshape, f);
        let want = gather::grad::repeat_interleave(&gr, IxDyn(&shape), &reps, Some(dim)).unwrap();
        let got = gg::repeat_interleave(&up(g, &gr), &shape, &up(g, &reps), Some(dim)).unwrap();
        close(
            &host::<T>(&got),
            &as_f64(&want),
            tol,
            &format!("{what}: repeat_interleave"),
        );
        let gr = values(rng, &[2 * len], f);
        let want = gather::grad::repeat_interleave_scalar(&gr, IxDyn(&shape), 2, None).unwrap();
        let got = gg::repeat_interleave_scalar(&up(g, &gr), &shape, 2, None).unwrap();
        close(
            &host::<T>(&got),
            &as_f64(&want),
            tol,
            &format!("{what}: repeat_interleave scalar"),
        );
        // select_batched: a plain index along d, and one batched over axis 0 when d > 0.
        let want = gather::grad::select_batched(&gsel, IxDyn(&shape), dim, &iv, 0).unwrap();
        let got = gg::select_batched(&up(g, &gsel), &shape, dim, &ivg, 0).unwrap();
        close(
            &host::<T>(&got),
            &as_f64(&want),
            tol,
            &format!("{what}: select_batched"),
        );
        if d > 0 {
            let bi = index(rng, &[shape[0], 3], shape[d]);
            let mut oshape = shape.clone();
            oshape[d] = 3;
            let gb = values(rng, &oshape, f);
            let want = gather::grad::select_batched(&gb, IxDyn(&shape), dim, &bi, 1).unwrap();
            let got = gg::select_batched(&up(g, &gb), &shape, dim, &up(g, &bi), 1).unwrap();
            close(
                &host::<T>(&got),
                &as_f64(&want),
                tol,
                &format!("{what}: select_batched batched"),
            );
        }
    }
}

#[test]
fn gradients_equal_the_cpu_librarys() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(11);
    check_grads::<f64>(&g, &mut rng, |v| v as f64 / 8.0, 1e-12);
    check_grads::<f32>(&g, &mut rng, |v| v as f32 / 8.0, 1e-5);
    check_grads::<f16>(&g, &mut rng, |v| f16::from_f32(v as f32 / 8.0), 4e-3);
    check_grads::<bf16>(&g, &mut rng, |v| bf16::from_f32(v as f32 / 8.0), 3e-2);
}

#[test]
fn gradients_of_ints_are_the_cpu_librarys_error() {
    let Some(g) = gpu() else { return };
    let x = up(&g, &ArrayD::<i64>::zeros(IxDyn(&[2])));
    let i = up(&g, &ArrayD::<i64>::zeros(IxDyn(&[2])));
    let e = gather_cuda::grad::gather(&x, &[3], 0, &i).unwrap_err();
    assert!(e.to_string().contains("floating-point"), "{e}");
}

/// Both gradients of a pair (input, src or source), or the same error.
fn same_pair(
    got: gather_cuda::Result<(CudaTensor, CudaTensor)>,
    want: gather::Result<(ArrayD<f64>, ArrayD<f64>)>,
    what: &str,
) {
    match (got, want) {
        (Ok((a, b)), Ok((c, d))) => {
            close(&host::<f64>(&a), &c, 1e-12, &format!("{what}: input"));
            close(&host::<f64>(&b), &d, 1e-12, &format!("{what}: src"));
        }
        (got, want) => same_outcome(got.map(|p| p.0), want.map(|p| p.0), 0.0, what),
    }
}

/// `gather_cuda::grad::GradOptions` against `gather::grad::GradOptions`: every method under
/// every policy (the ones a method refuses give the same error), and the broadcasting forms.
#[test]
fn gradients_under_options_equal_the_cpu_librarys() {
    use gather::OutOfBounds::{Clip, Drop, Fill, Wrap};
    use gather::grad::Parity;
    let Some(gpu_) = gpu() else { return };
    let g = &gpu_;
    let mut rng = Rng(12);
    let rng = &mut rng;
    let f = |v: i64| (v % 5) as f64 / 4.0;
    for case in 0..cases(20) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(5)).collect();
        let d = rng.below(nd);
        let dim = d as isize;
        let ishape: Vec<usize> = (0..nd)
            .map(|a| {
                if a == d {
                    1 + rng.below(6)
                } else {
                    1 + rng.below(shape[a])
                }
            })
            .collect();
        let x = values(rng, &shape, f);
        let i = wild_index(rng, &ishape, shape[d]);
        let src = values(rng, &ishape, f);
        let gx = values(rng, &shape, f);
        let gi = values(rng, &ishape, f);
        let k = 1 + rng.below(5);
        let ids = wild_index(rng, &[k], shape[d]);
        let mut rows = shape.clone();
        rows[d] = ids.len();
        let source = values(rng, &rows, f);
        let grows = values(rng, &rows, f);
        let len: usize = shape.iter().product();
        let flat = wild_index(rng, &ishape, len);
        let (xg, ig, sg, gxg, gig) = (up(g, &x), up(g, &i), up(g, &src), up(g, &gx), up(g, &gi));
        let (idg, sog, grg, fg) = (up(g, &ids), up(g, &source), up(g, &grows), up(g, &flat));
        let sh = IxDyn(&shape);
        for p in [Wrap, Clip, Fill(Scalar::Float(3.5)), Drop] {
            let cpu = gather::Options::new()
                .bounds(p.map(|v| f64::from_scalar(v).unwrap()))
                .grad();
            let gpu = gather_cuda::Options::new().bounds(p).grad();
            let what = |op: &str| {
                format!(
                    "case {case}: {op} {shape:?} dim {d} index {i} policy {}",
                    p.name()
                )
            };
            same_outcome(
                gpu.gather(&gig, &shape, dim, &ig),
                cpu.gather(&gi, sh.clone(), dim, &i),
                1e-12,
                &what("gather"),
            );
            same_outcome(
                gpu.take(&gig, &shape, &fg),
                cpu.take(&gi, sh.clone(), &flat),
                1e-12,
                &what("take"),
            );
            let gl = values(rng, &[flat.len()], f);
            same_outcome(
                gpu.take_along_dim(&up(g, &gl), &shape, &fg, None),
                cpu.take_along_dim(&gl, sh.clone(), &flat, None),
                1e-12,
                &what("take_along_dim None"),
            );
            same_outcome(
                gpu.index_select(&grg, &shape, dim, &idg),
                cpu.index_select(&grows, sh.clone(), dim, &ids),
                1e-12,
                &what("index_select"),
            );
            same_pair(
                gpu.scatter_add(&gxg, dim, &ig, &ishape)
                    .map(|r| (r.input, r.src)),
                cpu.scatter_add(&gx, dim, &i, IxDyn(&ishape))
                    .map(|r| (r.input, r.src)),
                &what("scatter_add"),
            );
            same_pair(
                gpu.scatter(&gxg, dim, &ig, &ishape)
                    .map(|r| (r.input, r.src)),
                cpu.scatter(&gx, dim, &i, IxDyn(&ishape))
                    .map(|r| (r.input, r.src)),
                &what("scatter"),
            );
            // The parity holds under a policy as without one (PyTorch's tie bug needs include_self
            // false).
            let incl = case % 2 == 0;
            for parity in [Parity::Correct, Parity::PyTorch] {
                let (cpu, gpu) = (cpu.parity(parity), gpu.parity(parity));
                for r in REDUCES {
                    same_pair(
                        gpu.scatter_reduce(&gxg, &xg, dim, &ig, &sg, r, incl)
                            .map(|r| (r.input, r.src)),
                        cpu.scatter_reduce(&gx, &x, dim, &i, &src, r, incl)
                            .map(|r| (r.input, r.src)),
                        &what(&format!("scatter_reduce {r:?} {incl} {parity:?}")),
                    );
                }
                for r in [Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin] {
                    same_pair(
                        gpu.index_reduce(&gxg, &xg, dim, &idg, &sog, r, incl)
                            .map(|r| (r.input, r.source)),
                        cpu.index_reduce(&gx, &x, dim, &ids, &source, r, incl)
                            .map(|r| (r.input, r.source)),
                        &what(&format!("index_reduce {r:?} {incl} {parity:?}")),
                    );
                }
            }
            same_pair(
                gpu.index_add(&gxg, dim, &idg, &rows, Scalar::Float(1.5))
                    .map(|r| (r.input, r.source)),
                cpu.index_add(&gx, dim, &ids, IxDyn(&rows), 1.5)
                    .map(|r| (r.input, r.source)),
                &what("index_add"),
            );
            same_pair(
                gpu.index_copy(&gxg, dim, &idg, &rows)
                    .map(|r| (r.input, r.source)),
                cpu.index_copy(&gx, dim, &ids, IxDyn(&rows))
                    .map(|r| (r.input, r.source)),
                &what("index_copy"),
            );
            same_outcome(
                gpu.index_fill(&gxg, dim, &idg),
                cpu.index_fill(&gx, dim, &ids),
                1e-12,
                &what("index_fill"),
            );
            for acc in [true, false] {
                same_pair(
                    gpu.put(&gxg, &fg, &ishape, acc)
                        .map(|r| (r.input, r.source)),
                    cpu.put(&gx, &flat, IxDyn(&ishape), acc)
                        .map(|r| (r.input, r.source)),
                    &what(&format!("put {acc}")),
                );
            }
        }
        // Broadcasting: an index of size 1 off dim, src of size 1 on the last axis.
        let mut bshape = shape.clone();
        for (a, n) in bshape.iter_mut().enumerate() {
            if a != d {
                *n = 1;
            }
        }
        bshape[d] = 1 + rng.below(4);
        let bi = index(rng, &bshape, shape[d]);
        let mut e = shape.clone();
        e[d] = bshape[d];
        let mut sshape = e.clone();
        let last = nd - 1;
        sshape[last] = 1;
        let bsrc = values(rng, &sshape, f);
        let gout = values(rng, &e, f);
        let cpu = gather::Options::new().broadcast(true).grad();
        let gpu = gather_cuda::Options::new().broadcast(true).grad();
        let what =
            |op: &str| format!("case {case}: broadcast {op} {shape:?} dim {d} index {bshape:?}");
        let (big, bsg) = (up(g, &bi), up(g, &bsrc));
        same_outcome(
            gpu.gather(&up(g, &gout), &shape, dim, &big),
            cpu.gather(&gout, sh.clone(), dim, &bi),
            1e-12,
            &what("gather"),
        );
        same_pair(
            gpu.scatter_add(&gxg, dim, &big, &sshape)
                .map(|r| (r.input, r.src)),
            cpu.scatter_add(&gx, dim, &bi, IxDyn(&sshape))
                .map(|r| (r.input, r.src)),
            &what("scatter_add"),
        );
        same_pair(
            gpu.scatter(&gxg, dim, &big, &sshape)
                .map(|r| (r.input, r.src)),
            cpu.scatter(&gx, dim, &bi, IxDyn(&sshape))
                .map(|r| (r.input, r.src)),
            &what("scatter"),
        );
        for r in REDUCES {
            same_pair(
                gpu.scatter_reduce(&gxg, &xg, dim, &big, &bsg, r, false)
                    .map(|r| (r.input, r.src)),
                cpu.scatter_reduce(&gx, &x, dim, &bi, &bsrc, r, false)
                    .map(|r| (r.input, r.src)),
                &what(&format!("scatter_reduce {r:?}")),
            );
        }
        same_pair(
            gpu.parity(Parity::PyTorch)
                .scatter_reduce(&gxg, &xg, dim, &big, &bsg, Reduce::Amax, false)
                .map(|r| (r.input, r.src)),
            cpu.parity(Parity::PyTorch)
                .scatter_reduce(&gx, &x, dim, &bi, &bsrc, Reduce::Amax, false)
                .map(|r| (r.input, r.src)),
            &what("scatter_reduce with PyTorch's parity"),
        );
    }
}

/// The gradients of the group reductions, the softmaxes and the arg-reductions, over groups and
/// over segments (offsets that leave positions out, lengths, ids), against `gather::grad`.
#[test]
fn gradients_of_the_group_and_segment_ops_equal_the_cpu_librarys() {
    use gather::ops::reduce::{ArgReduce, EmptyFill, GroupOptions, GroupReduce};
    use gather_cuda::grad as gg;
    let Some(gpu_) = gpu() else { return };
    let g = &gpu_;
    let mut rng = Rng(13);
    let rng = &mut rng;
    let reduces = [
        GroupReduce::Sum,
        GroupReduce::Prod,
        GroupReduce::Mean,
        GroupReduce::Amax,
        GroupReduce::Amin,
        GroupReduce::First,
        GroupReduce::Last,
        GroupReduce::LogSumExp,
        GroupReduce::Var { correction: 1 },
        GroupReduce::Std { correction: 0 },
    ];
    // Small integers: ties for amax/amin, zeros for prod.
    let f = |v: i64| (v % 4) as f64 / 2.0;
    for case in 0..cases(20) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(6)).collect();
        let d = rng.below(nd);
        let dim = d as isize;
        let groups = 1 + rng.below(4);
        let ishape: Vec<usize> = if case % 2 == 0 {
            vec![1 + rng.below(shape[d])]
        } else {
            shape.iter().map(|&n| 1 + rng.below(n)).collect()
        };
        let i = index(rng, &ishape, groups);
        let x = values(rng, &shape, f);
        let (xg, ig) = (up(g, &x), up(g, &i));
        let what = format!("case {case}: {shape:?} dim {d} index {i}");
        let mut oshape = shape.clone();
        oshape[d] = groups;
        let go = values(rng, &oshape, f);
        let gog = up(g, &go);
        for r in reduces {
            let opts = GroupOptions::<f64>::default().dim_size(groups);
            let out = gather::ops::reduce::scatter_groups(&x, dim, &i, r, opts).unwrap();
            let want = gather::grad::scatter_groups(&go, &x, dim, &i, r, &out);
            let got = gg::scatter_groups(&gog, &xg, dim, &ig, r, &up(g, &out));
            same_outcome(got, want, 1e-9, &format!("{what} scatter_groups {r:?}"));
        }
        // Softmax: an index of src's full shape.
        let full = index(rng, &shape, groups);
        let fg = up(g, &full);
        for log in [false, true] {
            let gy = values(rng, &shape, f);
            let (want, got) = if log {
                let y = gather::ops::reduce::scatter_log_softmax(&x, dim, &full).unwrap();
                (
                    gather::grad::scatter_log_softmax(&gy, &y, dim, &full),
                    gg::scatter_log_softmax(&up(g, &gy), &up(g, &y), dim, &fg),
                )
            } else {
                let y = gather::ops::reduce::scatter_softmax(&x, dim, &full).unwrap();
                (
                    gather::grad::scatter_softmax(&gy, &y, dim, &full),
                    gg::scatter_softmax(&up(g, &gy), &up(g, &y), dim, &fg),
                )
            };
            same_outcome(got, want, 1e-9, &format!("{what} softmax log {log}"));
        }
        // scatter_reduce_arg, with an index of src's rank.
        if ishape.len() == nd {
            let idx2 = index(rng, &ishape, shape[d]);
            let src = values(rng, &ishape, f);
            let gx = values(rng, &shape, f);
            for (red, incl) in [(ArgReduce::Amax, true), (ArgReduce::Amin, false)] {
                let (_, arg) =
                    gather::ops::reduce::scatter_reduce_arg(&x, dim, &idx2, &src, red, incl)
                        .unwrap();
                let want = gather::grad::scatter_reduce_arg(&gx, &arg, dim, &idx2, IxDyn(&ishape))
                    .map(|r| (r.input, r.src));
                let got =
                    gg::scatter_reduce_arg(&up(g, &gx), &up(g, &arg), dim, &up(g, &idx2), &ishape)
                        .map(|r| (r.input, r.src));
                same_pair(got, want, &format!("{what} scatter_reduce_arg {red:?}"));
            }
        }
        // Segments along d: offsets leaving the first position out, lengths, ids.
        let n = shape[d];
        let cut = (n / 2).max(1);
        let offsets = ndarray::arr1(&[n.min(1) as i64, cut as i64, n as i64]);
        let lengths = ndarray::arr1(&[cut as i64, (n - cut) as i64]);
        let ids = ndarray::Array1::from_iter((0..n).map(|p| (p >= cut) as i64));
        let up1 = |a: &ndarray::Array1<i64>| up(g, &a.clone().into_dyn());
        let (og_, lg_, idg_) = (up1(&offsets), up1(&lengths), up1(&ids));
        let mut sshape = shape.clone();
        sshape[d] = 2;
        let gs = values(rng, &sshape, f);
        let gsg = up(g, &gs);
        for (k, (cpu, gpu)) in [
            (
                gather::Segments::offsets(&offsets),
                gather_cuda::Segments::Offsets(&og_),
            ),
            (
                gather::Segments::lengths(&lengths),
                gather_cuda::Segments::Lengths(&lg_),
            ),
            (
                gather::Segments::ids(&ids),
                gather_cuda::Segments::ids(&idg_),
            ),
        ]
        .into_iter()
        .enumerate()
        {
            for r in reduces {
                let out = gather::ops::segment::segment_reduce(
                    &x,
                    dim,
                    cpu.clone(),
                    r,
                    EmptyFill::Identity,
                )
                .unwrap();
                let want = gather::grad::segment_reduce(&gs, &x, dim, cpu.clone(), r, &out);
                let got = gg::segment_reduce(&gsg, &xg, dim, gpu, r, &up(g, &out));
                same_outcome(got, want, 1e-9, &format!("{what} segments {k} {r:?}"));
            }
            let (_, arg) = gather::ops::segment::segment_arg_reduce(
                &x,
                dim,
                cpu.clone(),
                ArgReduce::Amax,
                EmptyFill::Zero,
            )
            .unwrap();
            let want = gather::grad::segment_arg_reduce(&gs, &arg, dim, IxDyn(&shape));
            let got = gg::segment_arg_reduce(&gsg, &up(g, &arg), dim, &shape);
            same_outcome(got, want, 0.0, &format!("{what} segments {k} arg"));
            if k > 0 {
                // Softmax needs every position in a segment: lengths and ids.
                let y = gather::ops::segment::segment_softmax(&x, dim, cpu.clone()).unwrap();
                let gy = values(rng, &shape, f);
                let want = gather::grad::segment_softmax(&gy, &y, dim, cpu.clone());
                let got = gg::segment_softmax(&up(g, &gy), &up(g, &y), dim, gpu);
                same_outcome(got, want, 1e-9, &format!("{what} segments {k} softmax"));
            }
        }
    }
}

/// `Options::deterministic(false)`: scatter_add and scatter_reduce by device atomics equal the
/// CPU library's (integers exactly, floats within rounding), with the same errors, under
/// broadcasting and under a bounds policy too.
#[test]
fn atomic_scatter_add_equals_the_cpu_library() {
    use gather::OutOfBounds::{Drop, Error, Wrap};
    let Some(gpu_) = gpu() else { return };
    let g = &gpu_;
    let mut rng = Rng(14);
    let rng = &mut rng;
    for case in 0..cases(30) {
        let nd = 1 + rng.below(3);
        let shape: Vec<usize> = (0..nd).map(|_| 1 + rng.below(6)).collect();
        let d = rng.below(nd);
        let dim = d as isize;
        let ishape: Vec<usize> = (0..nd)
            .map(|a| {
                if a == d {
                    1 + rng.below(40)
                } else {
                    1 + rng.below(shape[a])
                }
            })
            .collect();
        let i = wild_index(rng, &ishape, shape[d]);
        let xf = values(rng, &shape, |v| v as f32 / 8.0);
        let sf = values(rng, &ishape, |v| v as f32 / 8.0);
        let xi = values(rng, &shape, |v| v * 1_000_003);
        let si = values(rng, &ishape, |v| v * 1_000_003);
        let ig = up(g, &i);
        for p in [Error, Wrap, Drop] {
            let gpu = gather_cuda::Options::new().bounds(p).deterministic(false);
            let what = format!(
                "case {case}: {shape:?} dim {d} index {i} policy {}",
                p.name()
            );
            same_outcome(
                gpu.scatter_add(&up(g, &xf), dim, &ig, &up(g, &sf)),
                gather::Options::new()
                    .bounds(p.map(|_| 0.0f32))
                    .scatter_add(&xf, dim, &i, &sf),
                1e-5,
                &format!("{what} f32"),
            );
            same_outcome(
                gpu.scatter_add(&up(g, &xi), dim, &ig, &up(g, &si)),
                gather::Options::new()
                    .bounds(p.map(|_| 0i64))
                    .scatter_add(&xi, dim, &i, &si),
                0.0,
                &format!("{what} i64"),
            );
        }
        // Every reduction with and without self, in range (the atomic and sorted paths agree
        // up to a float sum's rounding; amax/amin exactly, up to the sign of a zero).
        let ir = index(rng, &ishape, shape[d]);
        let irg = up(g, &ir);
        // Small factors: no product overflows, in any order.
        let sf = values(rng, &ishape, |v| (v % 5) as f32 / 2.0);
        for r in REDUCES {
            for incl in [true, false] {
                let gpu = gather_cuda::Options::new().deterministic(false);
                let what = format!("case {case}: {shape:?} dim {d} {r:?} include_self {incl}");
                same_outcome(
                    gpu.scatter_reduce(&up(g, &xf), dim, &irg, &up(g, &sf), r, incl),
                    gather::scatter_reduce(&xf, dim, &ir, &sf, r, incl),
                    1e-4,
                    &format!("{what} f32"),
                );
                same_outcome(
                    gpu.scatter_reduce(&up(g, &xi), dim, &irg, &up(g, &si), r, incl),
                    gather::scatter_reduce(&xi, dim, &ir, &si, r, incl),
                    0.0,
                    &format!("{what} i64"),
                );
            }
        }
        // Broadcasting: [k, 1, ..] row ids into whole rows.
        let mut bshape = vec![1; nd];
        bshape[d] = 1 + rng.below(30);
        let bi = index(rng, &bshape, shape[d]);
        let mut e = shape.clone();
        e[d] = bshape[d];
        let bs = values(rng, &e, |v| v as f64 / 8.0);
        let xd = values(rng, &shape, |v| v as f64);
        let want = gather::Options::new()
            .broadcast(true)
            .scatter_add(&xd, dim, &bi, &bs);
        let got = gather_cuda::Options::new()
            .broadcast(true)
            .deterministic(false)
            .scatter_add(&up(g, &xd), dim, &up(g, &bi), &up(g, &bs));
        same_outcome(
            got,
            want,
            1e-12,
            &format!("case {case}: broadcast {bshape:?} into {shape:?}"),
        );
    }
}

// ---- scatter plans ----

/// Bit patterns, to compare results exactly (NaN included).
fn bits<T: Element>(a: &ArrayD<T>) -> Vec<u64> {
    a.iter().map(|v| v.to_f64().to_bits()).collect()
}

/// (positions, rows, dst's shape after dim 0, src's shape after dim 0)
type PlanCase = (usize, usize, Vec<usize>, Vec<usize>);

/// Each plan is applied to two srcs (one with GATHER_CUDA_QUICK), with every reduction both
/// ways (with GATHER_CUDA_QUICK two a case, in turn): bitwise the GPU op with the index
/// expanded over src's shape, and the CPU library's result (exactly where `exact`, else within
/// 1e-2).
fn check_plans<T: Element>(
    g: &Cuda,
    rng: &mut Rng,
    f: impl Fn(i64) -> T + Copy,
    exact: bool,
    cases: &[PlanCase],
) {
    for (case, (e, v, dtail, stail)) in cases.iter().enumerate() {
        let (e, v) = (*e, *v);
        let ids = index(rng, &[e], v);
        let plan = gather_cuda::ScatterPlan::new(&up(g, &ids), v).unwrap();
        assert_eq!((plan.len(), plan.size()), (e, v));
        let dshape: Vec<usize> = std::iter::once(v).chain(dtail.iter().copied()).collect();
        let sshape: Vec<usize> = std::iter::once(e).chain(stail.iter().copied()).collect();
        let mut column = vec![1usize; sshape.len()];
        column[0] = e;
        let ids_col = ids.clone().into_shape_with_order(IxDyn(&column)).unwrap();
        let full = ids_col.broadcast(IxDyn(&sshape)).unwrap().to_owned();
        let iv = up(g, &ids_col).broadcast(&sshape).unwrap();
        let dst = values(rng, &dshape, f);
        let dg = up(g, &dst);
        for round in 0..if quick() { 1 } else { 2 } {
            let src = values(rng, &sshape, f);
            let sg = up(g, &src);
            let what = format!(
                "{} plan of {e} into {dshape:?}, src {sshape:?}, round {round}",
                T::DTYPE
            );
            let got = plan.scatter_add(&dg, &sg).unwrap().to_host::<T>().unwrap();
            let op = gather_cuda::scatter_add(&dg, 0, &iv, &sg).unwrap();
            assert!(
                bits(&got) == bits(&op.to_host::<T>().unwrap()),
                "{what}: scatter_add"
            );
            for (k, r) in REDUCES.into_iter().enumerate() {
                let skip = quick() && (k + 5 - case % 5) % 5 >= 2;
                if skip || (T::DTYPE == gather::DType::Bool && r == Reduce::Mean) {
                    continue;
                }
                for include_self in [true, false] {
                    let w = format!("{what}: {r:?} include_self {include_self}");
                    let got = plan
                        .scatter_reduce(&dg, &sg, r, include_self)
                        .unwrap()
                        .to_host::<T>()
                        .unwrap();
                    let op = gather_cuda::scatter_reduce(&dg, 0, &iv, &sg, r, include_self)
                        .unwrap()
                        .to_host::<T>()
                        .unwrap();
                    assert!(bits(&got) == bits(&op), "{w}: not the op's bits");
                    let want =
                        gather::scatter_reduce(&dst, 0, &full, &src, r, include_self).unwrap();
                    let tol = if exact || matches!(r, Reduce::Amax | Reduce::Amin) {
                        0.0
                    } else {
                        1e-2
                    };
                    close(&as_f64(&got), &as_f64(&want), tol, &w);
                }
            }
        }
    }
}

#[test]
fn scatter_plans_are_bitwise_the_op_for_every_sort_and_fold() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(77);
    let v = |a: &[usize]| a.to_vec();
    let f32_cases: Vec<PlanCase> = vec![
        // The row kernel on the counting sort's runs, writing whole rows (no copy of dst).
        (3000, 500, v(&[64]), v(&[64])),
        // The row kernel into part of each row (dst copied first).
        (3000, 500, v(&[20]), v(&[16])),
        // Far more rows than positions: the radix sort's runs.
        (2500, 100_000, v(&[32]), v(&[32])),
        // Runs past the counting sort's 4096 rows: the radix sort after the counting one.
        (9000, 2, v(&[16]), v(&[16])),
        // Runs past 32 and past 128 rows, sorted by a block.
        (6000, 20, v(&[16]), v(&[16])),
        // 1-d: a thread per run.
        (4000, 40, v(&[]), v(&[])),
        // The general fold: lanes that are not one contiguous walk of dst.
        (1500, 300, v(&[3, 5]), v(&[2, 5])),
        // More than 128 lanes: a warp per run.
        (1200, 50, v(&[200]), v(&[200])),
    ];
    check_plans::<f32>(&g, &mut rng, |v| v as f32 / 64.0, false, &f32_cases);
    let small: Vec<PlanCase> = vec![
        (3000, 500, v(&[16]), v(&[16])),
        (2500, 100_000, v(&[17]), v(&[17])),
        (700, 30, v(&[4]), v(&[3])),
    ];
    check_plans::<f64>(&g, &mut rng, |v| v as f64 / 64.0, false, &small);
    check_plans::<f16>(
        &g,
        &mut rng,
        |v| f16::from_f32(v as f32 / 256.0),
        false,
        &small,
    );
    check_plans::<i64>(&g, &mut rng, |v| v * 123_456_789, true, &small);
    check_plans::<i32>(&g, &mut rng, |v| v as i32, true, &small);
    check_plans::<u8>(&g, &mut rng, |v| v as u8, true, &small);
    check_plans::<bool>(&g, &mut rng, |v| v % 3 == 0, true, &small);
}

#[test]
fn scatter_plans_take_strided_views_and_an_i32_index() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(78);
    let (e, rows, cols) = (2000usize, 300usize, 24usize);
    // Every other value of an i32 index; src stored transposed.
    let wide = index(&mut rng, &[2 * e], rows).mapv(|x| x as i32);
    let ids = wide.slice(ndarray::s![..;2]).to_owned().into_dyn();
    let ig = up(&g, &wide.clone().into_dyn())
        .slice_axis(0, 0, 2 * e, 2)
        .unwrap();
    let plan = gather_cuda::ScatterPlan::new(&ig, rows).unwrap();
    let src_t = values(&mut rng, &[cols, e], |v| v as f32 / 8.0);
    let src = src_t.t().to_owned();
    let sg = up(&g, &src_t).permuted_axes(&[1, 0]).unwrap();
    let dst = values(&mut rng, &[rows, cols], |v| v as f32);
    let dg = up(&g, &dst);
    let col = ids
        .mapv(i64::from)
        .into_shape_with_order(IxDyn(&[e, 1]))
        .unwrap();
    let full = col.broadcast(IxDyn(&[e, cols])).unwrap().to_owned();
    for r in [Reduce::Sum, Reduce::Amax] {
        let got = plan
            .scatter_reduce(&dg, &sg, r, true)
            .unwrap()
            .to_host::<f32>()
            .unwrap();
        let want = gather::scatter_reduce(&dst, 0, &full, &src, r, true).unwrap();
        close(
            &as_f64(&got),
            &as_f64(&want),
            1e-4,
            &format!("strided plan {r:?}"),
        );
    }
}

#[test]
fn scatter_plan_errors_are_the_cpu_plans() {
    let Some(g) = gpu() else { return };
    let cpu_err = |e: gather::Error| e;
    // A value out of range, and any value into an empty dimension.
    for (ids, size) in [(vec![0i64, 5, 1, 9], 4usize), (vec![0, 1], 0)] {
        let a = ndarray::Array1::from(ids);
        let want = cpu_err(gather::ScatterPlan::new(&a, size).unwrap_err());
        let got = gather_cuda::ScatterPlan::new(&up(&g, &a.into_dyn()), size).unwrap_err();
        assert_eq!(got.op().unwrap(), &want);
    }
    let a = ndarray::arr1(&[1i64, 1, 0]);
    let cpu = gather::ScatterPlan::new(&a, 2).unwrap();
    let plan = gather_cuda::ScatterPlan::new(&up(&g, &a.clone().into_dyn()), 2).unwrap();
    let z = |s: &[usize]| ArrayD::<f32>::zeros(IxDyn(s));
    let o = |s: &[usize]| ArrayD::<f32>::ones(IxDyn(s));
    for (dst, src, r) in [
        (z(&[3, 2]), o(&[3, 2]), Reduce::Sum), // dst has another number of rows
        (z(&[2, 2]), o(&[4, 2]), Reduce::Sum), // src another number of positions
        (z(&[2, 2]), o(&[3, 3]), Reduce::Amax), // src larger on dim 1
        (z(&[2, 2]), o(&[3, 2, 1]), Reduce::Sum), // another rank
        (z(&[]), o(&[3]), Reduce::Sum),        // 0-d dst
    ] {
        let want = cpu.scatter_reduce(&dst, &src, r, true).unwrap_err();
        let got = plan
            .scatter_reduce(&up(&g, &dst), &up(&g, &src), r, true)
            .unwrap_err();
        assert_eq!(
            got.op().unwrap(),
            &want,
            "dst {:?} src {:?}",
            dst.shape(),
            src.shape()
        );
    }
    let b = ArrayD::from_elem(IxDyn(&[2, 2]), true);
    let bs = ArrayD::from_elem(IxDyn(&[3, 2]), false);
    let want = cpu.scatter_reduce(&b, &bs, Reduce::Mean, true).unwrap_err();
    let got = plan
        .scatter_reduce(&up(&g, &b), &up(&g, &bs), Reduce::Mean, true)
        .unwrap_err();
    assert_eq!(got.op().unwrap(), &want);
    // dst and src of two dtypes; an index that is not 1-d, or not integers.
    let err = plan
        .scatter_add(
            &up(&g, &z(&[2, 2])),
            &up(&g, &ArrayD::<f64>::ones(IxDyn(&[3, 2]))),
        )
        .unwrap_err();
    assert_eq!(err.op().unwrap().kind(), gather::ErrorKind::InvalidArgument);
    let two_d = up(&g, &ArrayD::<i64>::zeros(IxDyn(&[2, 2])));
    let err = gather_cuda::ScatterPlan::new(&two_d, 3).unwrap_err();
    assert_eq!(err.op().unwrap().kind(), gather::ErrorKind::RankMismatch);
    assert!(gather_cuda::ScatterPlan::new(&up(&g, &z(&[3])), 3).is_err());
    // An empty plan leaves dst as it is.
    let empty =
        gather_cuda::ScatterPlan::new(&up(&g, &ArrayD::<i64>::zeros(IxDyn(&[0]))), 2).unwrap();
    assert!(empty.is_empty());
    let dst = ndarray::arr2(&[[1.0f32, 2.0], [3.0, 4.0]]).into_dyn();
    let out = empty
        .scatter_add(&up(&g, &dst), &up(&g, &z(&[0, 2])))
        .unwrap();
    assert_eq!(out.to_host::<f32>().unwrap(), dst);
}

// ---- every dtype by name ----

/// Values in `0..modulo` as `T`.
#[cfg(feature = "dynamic")]
fn small<T: Element>(rng: &mut Rng, shape: &[usize], modulo: i64) -> ArrayD<T> {
    values(rng, shape, |v| {
        T::from_scalar(Scalar::Int(v.rem_euclid(modulo))).unwrap()
    })
}

#[cfg(feature = "dynamic")]
fn small_tensor(rng: &mut Rng, shape: &[usize], dtype: gather::DType) -> gather::dynamic::Tensor {
    use gather::DType;
    use gather::dynamic::Tensor;
    match dtype {
        DType::Bool => Tensor::from(small::<bool>(rng, shape, 2)),
        DType::U8 => Tensor::from(small::<u8>(rng, shape, 4)),
        DType::I8 => Tensor::from(small::<i8>(rng, shape, 4)),
        DType::I16 => Tensor::from(small::<i16>(rng, shape, 4)),
        DType::I32 => Tensor::from(small::<i32>(rng, shape, 4)),
        DType::I64 => Tensor::from(small::<i64>(rng, shape, 4)),
        DType::U16 => Tensor::from(small::<u16>(rng, shape, 4)),
        DType::U32 => Tensor::from(small::<u32>(rng, shape, 4)),
        DType::U64 => Tensor::from(small::<u64>(rng, shape, 4)),
        DType::F16 => Tensor::from(small::<f16>(rng, shape, 4)),
        DType::BF16 => Tensor::from(small::<bf16>(rng, shape, 4)),
        DType::F32 => Tensor::from(small::<f32>(rng, shape, 4)),
        _ => Tensor::from(small::<f64>(rng, shape, 4)),
    }
}

/// The cases of the dtype sweeps: op, arguments and tensors (named as [`dtype_host`] names
/// them).
#[cfg(feature = "dynamic")]
fn dtype_cases() -> Vec<String> {
    let mut cases: Vec<String> = [
        "gather dim=1 input=x index=idx",
        "take input=x index=flat",
        "take_along_dim dim=1 input=x index=idx",
        "take_along_dim input=x index=idx",
        "index_select dim=0 input=x index=rows",
        "scatter dim=1 input=x index=idx src=s",
        "scatter dim=1 value=1 input=x index=idx",
        "scatter dim=1 reduce=add input=x index=idx src=s",
        "scatter dim=1 reduce=multiply input=x index=idx src=s",
        "scatter_add dim=1 input=x index=idx src=s",
        "index_add dim=0 alpha=2 input=x index=rows source=s_rows",
        "index_copy dim=0 input=x index=rows source=s_rows",
        "index_fill dim=0 value=1 input=x index=rows",
        "put accumulate=true input=x index=flat source=s_flat",
        "put accumulate=false input=x index=flat source=s_flat",
        "masked_select input=x mask=mask",
        "masked_scatter input=x mask=mask source=s",
        // A src narrower than the index, a source with fewer elements than the mask's trues.
        "scatter dim=1 input=x index=idx src=s_short",
        "scatter_add dim=1 input=x index=idx src=s_short",
        "masked_scatter input=x mask=mask source=s_none",
        "sort dim=1 input=x",
        "sort dim=1 descending=true input=x",
        "argsort dim=1 input=x",
        "topk k=2 dim=1 input=x",
        "repeat_interleave dim=1 input=x repeats=rep",
        "select_batched dim=1 batch_dims=1 input=x index=idx",
        "scatter_any dim=1 src=x index=groups",
        "scatter_all dim=1 src=x index=groups",
        "scatter_softmax dim=1 src=x index=groups",
        "scatter_log_softmax dim=1 src=x index=groups",
        "segment_arg_reduce dim=1 reduce=amax src=x offsets=offsets",
        "segment_any dim=1 src=x offsets=offsets",
        "segment_softmax dim=1 src=x offsets=offsets",
    ]
    .map(String::from)
    .to_vec();
    for r in ["sum", "prod", "mean", "amax", "amin"] {
        for incl in [true, false] {
            cases.push(format!(
                "scatter_reduce dim=1 reduce={r} include_self={incl} input=x index=idx src=s"
            ));
            // index_reduce has no sum: an error with a hint on both.
            cases.push(format!(
                "index_reduce dim=0 reduce={r} include_self={incl} input=x index=rows source=s_rows"
            ));
        }
    }
    for r in [
        "sum",
        "mean",
        "prod",
        "amax",
        "amin",
        "logsumexp",
        "var",
        "std",
        "first",
        "last",
    ] {
        cases.push(format!(
            "scatter_groups dim=1 reduce={r} src=x index=groups"
        ));
        cases.push(format!(
            "segment_reduce dim=1 reduce={r} src=x offsets=offsets"
        ));
    }
    for r in ["amax", "amin"] {
        cases.push(format!(
            "scatter_reduce_arg dim=1 reduce={r} include_self=false input=x index=idx src=s"
        ));
    }
    // The bounds policies, on indices with values out of range (and negative ones); negative
    // values in range without a policy, which some ops take and others refuse.
    let mut bounded = Vec::new();
    for case in &cases {
        let negative = case
            .replace("index=idx", "index=n_idx")
            .replace("index=rows", "index=n_rows")
            .replace("index=flat", "index=n_flat");
        if negative != *case {
            bounded.push(negative);
        }
        let wild = case
            .replace("index=idx", "index=w_idx")
            .replace("index=rows", "index=w_rows")
            .replace("index=flat", "index=w_flat");
        if wild == *case || case.starts_with("scatter_reduce_arg") {
            continue;
        }
        for policy in ["error", "wrap", "clip", "drop", "fill fill_value=2"] {
            bounded.push(format!("{wild} bounds={policy}"));
        }
    }
    cases.extend(bounded);
    // Broadcasting forms (an index of one row for x's three), the atomic folds, empty indices
    // and 0-d operands.
    cases.extend(
        [
            "gather_broadcast dim=1 input=x index=b_idx",
            "scatter_broadcast dim=1 input=x index=b_idx src=s_b",
            "scatter_add_broadcast dim=1 input=x index=b_idx src=s_b",
            "scatter_reduce_broadcast dim=1 reduce=amax include_self=false input=x index=b_idx src=s_b",
            "scatter_reduce_broadcast dim=1 reduce=mean input=x index=b_idx src=s_b",
            "scatter_add dim=1 deterministic=false input=x index=idx src=s",
            "scatter_reduce dim=1 reduce=amax deterministic=false input=x index=idx src=s",
            "scatter_reduce dim=1 reduce=prod include_self=false deterministic=false input=x index=idx src=s",
            "scatter_reduce dim=1 reduce=mean deterministic=false input=x index=idx src=s",
            "gather dim=1 input=x index=e_idx",
            "scatter_add dim=1 input=x index=e_idx src=s",
            "scatter_reduce dim=1 reduce=amin input=x index=e_idx src=s",
            "index_select dim=0 input=x index=e_rows",
            "index_reduce dim=0 reduce=amax input=x index=e_rows source=e_src",
            "take input=x index=e_rows",
            "gather dim=0 input=x0 index=i0",
            "take input=x0 index=i0",
            "scatter dim=0 input=x0 index=i0 src=x0",
            "scatter_reduce dim=0 reduce=prod input=x0 index=i0 src=x0",
            "index_select dim=0 input=x0 index=i0",
            "sort dim=0 input=x0",
            "topk k=1 dim=0 input=x0",
            // An empty input: only an empty index is valid for it.
            "take input=xe index=flat",
            "take input=xe index=e_rows",
            "take_along_dim input=xe index=flat",
            "take_along_dim input=xe index=e_rows",
            "put accumulate=true input=xe index=flat source=s_flat",
            "index_select dim=0 input=xe index=rows",
            "gather dim=0 input=xe index=idx",
        ]
        .map(String::from),
    );
    // Negative dims and dims out of range.
    for case in [
        "gather dim=D input=x index=idx",
        "scatter_add dim=D input=x index=idx src=s",
        "scatter_reduce dim=D reduce=amin input=x index=idx src=s",
        "index_select dim=D input=x index=rows",
        "index_fill dim=D value=1 input=x index=rows",
        "take_along_dim dim=D input=x index=idx",
        "sort dim=D input=x",
        "topk k=1 dim=D input=x",
        "repeat_interleave dim=D input=x repeats=rep",
        "scatter_groups dim=D reduce=sum src=x index=groups",
        "segment_reduce dim=D reduce=amax src=x offsets=offsets",
    ] {
        for d in ["-1", "-2", "2", "-3"] {
            cases.push(case.replace("dim=D", &format!("dim={d}")));
        }
    }
    // Indices of the other integer dtypes (and a float and a bool one, which are errors).
    for t in ["i32", "u8", "i16", "u64", "f32", "bool"] {
        for case in [
            "gather dim=1 input=x index=idx_T",
            "scatter_add dim=1 input=x index=idx_T src=s",
            "scatter_reduce dim=1 reduce=amax input=x index=idx_T src=s",
            "take_along_dim dim=1 input=x index=idx_T",
            "index_select dim=0 input=x index=rows_T",
            "index_add dim=0 input=x index=rows_T source=s_rows",
            "take input=x index=rows_T",
            "take input=xe index=rows_T",
            "take_along_dim input=xe index=rows_T",
            "put input=x index=rows_T source=s_rows_flat",
        ] {
            cases.push(case.replace('T', t));
        }
    }
    cases
}

#[cfg(feature = "dynamic")]
const DTYPES: [gather::DType; 13] = {
    use gather::DType::*;
    [
        Bool, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64,
    ]
};

/// The arrays of the dtype sweeps: data in `dtype`, indices, a mask, offsets and repeats.
#[cfg(feature = "dynamic")]
fn dtype_host(rng: &mut Rng, dtype: gather::DType) -> gather::dynamic::Tensors {
    use gather::dynamic::Tensor;
    let i64s = |shape: &[usize], v: &[i64]| {
        Tensor::from(ArrayD::from_shape_vec(IxDyn(shape), v.to_vec()).unwrap())
    };
    [
        ("x", small_tensor(rng, &[3, 4], dtype)),
        ("s", small_tensor(rng, &[3, 4], dtype)),
        ("s_rows", small_tensor(rng, &[2, 4], dtype)),
        ("s_flat", small_tensor(rng, &[5], dtype)),
        ("idx", Tensor::from(index(rng, &[3, 2], 4))),
        ("groups", Tensor::from(index(rng, &[3, 4], 3))),
        ("rows", i64s(&[2], &[2, 0])),
        ("b_idx", i64s(&[1, 2], &[3, 0])),
        ("s_rows_flat", small_tensor(rng, &[2], dtype)),
        (
            "idx_i32",
            Tensor::from(index(rng, &[3, 2], 4).mapv(|v| v as i32)),
        ),
        (
            "idx_u8",
            Tensor::from(index(rng, &[3, 2], 4).mapv(|v| v as u8)),
        ),
        (
            "idx_i16",
            Tensor::from(index(rng, &[3, 2], 4).mapv(|v| v as i16)),
        ),
        (
            "idx_u64",
            Tensor::from(index(rng, &[3, 2], 4).mapv(|v| v as u64)),
        ),
        (
            "idx_f32",
            Tensor::from(index(rng, &[3, 2], 4).mapv(|v| v as f32)),
        ),
        (
            "idx_bool",
            Tensor::from(index(rng, &[3, 2], 2).mapv(|v| v == 1)),
        ),
        (
            "rows_i32",
            Tensor::from(ndarray::arr1(&[2i32, 0]).into_dyn()),
        ),
        ("rows_u8", Tensor::from(ndarray::arr1(&[2u8, 0]).into_dyn())),
        (
            "rows_i16",
            Tensor::from(ndarray::arr1(&[2i16, 0]).into_dyn()),
        ),
        (
            "rows_u64",
            Tensor::from(ndarray::arr1(&[2u64, 0]).into_dyn()),
        ),
        (
            "rows_f32",
            Tensor::from(ndarray::arr1(&[2.0f32, 0.0]).into_dyn()),
        ),
        (
            "rows_bool",
            Tensor::from(ndarray::arr1(&[true, false]).into_dyn()),
        ),
        ("s_b", small_tensor(rng, &[1, 2], dtype)),
        ("s_short", small_tensor(rng, &[3, 1], dtype)),
        ("s_none", small_tensor(rng, &[0], dtype)),
        ("e_idx", i64s(&[3, 0], &[])),
        ("e_rows", i64s(&[0], &[])),
        ("e_src", small_tensor(rng, &[0, 4], dtype)),
        ("x0", small_tensor(rng, &[], dtype)),
        ("xe", small_tensor(rng, &[0, 4], dtype)),
        ("i0", i64s(&[], &[0])),
        ("n_idx", i64s(&[3, 2], &[-1, 0, -4, 2, 3, -2])),
        ("n_rows", i64s(&[2], &[-1, 0])),
        ("n_flat", i64s(&[5], &[-1, 0, 3, -12, 11])),
        ("w_idx", i64s(&[3, 2], &[5, -1, 0, -6, 3, 9])),
        ("w_rows", i64s(&[2], &[4, -1])),
        ("w_flat", i64s(&[5], &[13, -2, 5, 40, -12])),
        ("flat", i64s(&[5], &[11, 0, 5, 11, 3])),
        ("mask", Tensor::from(small::<bool>(rng, &[3, 4], 2))),
        ("offsets", i64s(&[4], &[0, 1, 1, 4])),
        ("rep", i64s(&[4], &[1, 0, 2, 1])),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// A case's op, arguments and named tensors (on the host and on the GPU).
#[cfg(feature = "dynamic")]
fn dtype_call(
    g: &Cuda,
    host: &gather::dynamic::Tensors,
    case: &str,
) -> (
    String,
    gather::dynamic::Args,
    gather::dynamic::Tensors,
    gather_cuda::dynamic::CudaTensors,
) {
    let (op, rest) = case.split_once(' ').unwrap_or((case, ""));
    let (tensors, args): (Vec<_>, Vec<_>) = rest
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .partition(|(k, _)| TENSORS.contains(k));
    let mut cpu = gather::dynamic::Tensors::new();
    let mut dev = gather_cuda::dynamic::CudaTensors::new();
    for (name, array) in tensors {
        let t = &host[array];
        cpu.insert(name.to_string(), t.clone());
        dev.insert(name.to_string(), gather::with_tensor!(t, a => up(g, a)));
    }
    (op.to_string(), parse_args(&args), cpu, dev)
}

/// The same values (exactly, or within 1e-2 for float arithmetic), NaN matching NaN.
#[cfg(feature = "dynamic")]
fn same_tensor(got: &gather::dynamic::Tensor, want: &gather::dynamic::Tensor, what: &str) {
    assert_eq!(
        (got.dtype(), got.shape()),
        (want.dtype(), want.shape()),
        "{what}"
    );
    let arr = |v: Vec<f64>| ndarray::Array1::from(v).into_dyn();
    let tol = if want.dtype().is_float() { 1e-2 } else { 0.0 };
    close(&arr(got.to_f64_vec()), &arr(want.to_f64_vec()), tol, what);
}

/// Every dtype through every op by name, the reductions, sorts, softmaxes, fills and masks
/// whose rules depend on the dtype among them: the GPU gives the CPU library's outcome, the
/// same values or the same error (a mean of bool was a result on the GPU and an error on the
/// CPU).
#[cfg(feature = "dynamic")]
#[test]
fn every_dtype_gets_the_cpu_librarys_outcome_in_every_op_by_name() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(91);
    let cases = dtype_cases();
    for dtype in DTYPES {
        let host = dtype_host(&mut rng, dtype);
        for case in &cases {
            by_name(&g, &host, &format!("{case} ({dtype})"), None);
        }
    }
}

/// The in-place forms of the sweep's ops on every dtype: the GPU's target ends as the CPU's, or
/// both calls fail with the same error and leave their targets as they were.
#[cfg(feature = "dynamic")]
#[test]
fn every_dtype_gets_the_cpu_librarys_outcome_in_place() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(92);
    let cases = dtype_cases();
    for dtype in DTYPES {
        let host = dtype_host(&mut rng, dtype);
        for case in &cases {
            let (op, args, mut cpu, mut dev) = dtype_call(&g, &host, case);
            if !gather::dynamic::has_inplace(&op) {
                continue;
            }
            let what = format!("{case} ({dtype}), in place");
            let mut want = cpu.remove("input").unwrap();
            let before = want.clone();
            let target = dev.remove("input").unwrap();
            let w = gather::dynamic::call_inplace(&op, &args, want.view_mut(), &cpu);
            let got = gather_cuda::dynamic::call_inplace(&op, &args, &target, &dev);
            match (got, w) {
                (Ok(()), Ok(())) => same_tensor(&down(&target), &want, &what),
                (Err(e), Err(w)) => {
                    assert_eq!(same_error(&e, &w), Ok(()), "{what}");
                    same_tensor(&down(&target), &before, &what);
                    same_tensor(&want, &before, &what);
                }
                (got, w) => panic!("{what}: GPU {got:?}, CPU {w:?}"),
            }
        }
    }
}

/// The gradients of the sweep's ops on every dtype (floats differentiate, the others are the
/// CPU's error): the same gradients by name, or the same error.
#[cfg(feature = "dynamic")]
#[test]
fn every_dtype_gets_the_cpu_librarys_outcome_in_gradients() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(93);
    let cases = dtype_cases();
    let mut differ = Vec::new();
    for dtype in DTYPES {
        let host = dtype_host(&mut rng, dtype);
        for case in &cases {
            let (op, args, cpu, dev) = dtype_call(&g, &host, case);
            if !gather::dynamic::GRAD_OPS.iter().any(|(n, _)| *n == op) {
                continue;
            }
            // grad_output of the output's shape: the forward's with the indices in range (the
            // output's shape does not depend on the values), else x's; then one of a wrong shape
            // (one more along the last axis), which every gradient must refuse as the CPU does.
            let valid = case.replace("w_idx", "idx").replace("w_rows", "rows");
            let valid = valid
                .replace("w_flat", "flat")
                .replace("index=n_", "index=")
                .replace("input=xe", "input=x");
            let (_, vargs, vcpu, _) = dtype_call(&g, &host, &valid);
            let shape = match gather::dynamic::call(&op, &vargs, &vcpu) {
                Ok(out) => out[0].1.shape().to_vec(),
                Err(_) => host["x"].shape().to_vec(),
            };
            let mut wrong = shape.clone();
            match wrong.last_mut() {
                Some(n) => *n += 1,
                None => wrong.push(2),
            }
            for (shape, how) in [(shape, ""), (wrong, ", grad_output of a wrong shape")] {
                let what = format!("{case} ({dtype}), gradient{how}");
                let go = small_tensor(&mut rng, &shape, dtype);
                let gd = gather::with_tensor!(&go, a => up(&g, a));
                let want = gather::dynamic::call_grad(&op, &args, &cpu, &go.view());
                let got = gather_cuda::dynamic::call_grad(&op, &args, &dev, &gd);
                match (got, want) {
                    (Ok(got), Ok(want)) => {
                        assert_eq!(got.len(), want.len(), "{what}");
                        for ((gn, gt), (wn, wt)) in got.iter().zip(&want) {
                            assert_eq!(gn, wn, "{what}");
                            same_tensor(&down(gt), wt, &format!("{what}: {gn}"));
                        }
                    }
                    (Err(e), Err(w)) => {
                        if let Err(d) = same_error(&e, &w) {
                            differ.push(format!("{what}:\n{d}"));
                        }
                    }
                    (got, want) => differ.push(format!("{what}: GPU {got:?}, CPU {want:?}")),
                }
            }
        }
    }
    assert!(
        differ.is_empty(),
        "{} gradient calls differ from the CPU's:\n{}",
        differ.len(),
        differ.join("\n")
    );
}
