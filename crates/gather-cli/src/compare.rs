//! The conformance suite's comparison rules (R1–R3, R5–R7), on dynamically typed tensors.
//!
//! Every check returns `Ok(())` or a one-line description of the first difference (its position,
//! the actual and the expected value). The checks work on [`Flat`], a row-major copy of a tensor
//! holding each element's bit pattern (for R2) and its value widened to `f64` (for R3).
//!
//! ```
//! use gather::dynamic::Tensor;
//! use gather_cli::compare::check_exact;
//! use ndarray::arr1;
//!
//! let a = Tensor::from(arr1(&[1.0f32, f32::NAN, 0.0]).into_dyn());
//! let b = Tensor::from(arr1(&[1.0f32, -f32::NAN, 0.0]).into_dyn());
//! assert!(check_exact(&a, &b).is_ok()); // any NaN matches any NaN
//! let c = Tensor::from(arr1(&[1.0f32, f32::NAN, -0.0]).into_dyn());
//! assert!(check_exact(&a, &c).unwrap_err().contains("[2]")); // but -0.0 != +0.0
//! ```

use gather::dynamic::{Args, Tensor, Tensors};
use gather::{DType, Element, with_tensor};
use half::{bf16, f16};

/// Element types whose bit pattern identifies the value exactly (R2 equality).
trait Bits: Element {
    fn bits(self) -> u64;
}

macro_rules! bits_int {
    ($($t:ty),*) => {$(
        impl Bits for $t {
            fn bits(self) -> u64 {
                self as i128 as u64
            }
        }
    )*};
}
bits_int!(u8, i8, i16, i32, i64, u16, u32, u64);

impl Bits for bool {
    fn bits(self) -> u64 {
        self as u64
    }
}
impl Bits for f16 {
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}
impl Bits for bf16 {
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}
impl Bits for f32 {
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}
impl Bits for f64 {
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

/// A row-major copy of a tensor: shape, dtype, bit patterns and values widened to `f64`.
///
/// ```
/// use gather_cli::compare::Flat;
/// let f = Flat::of(&gather::dynamic::Tensor::from(ndarray::arr2(&[[1i8, -2]]).into_dyn()));
/// assert_eq!(f.shape, vec![1, 2]);
/// assert_eq!(f.show(1), "-2");
/// assert_eq!(f.as_index(1), Some(-2));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Flat {
    /// The element type.
    pub dtype: DType,
    /// The shape (empty for a 0-d tensor).
    pub shape: Vec<usize>,
    /// Each element's bit pattern (integers sign-extended, bool 0/1).
    pub bits: Vec<u64>,
    /// Each element widened to `f64` (exact for every float type).
    pub vals: Vec<f64>,
}

impl Flat {
    /// The row-major copy of `t`.
    ///
    /// ```
    /// let t = gather::dynamic::Tensor::from(ndarray::arr1(&[true, false]).into_dyn());
    /// assert_eq!(gather_cli::compare::Flat::of(&t).bits, vec![1, 0]);
    /// ```
    pub fn of(t: &Tensor) -> Flat {
        fn go<T: Bits>(a: &ndarray::ArrayD<T>) -> Flat {
            Flat {
                dtype: T::DTYPE,
                shape: a.shape().to_vec(),
                bits: a.iter().map(|v| v.bits()).collect(),
                vals: a.iter().map(|v| v.to_f64()).collect(),
            }
        }
        with_tensor!(t, a => go(a))
    }

