//! Huge tensors: more than 2^31 elements, and i32 indices near `i32::MAX`.
//!
//! These tests need about 7 GiB of memory and a release build, so they are `#[ignore]`d by
//! default; `scripts/huge.sh` runs them (one at a time) and prints their measurements. Each checks
//! the whole result, and that the call's peak memory stays within its output plus a small constant
//! (`SLACK`): no offset overflows, no hidden copies of the input or materialised indices.

use std::fs;

use gather::ErrorKind;
use ndarray::{Array1, Array2, Axis, s};

/// What a call may allocate beyond its output: thread stacks, the pool, small buffers.
const SLACK: u64 = 64 << 20;

/// 3 · 2^30 elements: every offset past 2^31 is exercised.
const ROW: usize = 1 << 30;

fn status_kib(field: &str) -> u64 {
    let status = fs::read_to_string("/proc/self/status").expect("/proc/self/status (Linux only)");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} not in /proc/self/status"))
}

/// Runs `f` and returns its result and the memory it added at its peak, in bytes: the high-water
/// mark of the resident set (reset first through `/proc/self/clear_refs`) minus the resident set
/// before the call.
fn peak_extra<R>(f: impl FnOnce() -> R) -> (R, u64) {
    fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM through /proc/self/clear_refs");
    let before = status_kib("VmRSS:");
    let r = f();
    let hwm = status_kib("VmHWM:");
    (r, hwm.saturating_sub(before) * 1024)
}

fn pattern(row: usize, col: usize) -> u8 {
    (row * 7 + col % 251) as u8
}

fn report(what: &str, extra: u64, allowed: u64) {
    println!(
        "{what}: peak extra {:.1} MiB (allowed {:.1} MiB)",
        extra as f64 / (1 << 20) as f64,
        allowed as f64 / (1 << 20) as f64
    );
}

#[test]
#[ignore = "needs ~6.5 GiB and a release build: scripts/huge.sh"]
fn gather_over_three_gib_of_u8_is_exact_within_its_output_memory() {
    let x = Array2::from_shape_fn((3, ROW), |(r, c)| pattern(r, c));
    // index [3, 1] expanded (stride 0) to [3, 2^30]: out[i][j] = x[index[i]][j].
    let rows = Array2::from_shape_vec((3, 1), vec![2i64, 0, 1]).unwrap();
    let index = rows.broadcast((3, ROW)).unwrap();
    let (out, extra) = peak_extra(|| gather::gather(&x, 0, &index).unwrap());
    let allowed = out.len() as u64 + SLACK;
    report("gather [3, 2^30] u8 dim 0", extra, allowed);
    assert_eq!(out.shape(), &[3, ROW]);
    for (i, &r) in [2usize, 0, 1].iter().enumerate() {
        assert!(
            out.row(i).as_slice().unwrap() == x.row(r).as_slice().unwrap(),
            "row {i} is not row {r} of the input"
        );
    }
    assert!(extra <= allowed);

    // And along dim 1, reading offsets past 2^31 through a small index.
    let cols: Vec<i64> = vec![0, 1, (ROW - 1) as i64, (ROW - 2) as i64, 12345];
    let index = Array2::from_shape_fn((3, cols.len()), |(_, j)| cols[j]);
    let out = gather::gather(&x, 1, &index).unwrap();
    for ((r, j), &v) in out.indexed_iter() {
        assert_eq!(v, pattern(r, cols[j] as usize), "out[{r}][{j}]");
    }
}

#[test]
#[ignore = "needs ~3.5 GiB and a release build: scripts/huge.sh"]
fn scatter_add_over_three_gib_of_u8_in_place_needs_no_extra_memory() {
    // `from_elem(.., 1)` writes every byte, so the destination is resident before the call. With
    // `zeros` (calloc'd, untouched pages) the call's own writes would fault 2 GiB of the
    // destination in and count as the call's memory.
    let mut dst = Array2::<u8>::from_elem((3, ROW), 1);
    // Rows 0 and 1 of the index both hit destination row 1; row 2 hits row 2.
    let rows = Array2::from_shape_vec((3, 1), vec![1i64, 1, 2]).unwrap();
    let index = rows.broadcast((3, ROW)).unwrap();
    let one = ndarray::arr0(1u8);
    let src = one.broadcast((3, ROW)).unwrap();
    let (r, extra) = peak_extra(|| gather::scatter_add_inplace(&mut dst, 0, &index, &src));
    r.unwrap();
    report("scatter_add_ [3, 2^30] u8 dim 0", extra, SLACK);
    for (row, want) in [(0usize, 1u8), (1, 3), (2, 2)] {
        assert!(
            dst.row(row).iter().all(|&v| v == want),
            "row {row} should be all {want}"
        );
    }
    assert!(extra <= SLACK);
}

