//! The comparison rules of the conformance suite (README "Comparison rules"), each checked on small
//! hand-made tensors: what must pass and what must fail.

use gather::dynamic::{Arg, Args, Tensor, Tensors};
use gather_cli::compare::*;
use half::{bf16, f16};
use ndarray::{ArrayD, arr0, arr1, arr2};

fn t<T>(a: ndarray::Array<T, impl ndarray::Dimension>) -> Tensor
where
    Tensor: From<ArrayD<T>>,
{
    Tensor::from(a.into_dyn())
}

fn args_dim(dim: i64) -> Args {
    let mut a = Args::default();
    a.set("dim", Arg::Int(dim));
    a
}

fn tensors(items: Vec<(&str, Tensor)>) -> Tensors {
    items.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

// ---- R1 ----

#[test]
fn r1_rejects_a_different_shape_even_with_the_same_elements() {
    let a = t(arr2(&[[1i64, 2, 3]]));
    let b = t(arr1(&[1i64, 2, 3]));
    assert!(
        check_r1(&a, &b)
            .unwrap_err()
            .contains("shape [1, 3] but expected [3]")
    );
    assert!(check_exact(&a, &b).is_err());
}

#[test]
fn r1_rejects_a_different_dtype_with_equal_values() {
    let a = t(arr1(&[1i32, 2]));
    let b = t(arr1(&[1i64, 2]));
    assert!(
        check_exact(&a, &b)
            .unwrap_err()
            .contains("dtype int32 but expected int64")
    );
    // bf16 and f16 holding the same number are still different dtypes.
    let h = t(arr1(&[f16::from_f32(1.0)]));
    let bh = t(arr1(&[bf16::from_f32(1.0)]));
    assert!(check_exact(&h, &bh).is_err());
}

#[test]
fn r1_compares_0d_and_empty_shapes() {
    assert!(check_exact(&t(arr0(5u8)), &t(arr0(5u8))).is_ok());
    assert!(check_exact(&t(arr0(5u8)), &t(arr1(&[5u8]))).is_err());
    let e1 = Tensor::zeros(gather::DType::F32, &[3, 0]);
    let e2 = Tensor::zeros(gather::DType::F32, &[0, 3]);
    assert!(check_exact(&e1, &e1.clone()).is_ok());
    assert!(check_exact(&e1, &e2).is_err());
}

// ---- R2 ----

#[test]
fn r2_any_nan_matches_any_nan_whatever_the_payload_or_sign() {
    let quiet = f32::NAN;
    let other = f32::from_bits(0x7fc0_0001);
    let negative = f32::from_bits(0xffc0_0000);
    assert!(check_exact(&t(arr1(&[quiet, other])), &t(arr1(&[negative, quiet]))).is_ok());
    let h = f16::from_bits(0x7e01);
    assert!(check_exact(&t(arr1(&[h])), &t(arr1(&[f16::NAN]))).is_ok());
    let b = bf16::from_bits(0xffc1);
    assert!(check_exact(&t(arr1(&[b])), &t(arr1(&[bf16::NAN]))).is_ok());
}

#[test]
fn r2_nan_does_not_match_a_number() {
    let e = check_exact(&t(arr1(&[1.0f64, f64::NAN])), &t(arr1(&[1.0f64, 0.0]))).unwrap_err();
    assert!(e.starts_with("at [1]: got NaN, expected 0"), "{e}");
    assert!(check_exact(&t(arr1(&[0.0f64])), &t(arr1(&[f64::NAN]))).is_err());
}

#[test]
fn r2_negative_zero_differs_from_positive_zero() {
    for (a, b) in [
        (t(arr1(&[-0.0f32])), t(arr1(&[0.0f32]))),
        (t(arr1(&[0.0f64])), t(arr1(&[-0.0f64]))),
    ] {
        assert!(check_exact(&a, &b).is_err());
    }
    let e = check_exact(&t(arr1(&[f16::NEG_ZERO])), &t(arr1(&[f16::ZERO]))).unwrap_err();
    assert!(e.contains("got -0, expected 0"), "{e}");
}

#[test]
fn r2_is_bitwise_for_integers_and_bool_and_reports_the_first_difference() {
    let a = t(arr2(&[[1i8, -1], [3, 4]]));
    let b = t(arr2(&[[1i8, -1], [4, 5]]));
    assert_eq!(
        check_exact(&a, &b).unwrap_err(),
        "at [1, 0]: got 3, expected 4 (2 of 4 elements differ)"
    );
    assert!(check_exact(&t(arr1(&[true, false])), &t(arr1(&[true, true]))).is_err());
    assert!(check_exact(&t(arr1(&[u64::MAX])), &t(arr1(&[u64::MAX]))).is_ok());
}

#[test]
fn r2_a_tiny_float_difference_is_a_failure() {
    let a = t(arr1(&[1.0f32]));
    let b = t(arr1(&[f32::from_bits(1.0f32.to_bits() + 1)]));
    assert!(check_exact(&a, &b).is_err());
}

#[test]
fn identical_check_for_r4b_also_distinguishes_nan_payloads() {
    let a = t(arr1(&[f32::NAN]));
    let b = t(arr1(&[f32::from_bits(0x7fc0_0001)]));
    assert!(check_exact(&a, &b).is_ok());
    assert!(check_identical(&a, &b).is_err());
    assert!(check_identical(&a, &a.clone()).is_ok());
}

// ---- R3 ----

#[test]
fn r3_accepts_within_atol_plus_rtol_times_expected() {
    // |a - e| = 0.015 <= 0.01 + 0.01 * 1.0 = 0.02
    assert!(check_tolerance(&t(arr1(&[1.015f64])), &t(arr1(&[1.0f64])), 0.01, 0.01).is_ok());
    // 0.025 > 0.02
    let e = check_tolerance(&t(arr1(&[1.025f64])), &t(arr1(&[1.0f64])), 0.01, 0.01).unwrap_err();
    assert!(e.contains("at [0]: got 1.025, expected 1"), "{e}");
    // rtol scales with |expected|, not |actual|.
    assert!(within_tolerance(-95.0, -100.0, 0.05, 0.0));
    assert!(!within_tolerance(-100.0, -95.0, 0.05, 0.0));
}

#[test]
fn r3_widens_half_precision_values_exactly() {
    let a = t(arr1(&[f16::from_f32(1.0)]));
    let b = t(arr1(&[f16::from_f32(1.0009766)])); // the next f16 after 1.0
    assert!(check_tolerance(&a, &b, 1e-3, 0.0).is_ok());
    assert!(check_tolerance(&a, &b, 1e-4, 0.0).is_err());
    let a = t(arr1(&[bf16::from_f32(2.0)]));
    let b = t(arr1(&[bf16::from_f32(2.015625)])); // the next bf16 after 2.0
    assert!(check_tolerance(&a, &b, 0.0, 0.016).is_ok());
    assert!(check_tolerance(&a, &b, 0.0, 0.015).is_err());
}

#[test]
fn r3_nan_must_match_nan_and_infinities_must_be_equal() {
    let tol = |a: f32, e: f32| check_tolerance(&t(arr1(&[a])), &t(arr1(&[e])), 1.0, 1.0).is_ok();
    assert!(tol(f32::NAN, f32::NAN));
    assert!(!tol(f32::NAN, 1.0));
    assert!(!tol(1.0, f32::NAN));
    assert!(tol(f32::INFINITY, f32::INFINITY));
    assert!(!tol(f32::INFINITY, f32::NEG_INFINITY));
    assert!(!tol(f32::MAX, f32::INFINITY));
    assert!(!tol(f32::INFINITY, f32::MAX));
    // -0.0 and 0.0 are within any tolerance of each other.
    assert!(tol(-0.0, 0.0));
}

#[test]
fn r3_still_checks_shape_and_dtype() {
    let a = t(arr1(&[1.0f32, 2.0]));
    assert!(check_tolerance(&a, &t(arr1(&[1.0f64, 2.0])), 1.0, 1.0).is_err());
    assert!(check_tolerance(&a, &t(arr1(&[1.0f32])), 1.0, 1.0).is_err());
}

// ---- R5 ----

/// scatter(dim=1) of a 2x3 input: row 0 writes 10 and 20 to column 2; row 1 writes 30 to column 0
/// and 40 to column 1 (one writer each).
fn scatter_case() -> (Args, Tensors) {
    let inputs = tensors(vec![
        ("input", t(arr2(&[[0.5f32, 0.5, 0.5], [0.5, 0.5, 0.5]]))),
        ("index", t(arr2(&[[2i64, 2], [0, 1]]))),
        // src is larger than the index: only its leading [2, 2] block is read.
        ("src", t(arr2(&[[10.0f32, 20.0, 99.0], [30.0, 40.0, 99.0]]))),
    ]);
    (args_dim(1), inputs)
}

#[test]
fn r5_scatter_accepts_any_duplicate_writer_and_input_elsewhere() {
    let (args, inputs) = scatter_case();
    for v in [10.0, 20.0] {
        let out = t(arr2(&[[0.5f32, 0.5, v], [30.0, 40.0, 0.5]]));
        assert!(
            check_any_of_duplicates("scatter", &args, &inputs, &out).is_ok(),
            "{v}"
        );
    }
}

#[test]
fn r5_scatter_rejects_values_nobody_wrote_and_changes_to_unwritten_elements() {
    let (args, inputs) = scatter_case();
    let check = |o: [[f32; 3]; 2]| check_any_of_duplicates("scatter", &args, &inputs, &t(arr2(&o)));
    // The untouched src column (99) is not a writer.
    let e = check([[0.5, 0.5, 99.0], [30.0, 40.0, 0.5]]).unwrap_err();
    assert!(
        e.contains("at [0, 2]: got 99, expected one of the values written there: 10, 20"),
        "{e}"
    );
    // A sum of the writers is not allowed either.
    assert!(check([[0.5, 0.5, 30.0], [30.0, 40.0, 0.5]]).is_err());
    // An element without writers must keep the input value.
    let e = check([[0.0, 0.5, 10.0], [30.0, 40.0, 0.5]]).unwrap_err();
    assert!(e.contains("nothing writes there"), "{e}");
    // A single writer is still checked exactly.
    assert!(check([[0.5, 0.5, 10.0], [40.0, 30.0, 0.5]]).is_err());
}

#[test]
fn r5_index_copy_writers_are_the_source_slices() {
    // index_copy(dim=0): slices 0 and 2 of source both go to row 1; slice 1 goes to row 0.
    let inputs = tensors(vec![
        ("input", t(arr2(&[[0i32, 0], [0, 0], [0, 0]]))),
        ("index", t(arr1(&[1i64, 0, 1]))),
        ("source", t(arr2(&[[1i32, 2], [3, 4], [5, 6]]))),
    ]);
    let args = args_dim(0);
    let check =
        |o: [[i32; 2]; 3]| check_any_of_duplicates("index_copy", &args, &inputs, &t(arr2(&o)));
    assert!(check([[3, 4], [1, 2], [0, 0]]).is_ok());
    assert!(check([[3, 4], [5, 6], [0, 0]]).is_ok());
    // Mixing elements of different slices is allowed per element (the rule is per element).
    assert!(check([[3, 4], [1, 6], [0, 0]]).is_ok());
    assert!(check([[3, 4], [2, 1], [0, 0]]).is_err());
    assert!(check([[3, 4], [1, 2], [0, 7]]).is_err());
}

#[test]
fn r5_put_wraps_negative_indices_into_the_flat_input() {
    let inputs = tensors(vec![
        ("input", t(arr2(&[[0i64, 0], [0, 0]]))),
        ("index", t(arr1(&[-1i64, 3, 0]))),
        ("source", t(arr1(&[7i64, 8, 9]))),
    ]);
    let mut args = Args::default();
    args.set("accumulate", Arg::Bool(false));
    let check = |o: [[i64; 2]; 2]| check_any_of_duplicates("put", &args, &inputs, &t(arr2(&o)));
    assert!(check([[9, 0], [0, 7]]).is_ok());
    assert!(check([[9, 0], [0, 8]]).is_ok());
    assert!(check([[9, 0], [0, 15]]).is_err());
    assert!(check([[0, 0], [0, 8]]).is_err());
}

#[test]
fn r5_nan_writers_match_any_nan() {
    let inputs = tensors(vec![
        ("input", t(arr1(&[0.0f64, 0.0]))),
        ("index", t(arr1(&[1i64, 1]))),
        ("src", t(arr1(&[f64::NAN, 1.0]))),
    ]);
    let args = args_dim(0);
    let out = t(arr1(&[0.0f64, f64::from_bits(0x7ff8_0000_0000_0001)]));
    assert!(check_any_of_duplicates("scatter", &args, &inputs, &out).is_ok());
    let out = t(arr1(&[-0.0f64, 1.0]));
    assert!(check_any_of_duplicates("scatter", &args, &inputs, &out).is_err());
}

// ---- R6 ----

#[test]
fn r6_unordered_topk_pairs_may_come_in_any_order_per_slice() {
    // topk(k=2, dim=1) of [[1, 9, 5], [7, 2, 8]]
    let ev = t(arr2(&[[9.0f32, 5.0], [8.0, 7.0]]));
    let ei = t(arr2(&[[1i64, 2], [2, 0]]));
    let av = t(arr2(&[[5.0f32, 9.0], [8.0, 7.0]]));
    let ai = t(arr2(&[[2i64, 1], [2, 0]]));
    assert!(check_unordered((&av, &ai), (&ev, &ei), 1).is_ok());
}

#[test]
fn r6_pairs_must_stay_together_and_slices_may_not_mix() {
    let ev = t(arr2(&[[9.0f32, 5.0], [8.0, 7.0]]));
    let ei = t(arr2(&[[1i64, 2], [2, 0]]));
    // Values swapped but indices not: the pairs are broken.
    let av = t(arr2(&[[5.0f32, 9.0], [8.0, 7.0]]));
    let ai = t(arr2(&[[1i64, 2], [2, 0]]));
    let e = check_unordered((&av, &ai), (&ev, &ei), 1).unwrap_err();
    assert!(e.contains("slice at [0, 0]"), "{e}");
    // Sorting along the wrong dim (0) breaks the comparison.
    let av = t(arr2(&[[8.0f32, 7.0], [9.0, 5.0]]));
    let ai = t(arr2(&[[2i64, 0], [1, 2]]));
    assert!(check_unordered((&av, &ai), (&ev, &ei), 1).is_err());
}

#[test]
fn r6_checks_shapes_and_negative_zero() {
    let ev = t(arr1(&[0.0f32]));
    let ei = t(arr1(&[0i64]));
    assert!(check_unordered((&t(arr1(&[-0.0f32])), &ei), (&ev, &ei), 0).is_err());
    assert!(
        check_unordered(
            (&t(arr1(&[0.0f32, 1.0])), &t(arr1(&[0i64, 1]))),
            (&ev, &ei),
            0
        )
        .is_err()
    );
}

// ---- R7 ----

#[test]
fn r7_topk_may_report_any_tied_index() {
    // input [[4, 9, 9, 1]]: top-1 along dim 1 is 9 at index 1 or 2.
    let input = t(arr2(&[[4i32, 9, 9, 1]]));
    let v = t(arr2(&[[9i32]]));
    let check = |i: i64| {
        check_ties(
            &input,
            1,
            false,
            (&v, &t(arr2(&[[i]]))),
            (&v, &t(arr2(&[[1i64]]))),
        )
    };
    assert!(check(1).is_ok());
    assert!(check(2).is_ok());
    assert!(
        check(0)
            .unwrap_err()
            .contains("input gathered at the indices")
    );
    assert!(check(4).unwrap_err().contains("outside [0, 4)"));
    assert!(check(-1).is_err());
}

#[test]
fn r7_values_must_still_match_exactly() {
    let input = t(arr1(&[2.0f32, 1.0]));
    let exp = (&t(arr1(&[1.0f32])), &t(arr1(&[1i64])));
    // Returning the wrong element, consistently with its index, is still wrong.
    let act = (&t(arr1(&[2.0f32])), &t(arr1(&[0i64])));
    assert!(
        check_ties(&input, 0, false, act, exp)
            .unwrap_err()
            .starts_with("values")
    );
}

#[test]
fn r7_sort_indices_must_be_distinct_per_slice() {
    // sort of [3, 1, 3] ascending: [1, 3, 3] with indices [1, 0, 2] or [1, 2, 0].
    let input = t(arr1(&[3i64, 1, 3]));
    let v = t(arr1(&[1i64, 3, 3]));
    let exp_i = t(arr1(&[1i64, 0, 2]));
    let check = |i: [i64; 3]| check_ties(&input, 0, false, (&v, &t(arr1(&i))), (&v, &exp_i));
    assert!(check([1, 0, 2]).is_ok());
    assert!(check([1, 2, 0]).is_ok());
    assert!(check([1, 0, 0]).unwrap_err().contains("appears twice"));
}

#[test]
fn r7_with_nan_ties_any_nan_counts() {
    // topk(k=2, largest) of [NaN, 1, NaN]: both NaNs, in either order.
    let input = t(arr1(&[f32::NAN, 1.0, f32::NAN]));
    let v = t(arr1(&[f32::NAN, f32::NAN]));
    let exp_i = t(arr1(&[0i64, 2]));
    let check = |i: [i64; 2]| check_ties(&input, 0, false, (&v, &t(arr1(&i))), (&v, &exp_i));
    assert!(check([2, 0]).is_ok());
    assert!(check([0, 1]).is_err());
}

#[test]
fn r7_unordered_and_ties_compares_values_as_a_multiset_per_slice() {
    let input = t(arr2(&[[5u8, 7, 7], [1, 2, 3]]));
    let ev = t(arr2(&[[7u8, 7], [3, 2]]));
    let ei = t(arr2(&[[1i64, 2], [2, 1]]));
    let av = t(arr2(&[[7u8, 7], [2, 3]]));
    let ai = t(arr2(&[[2i64, 1], [1, 2]]));
    assert!(check_ties(&input, 1, true, (&av, &ai), (&ev, &ei)).is_ok());
    let av = t(arr2(&[[7u8, 5], [2, 3]]));
    let ai = t(arr2(&[[2i64, 0], [1, 2]]));
    assert!(check_ties(&input, 1, true, (&av, &ai), (&ev, &ei)).is_err());
}

#[test]
fn r7_argsort_compares_the_values_gathered_at_the_indices() {
    // argsort along dim 0 of [[2, 5], [1, 5], [2, 0]] (stable=false): column 0 may order the two 2s
    // either way; column 1 likewise for the two 5s.
    let input = t(arr2(&[[2i32, 5], [1, 5], [2, 0]]));
    let expected = t(arr2(&[[1i64, 2], [0, 0], [2, 1]]));
    let check = |i: [[i64; 2]; 3]| check_argsort_ties(&input, 0, &t(arr2(&i)), &expected);
    assert!(check([[1, 2], [0, 0], [2, 1]]).is_ok());
    assert!(check([[1, 2], [2, 1], [0, 0]]).is_ok());
    assert!(check([[0, 2], [1, 0], [2, 1]]).is_err());
    assert!(
        check([[1, 2], [0, 1], [0, 1]])
            .unwrap_err()
            .contains("appears twice")
    );
    assert!(
        check([[1, 2], [0, 0], [3, 1]])
            .unwrap_err()
            .contains("outside [0, 3)")
    );
}

#[test]
fn r7_handles_a_0d_input_as_one_element() {
    let input = t(arr0(4.0f64));
    let v = t(arr0(4.0f64));
    let i = t(arr0(0i64));
    assert!(check_ties(&input, 0, false, (&v, &i), (&v, &i)).is_ok());
    assert!(check_ties(&input, 0, false, (&v, &t(arr0(1i64))), (&v, &i)).is_err());
}