    /// The number of elements.
    ///
    /// ```
    /// let t = gather::dynamic::Tensor::from(ndarray::arr1(&[1u8, 2]).into_dyn());
    /// assert_eq!(gather_cli::compare::Flat::of(&t).len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.bits.len()
    }

    /// True when there are no elements.
    ///
    /// ```
    /// let t = gather::dynamic::Tensor::zeros(gather::DType::F32, &[0, 3]);
    /// assert!(gather_cli::compare::Flat::of(&t).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.bits.is_empty()
    }

    /// True when element `i` is a NaN.
    ///
    /// ```
    /// let t = gather::dynamic::Tensor::from(ndarray::arr1(&[f64::NAN, 1.0]).into_dyn());
    /// let f = gather_cli::compare::Flat::of(&t);
    /// assert!(f.is_nan(0) && !f.is_nan(1));
    /// ```
    pub fn is_nan(&self, i: usize) -> bool {
        self.dtype.is_float() && self.vals[i].is_nan()
    }

    /// Element `i` as an index value, for integer tensors (`None` for float and bool tensors).
    ///
    /// ```
    /// let t = gather::dynamic::Tensor::from(ndarray::arr1(&[1.5f32]).into_dyn());
    /// assert_eq!(gather_cli::compare::Flat::of(&t).as_index(0), None);
    /// ```
    pub fn as_index(&self, i: usize) -> Option<i64> {
        match self.dtype {
            DType::U64 => i64::try_from(self.bits[i]).ok(),
            d if d.is_integer() => Some(self.bits[i] as i64),
            _ => None,
        }
    }

    /// Element `i`, printed for a failure message (`-0` and `NaN` are visible as such).
    ///
    /// ```
    /// let t = gather::dynamic::Tensor::from(ndarray::arr1(&[-0.0f32, 2.5]).into_dyn());
    /// let f = gather_cli::compare::Flat::of(&t);
    /// assert_eq!((f.show(0), f.show(1)), ("-0".to_string(), "2.5".to_string()));
    /// ```
    pub fn show(&self, i: usize) -> String {
        let b = self.bits[i];
        match self.dtype {
            DType::Bool => (b != 0).to_string(),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => b.to_string(),
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => (b as i64).to_string(),
            DType::F16 => f16::from_bits(b as u16).to_string(),
            DType::BF16 => bf16::from_bits(b as u16).to_string(),
            DType::F32 => f32::from_bits(b as u32).to_string(),
            DType::F64 => f64::from_bits(b).to_string(),
            _ => format!("{b:#x}"),
        }
    }

    /// R2 equality of element `i` with element `j` of `other`: same bits, or both NaN.
    ///
    /// ```
    /// use gather::dynamic::Tensor;
    /// use gather_cli::compare::Flat;
    /// let a = Flat::of(&Tensor::from(ndarray::arr1(&[0.0f32, f32::NAN]).into_dyn()));
    /// let b = Flat::of(&Tensor::from(ndarray::arr1(&[-0.0f32]).into_dyn()));
    /// assert!(a.same(1, &a, 1) && !a.same(0, &b, 0));
    /// ```
    pub fn same(&self, i: usize, other: &Flat, j: usize) -> bool {
        self.bits[i] == other.bits[j] || (self.is_nan(i) && other.is_nan(j))
    }

    /// The shape with a 0-d tensor counted as 1-d (`[]` → `[1]`).
    fn shape_1d(&self) -> Vec<usize> {
        if self.shape.is_empty() {
            vec![1]
        } else {
            self.shape.clone()
        }
    }
}

/// Formats the position of flat (row-major) element `i` of `shape` as `[a, b, c]`.
///
/// ```
/// assert_eq!(gather_cli::compare::position(&[2, 3], 4), "[1, 1]");
/// assert_eq!(gather_cli::compare::position(&[], 0), "[]");
/// ```
pub fn position(shape: &[usize], i: usize) -> String {
    gather::error::fmt_shape(&unravel(i, shape))
}

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (d, &s) in shape.iter().enumerate().rev() {
        if s > 0 {
            idx[d] = i % s;
            i /= s;
        }
    }
    idx
}

fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &s)| acc * s + i)
}

/// R1: the same shape and the same dtype.
///
/// ```
/// use gather::dynamic::Tensor;
/// let a = Tensor::zeros(gather::DType::F32, &[2, 3]);
/// let b = Tensor::zeros(gather::DType::F64, &[2, 3]);
/// assert!(gather_cli::compare::check_r1(&a, &b).unwrap_err().contains("dtype"));
/// ```
pub fn check_r1(actual: &Tensor, expected: &Tensor) -> Result<(), String> {
    if actual.shape() != expected.shape() {
        return Err(format!(
            "shape {} but expected {}",
            gather::error::fmt_shape(actual.shape()),
            gather::error::fmt_shape(expected.shape())
        ));
    }
    if actual.dtype() != expected.dtype() {
        return Err(format!(
            "dtype {} but expected {}",
            actual.dtype(),
            expected.dtype()
        ));
    }
    Ok(())
}