#[test]
#[ignore = "needs ~2.2 GiB and a release build: scripts/huge.sh"]
fn i32_indices_near_i32_max_address_the_right_elements() {
    // 2^31 + 8 elements: i32::MAX is a valid index.
    let n = (1usize << 31) + 8;
    let x = Array1::from_shape_fn(n, |i| (i % 253) as u8);
    let idx: Vec<i32> = vec![i32::MAX, i32::MAX - 1, 0, 1, i32::MAX - 254];
    let index = Array1::from(idx.clone());
    let want: Vec<u8> = idx.iter().map(|&i| (i as usize % 253) as u8).collect();

    let (got, extra) = peak_extra(|| gather::take(&x, &index).unwrap());
    report("take, i32 index near i32::MAX", extra, SLACK);
    assert!(extra <= SLACK);
    assert_eq!(got.to_vec(), want, "take");
    assert_eq!(
        gather::gather(&x, 0, &index).unwrap().to_vec(),
        want,
        "gather"
    );
    assert_eq!(
        gather::index_select(&x, 0, &index).unwrap().to_vec(),
        want,
        "index_select"
    );
    // Negative i32 values count from the end in take: -1 is the last element.
    let neg = Array1::from(vec![-1i32, i32::MIN + 8]);
    assert_eq!(
        gather::take(&x, &neg).unwrap().to_vec(),
        // i32::MIN + 8 wraps to n + i32::MIN + 8 = 16.
        vec![((n - 1) % 253) as u8, 16],
        "take with negative i32 indices"
    );

    // Writes at the far end, in place.
    let mut y = x;
    let src = Array1::from(vec![200u8, 201]);
    gather::scatter_add_inplace(&mut y, 0, &Array1::from(vec![i32::MAX, i32::MAX - 1]), &src)
        .unwrap();
    assert_eq!(
        y[i32::MAX as usize],
        ((i32::MAX as usize % 253) as u8).wrapping_add(200)
    );
    assert_eq!(
        y[i32::MAX as usize - 1],
        (((i32::MAX - 1) as usize % 253) as u8).wrapping_add(201)
    );

    // On a dimension of exactly i32::MAX elements, i32::MAX is one past the end: an error that
    // names the value, not a wrap-around.
    let short = y.slice(s![..i32::MAX as usize]);
    let e = gather::take(&short, &Array1::from(vec![0i32, i32::MAX])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
    assert!(e.to_string().contains("2147483647"), "{e}");
    let e = gather::index_select(&short, 0, &Array1::from(vec![i32::MAX])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
    let e = gather::gather(
        &short.insert_axis(Axis(0)),
        1,
        &Array2::from_elem((1, 1), i32::MAX),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
}

/// Outputs that cannot exist (3 * 2^61 elements through a stride-0 index of one element) are refused
/// with an error that names the size, instead of aborting the process in the allocator. Found by
/// the `gather_family` fuzz target (take aborted; gather already refused).
#[test]
fn outputs_too_large_for_memory_are_errors_not_aborts() {
    let x = Array2::from_shape_fn((3, 4), |(r, c)| pattern(r, c));
    let one = Array2::<i64>::zeros((1, 1));
    let huge = one.broadcast((3, 1 << 61)).unwrap();
    let flat = Array1::<i64>::zeros(1);
    let huge_flat = flat.broadcast(1usize << 62).unwrap();
    let results = [
        ("gather", gather::gather(&x, 1, &huge).map(|_| ())),
        ("take", gather::take(&x, &huge).map(|_| ())),
        (
            "take_along_dim",
            gather::take_along_dim(&x, &huge, Some(1)).map(|_| ()),
        ),
        (
            "index_select",
            gather::index_select(&x, 1, &huge_flat).map(|_| ()),
        ),
        (
            "select_batched",
            gather::select_batched(&x, 1, &huge_flat, 0).map(|_| ()),
        ),
    ];
    for (op, r) in results {
        let e = r.expect_err(op);
        assert!(e.to_string().contains("allocate"), "{op}: {e}");
    }
}