/// Reports the first element `i` where `ok(i)` is false, with how many differ in all.
fn first_difference(
    actual: &Flat,
    expected: &Flat,
    ok: impl Fn(usize) -> bool,
) -> Result<(), String> {
    let bad: Vec<usize> = (0..actual.len()).filter(|&i| !ok(i)).collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "at {}: got {}, expected {} ({} of {} elements differ)",
            position(&actual.shape, i),
            actual.show(i),
            expected.show(i),
            bad.len(),
            actual.len()
        )),
    }
}

/// R1 then R2: bitwise equality, except that any NaN matches any NaN (`-0.0 != +0.0`).
///
/// ```
/// use gather::dynamic::Tensor;
/// let a = Tensor::from(ndarray::arr1(&[1i64, 2]).into_dyn());
/// let b = Tensor::from(ndarray::arr1(&[1i64, 3]).into_dyn());
/// let e = gather_cli::compare::check_exact(&a, &b).unwrap_err();
/// assert_eq!(e, "at [1]: got 2, expected 3 (1 of 2 elements differ)");
/// ```
pub fn check_exact(actual: &Tensor, expected: &Tensor) -> Result<(), String> {
    check_r1(actual, expected)?;
    let (a, e) = (Flat::of(actual), Flat::of(expected));
    first_difference(&a, &e, |i| a.same(i, &e, i))
}

/// Strict bitwise identity (NaN payloads included), used for "left unchanged" (R4b).
///
/// ```
/// use gather::dynamic::Tensor;
/// let a = Tensor::from(ndarray::arr1(&[f32::NAN]).into_dyn());
/// let b = Tensor::from(ndarray::arr1(&[-f32::NAN]).into_dyn());
/// assert!(gather_cli::compare::check_identical(&a, &a).is_ok());
/// assert!(gather_cli::compare::check_identical(&a, &b).is_err());
/// ```
pub fn check_identical(actual: &Tensor, expected: &Tensor) -> Result<(), String> {
    check_r1(actual, expected)?;
    let (a, e) = (Flat::of(actual), Flat::of(expected));
    first_difference(&a, &e, |i| a.bits[i] == e.bits[i])
}

/// One element under R3: `|a - e| <= atol + rtol * |e|`; NaN only matches NaN, infinities must be
/// equal.
///
/// ```
/// use gather_cli::compare::within_tolerance;
/// assert!(within_tolerance(1.0 + 1e-7, 1.0, 1e-6, 0.0));
/// assert!(!within_tolerance(1.1, 1.0, 1e-6, 1e-6));
/// assert!(within_tolerance(f64::NAN, f64::NAN, 0.1, 0.1));
/// assert!(!within_tolerance(f64::INFINITY, 1e308, 1.0, 1.0));
/// ```
pub fn within_tolerance(actual: f64, expected: f64, rtol: f64, atol: f64) -> bool {
    if expected.is_nan() || actual.is_nan() {
        return expected.is_nan() && actual.is_nan();
    }
    if expected.is_infinite() || actual.is_infinite() {
        return actual == expected;
    }
    (actual - expected).abs() <= atol + rtol * expected.abs()
}

/// R1 then R3: every element within `atol + rtol * |expected|` (values widened to `f64`).
///
/// ```
/// use gather::dynamic::Tensor;
/// let a = Tensor::from(ndarray::arr1(&[1.0f32, 2.0]).into_dyn());
/// let b = Tensor::from(ndarray::arr1(&[1.0f32, 2.001]).into_dyn());
/// assert!(gather_cli::compare::check_tolerance(&a, &b, 1e-3, 0.0).is_ok());
/// assert!(gather_cli::compare::check_tolerance(&a, &b, 1e-5, 0.0).is_err());
/// ```
pub fn check_tolerance(
    actual: &Tensor,
    expected: &Tensor,
    rtol: f64,
    atol: f64,
) -> Result<(), String> {
    check_r1(actual, expected)?;
    let (a, e) = (Flat::of(actual), Flat::of(expected));
    first_difference(&a, &e, |i| {
        within_tolerance(a.vals[i], e.vals[i], rtol, atol)
    })
    .map_err(|m| format!("{m}, beyond rtol {rtol:e} / atol {atol:e}"))
}

fn get<'a>(inputs: &'a Tensors, name: &str) -> Result<&'a Tensor, String> {
    inputs
        .get(name)
        .ok_or_else(|| format!("the case has no input `{name}`"))
}

fn index_value(index: &Flat, i: usize) -> Result<i64, String> {
    index
        .as_index(i)
        .ok_or_else(|| format!("the index has dtype {}, not an integer dtype", index.dtype))
}

/// `dim` from the args, made non-negative for a tensor of rank `rank` (0-d counts as 1-d).
fn norm_dim(args: &Args, rank: usize) -> Result<usize, String> {
    let d = args.int("dim").map_err(|e| e.message().to_string())?;
    let r = rank.max(1) as i64;
    let n = if d < 0 { d + r } else { d };
    if (0..r).contains(&n) {
        Ok(n as usize)
    } else {
        Err(format!("dim {d} is out of range for rank {rank}"))
    }
}

/// For every element of `input`, the flat positions in the written tensor (`src` or `source`)
/// whose value is written to it, as rule R5 defines them for scatter (src form), index_copy and
/// put with `accumulate=false`. Returns the written tensor's name and the writer lists.
///
/// ```
/// use gather::dynamic::{Arg, Args, Tensor, Tensors};
/// use ndarray::arr1;
/// let mut inputs = Tensors::new();
/// inputs.insert("input".into(), Tensor::from(arr1(&[0i64, 0, 0]).into_dyn()));
/// inputs.insert("index".into(), Tensor::from(arr1(&[2i64, 0, 2]).into_dyn()));
/// inputs.insert("src".into(), Tensor::from(arr1(&[7i64, 8, 9]).into_dyn()));
/// let mut args = Args::default();
/// args.set("dim", Arg::Int(0));
/// let (name, w) = gather_cli::compare::writers("scatter", &args, &inputs).unwrap();
/// assert_eq!(name, "src");
/// assert_eq!(w, vec![vec![1], vec![], vec![0, 2]]);
/// ```
pub fn writers(
    op: &str,
    args: &Args,
    inputs: &Tensors,
) -> Result<(&'static str, Vec<Vec<usize>>), String> {
    let input = Flat::of(get(inputs, "input")?);
    let mut out = vec![Vec::new(); input.len()];
    let oob = |v: i64, at: usize, shape: &[usize]| {
        format!("index value {v} at {} is out of range", position(shape, at))
    };
    match op {
        "scatter" => {
            let index = Flat::of(get(inputs, "index")?);
            let src = Flat::of(get(inputs, "src")?);
            let dim = norm_dim(args, input.shape.len())?;
            let (ishape, xshape, sshape) = (index.shape_1d(), input.shape_1d(), src.shape_1d());
            if ishape.len() != xshape.len() || sshape.len() != xshape.len() {
                return Err("input, index and src have different ranks".into());
            }
            for p in 0..index.len() {
                let mut at = unravel(p, &ishape);
                let v = index_value(&index, p)?;
                if v < 0 || v as usize >= xshape[dim] {
                    return Err(oob(v, p, &index.shape));
                }
                if at.iter().zip(&sshape).any(|(&i, &s)| i >= s) {
                    return Err("index is larger than src".into());
                }
                let s = ravel(&at, &sshape);
                at[dim] = v as usize;
                if at.iter().zip(&xshape).any(|(&i, &s)| i >= s) {
                    return Err("index is larger than input".into());
                }
                out[ravel(&at, &xshape)].push(s);
            }
            Ok(("src", out))
        }
        "index_copy" => {
            let index = Flat::of(get(inputs, "index")?);
            let source = Flat::of(get(inputs, "source")?);
            let dim = norm_dim(args, input.shape.len())?;
            let (xshape, sshape) = (input.shape_1d(), source.shape_1d());
            if sshape.len() != xshape.len() {
                return Err("input and source have different ranks".into());
            }
            for q in 0..source.len() {
                let mut at = unravel(q, &sshape);
                let j = at[dim];
                if j >= index.len() {
                    return Err("source is larger than the index along dim".into());
                }
                let v = index_value(&index, j)?;
                if v < 0 || v as usize >= xshape[dim] {
                    return Err(oob(v, j, &index.shape));
                }
                at[dim] = v as usize;
                if at.iter().zip(&xshape).any(|(&i, &s)| i >= s) {
                    return Err("source is larger than input".into());
                }
                out[ravel(&at, &xshape)].push(q);
            }
            Ok(("source", out))
        }
        "put" => {
            let index = Flat::of(get(inputs, "index")?);
            let source = Flat::of(get(inputs, "source")?);
            if index.len() != source.len() {
                return Err("index and source have different numbers of elements".into());
            }
            let n = input.len() as i64;
            for j in 0..index.len() {
                let v = index_value(&index, j)?;
                let w = if v < 0 { v + n } else { v };
                if !(0..n).contains(&w) {
                    return Err(oob(v, j, &index.shape));
                }
                out[w as usize].push(j);
            }
            Ok(("source", out))
        }
        _ => Err(format!("any_of_duplicates is not defined for {op}")),
    }
}

/// R5 (`any_of_duplicates`): an element nobody writes equals `input`; an element with writers
/// equals (R2) the value of one of them. See [`writers`].
///
/// ```
/// use gather::dynamic::{Arg, Args, Tensor, Tensors};
/// use ndarray::arr1;
/// let mut inputs = Tensors::new();
/// inputs.insert("input".into(), Tensor::from(arr1(&[0i64, 0, 0]).into_dyn()));
/// inputs.insert("index".into(), Tensor::from(arr1(&[2i64, 2]).into_dyn()));
/// inputs.insert("src".into(), Tensor::from(arr1(&[7i64, 8]).into_dyn()));
/// let mut args = Args::default();
/// args.set("dim", Arg::Int(0));
/// let check = |v: [i64; 3]| {
///     gather_cli::compare::check_any_of_duplicates(
///         "scatter", &args, &inputs, &Tensor::from(arr1(&v).into_dyn()))
/// };
/// assert!(check([0, 0, 7]).is_ok() && check([0, 0, 8]).is_ok());
/// assert!(check([0, 0, 9]).is_err() && check([1, 0, 8]).is_err());
/// ```
pub fn check_any_of_duplicates(
    op: &str,
    args: &Args,
    inputs: &Tensors,
    actual: &Tensor,
) -> Result<(), String> {
    let input_t = get(inputs, "input")?;
    check_r1(actual, input_t)?;
    let (name, w) = writers(op, args, inputs).map_err(|e| format!("R5 check impossible: {e}"))?;
    let written_t = get(inputs, name)?;
    if written_t.dtype() != input_t.dtype() {
        return Err(format!(
            "{name} has dtype {}, input {}",
            written_t.dtype(),
            input_t.dtype()
        ));
    }
    let (a, x, s) = (Flat::of(actual), Flat::of(input_t), Flat::of(written_t));
    for (i, ws) in w.iter().enumerate() {
        if ws.is_empty() {
            if !a.same(i, &x, i) {
                return Err(format!(
                    "at {}: got {}, but nothing writes there, so it must keep input's {}",
                    position(&a.shape, i),
                    a.show(i),
                    x.show(i)
                ));
            }
        } else if !ws.iter().any(|&j| a.same(i, &s, j)) {
            let allowed: Vec<String> = ws.iter().map(|&j| s.show(j)).collect();
            return Err(format!(
                "at {}: got {}, expected one of the values written there: {}",
                position(&a.shape, i),
                a.show(i),
                allowed.join(", ")
            ));
        }
    }
    Ok(())
}

/// The flat positions of the 1-d slices along `dim` of `shape` (0-d counts as `[1]`).
fn slices(shape: &[usize], dim: usize) -> Vec<Vec<usize>> {
    let shape = if shape.is_empty() {
        vec![1]
    } else {
        shape.to_vec()
    };
    let outer: usize = shape[..dim].iter().product();
    let inner: usize = shape[dim + 1..].iter().product();
    let n = shape[dim];
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            out.push((0..n).map(|k| (o * n + k) * inner + i).collect());
        }
    }
    out
}

/// R1 for both outputs, then R6 (`unordered`): within each slice along `dim`, sorts the
/// `(value, index)` pairs of actual and expected by index, then compares them under R2.
///
/// ```
/// use gather::dynamic::Tensor;
/// use ndarray::arr1;
/// let t = |v: &[f32]| Tensor::from(arr1(v).into_dyn());
/// let i = |v: &[i64]| Tensor::from(arr1(v).into_dyn());
/// let ok = gather_cli::compare::check_unordered(
///     (&t(&[5.0, 9.0]), &i(&[3, 1])), (&t(&[9.0, 5.0]), &i(&[1, 3])), 0);
/// assert!(ok.is_ok());
/// let bad = gather_cli::compare::check_unordered(
///     (&t(&[5.0, 9.0]), &i(&[3, 2])), (&t(&[9.0, 5.0]), &i(&[1, 3])), 0);
/// assert!(bad.is_err());
/// ```
pub fn check_unordered(
    actual: (&Tensor, &Tensor),
    expected: (&Tensor, &Tensor),
    dim: usize,
) -> Result<(), String> {
    check_r1(actual.0, expected.0).map_err(|e| format!("values: {e}"))?;
    check_r1(actual.1, expected.1).map_err(|e| format!("indices: {e}"))?;
    let (av, ai) = (Flat::of(actual.0), Flat::of(actual.1));
    let (ev, ei) = (Flat::of(expected.0), Flat::of(expected.1));
    if !ai.is_empty() && ai.as_index(0).is_none() {
        return Err(format!("indices have dtype {}", ai.dtype));
    }
    for slice in slices(&av.shape, dim) {
        let by_index = |idx: &Flat| {
            let mut s = slice.clone();
            s.sort_by_key(|&p| idx.as_index(p));
            s
        };
        let (sa, se) = (by_index(&ai), by_index(&ei));
        for (&pa, &pe) in sa.iter().zip(&se) {
            if !ai.same(pa, &ei, pe) || !av.same(pa, &ev, pe) {
                return Err(format!(
                    "slice at {}, pairs sorted by index: got (value {}, index {}), expected \
                     (value {}, index {})",
                    position(&av.shape, slice[0]),
                    av.show(pa),
                    ai.show(pa),
                    ev.show(pe),
                    ei.show(pe)
                ));
            }
        }
    }
    Ok(())
}

/// `input.gather(dim, index)` by the definition (a plain loop), for R7.
fn gather_plain(input: &Flat, dim: usize, index: &Flat) -> Result<Flat, String> {
    let (xshape, ishape) = (input.shape_1d(), index.shape_1d());
    if xshape.len() != ishape.len() {
        return Err(format!(
            "indices have rank {}, input has rank {}",
            index.shape.len(),
            input.shape.len()
        ));
    }
    let mut out = Flat {
        dtype: input.dtype,
        shape: index.shape.clone(),
        bits: vec![],
        vals: vec![],
    };
    for p in 0..index.len() {
        let mut at = unravel(p, &ishape);
        let v = index_value(index, p)?;
        if v < 0 || v as usize >= xshape[dim] {
            return Err(format!(
                "index {v} at {} is outside [0, {})",
                position(&index.shape, p),
                xshape[dim]
            ));
        }
        at[dim] = v as usize;
        if at.iter().zip(&xshape).any(|(&i, &s)| i >= s) {
            return Err("indices are larger than input".into());
        }
        let q = ravel(&at, &xshape);
        out.bits.push(input.bits[q]);
        out.vals.push(input.vals[q]);
    }
    Ok(out)
}

/// Indices within `[0, size)` along `dim` and pairwise distinct in every slice.
fn check_index_slices(indices: &Flat, dim: usize, size: usize) -> Result<(), String> {
    for slice in slices(&indices.shape, dim) {
        let mut seen = std::collections::BTreeSet::new();
        for &p in &slice {
            let v = index_value(indices, p)?;
            if v < 0 || v as usize >= size {
                return Err(format!(
                    "index {v} at {} is outside [0, {size})",
                    position(&indices.shape, p)
                ));
            }
            if !seen.insert(v) {
                return Err(format!(
                    "index {v} at {} appears twice in its slice",
                    position(&indices.shape, p)
                ));
            }
        }
    }
    Ok(())
}

fn compare_flat(what: &str, a: &Flat, e: &Flat) -> Result<(), String> {
    first_difference(a, e, |i| a.same(i, e, i)).map_err(|m| format!("{what} {m}"))
}

/// Per slice, the multiset of values (NaNs made equal) of `a` equals that of `e`.
fn compare_multisets(a: &Flat, e: &Flat, dim: usize) -> Result<(), String> {
    let key = |f: &Flat, p: usize| if f.is_nan(p) { u64::MAX } else { f.bits[p] };
    for slice in slices(&a.shape, dim) {
        let mut ka: Vec<u64> = slice.iter().map(|&p| key(a, p)).collect();
        let mut ke: Vec<u64> = slice.iter().map(|&p| key(e, p)).collect();
        ka.sort_unstable();
        ke.sort_unstable();
        if ka != ke {
            return Err(format!(
                "values: the slice at {} holds other values than expected (in any order)",
                position(&a.shape, slice[0])
            ));
        }
    }
    Ok(())
}

/// R7 (`ties_any_index`) for topk and sort: values match (under R6 — as a multiset per slice — when
/// `unordered`), indices are in range and distinct per slice, and `input` gathered at the indices
/// equals the values.
///
/// ```
/// use gather::dynamic::Tensor;
/// use ndarray::arr1;
/// let input = Tensor::from(arr1(&[3.0f32, 7.0, 7.0]).into_dyn());
/// let v = Tensor::from(arr1(&[7.0f32]).into_dyn());
/// let i = |k: i64| Tensor::from(arr1(&[k]).into_dyn());
/// let check = |k| gather_cli::compare::check_ties(&input, 0, false, (&v, &i(k)), (&v, &i(1)));
/// assert!(check(1).is_ok() && check(2).is_ok()); // either tied element
/// assert!(check(0).is_err() && check(3).is_err());
/// ```
pub fn check_ties(
    input: &Tensor,
    dim: usize,
    unordered: bool,
    actual: (&Tensor, &Tensor),
    expected: (&Tensor, &Tensor),
) -> Result<(), String> {
    check_r1(actual.0, expected.0).map_err(|e| format!("values: {e}"))?;
    check_r1(actual.1, expected.1).map_err(|e| format!("indices: {e}"))?;
    let (x, av, ai, ev) = (
        Flat::of(input),
        Flat::of(actual.0),
        Flat::of(actual.1),
        Flat::of(expected.0),
    );
    if unordered {
        compare_multisets(&av, &ev, dim)?;
    } else {
        compare_flat("values", &av, &ev)?;
    }
    check_index_slices(&ai, dim, x.shape_1d()[dim]).map_err(|e| format!("indices: {e}"))?;
    let picked = gather_plain(&x, dim, &ai).map_err(|e| format!("indices: {e}"))?;
    compare_flat("input gathered at the indices vs values:", &picked, &av)
}

/// R7 for argsort: indices in range and distinct per slice, and `input` gathered at the actual
/// indices equals `input` gathered at the expected ones.
///
/// ```
/// use gather::dynamic::Tensor;
/// use ndarray::arr1;
/// let input = Tensor::from(arr1(&[5i32, 1, 5]).into_dyn());
/// let i = |v: [i64; 3]| Tensor::from(arr1(&v).into_dyn());
/// let check = |v| gather_cli::compare::check_argsort_ties(&input, 0, &i(v), &i([1, 0, 2]));
/// assert!(check([1, 2, 0]).is_ok());
/// assert!(check([1, 0, 0]).is_err() && check([0, 1, 2]).is_err());
/// ```
pub fn check_argsort_ties(
    input: &Tensor,
    dim: usize,
    actual: &Tensor,
    expected: &Tensor,
) -> Result<(), String> {
    check_r1(actual, expected)?;
    let (x, ai, ei) = (Flat::of(input), Flat::of(actual), Flat::of(expected));
    check_index_slices(&ai, dim, x.shape_1d()[dim])?;
    let got = gather_plain(&x, dim, &ai)?;
    let want = gather_plain(&x, dim, &ei).map_err(|e| format!("expected indices: {e}"))?;
    compare_flat("input gathered at the indices:", &got, &want)
}

/// `dim` of a sort-like op, non-negative (for R6/R7).
///
/// ```
/// use gather::dynamic::{Arg, Args};
/// let mut a = Args::default();
/// a.set("dim", Arg::Int(-1));
/// assert_eq!(gather_cli::compare::sort_dim(&a, &[2, 3]).unwrap(), 1);
/// ```
pub fn sort_dim(args: &Args, shape: &[usize]) -> Result<usize, String> {
    norm_dim(args, shape.len())
}
