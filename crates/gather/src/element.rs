//! Element types: what moves through the ops, and the arithmetic of the reductions.
//!
//! Every op works on the thirteen element types PyTorch's gather family supports on the CPU:
//! `f32 f64 f16 bf16 i8 i16 i32 i64 u8 u16 u32 u64 bool`. The reductions follow PyTorch exactly:
//!
//! - integers wrap (two's complement) on overflow, and integer `mean` divides rounding toward
//!   negative infinity;
//! - `bool` adds with logical or and multiplies with logical and; `amax`/`amin` are or/and;
//! - `f16`/`bf16` accumulate in `f32` and round once at the end;
//! - `amax`/`amin` propagate NaN: a NaN contributor wins, and a NaN already in the destination stays.
//!
//! ```
//! use gather::element::Element;
//! use half::f16;
//! // 3000 ones summed in f16 give 3000, not 2048: the sum is kept in f32.
//! let mut acc = f16::ZERO.to_acc();
//! for _ in 0..3000 {
//!     acc = f16::acc_add(acc, f16::ONE.to_acc());
//! }
//! assert_eq!(f16::from_acc(acc), f16::from_f32(3000.0));
//! assert_eq!(i8::from_acc(i8::acc_add(127, 1)), -128);
//! assert_eq!(i32::acc_div_count(-7, 2), -4);
//! ```

use half::{bf16, f16};
use std::cmp::Ordering;
use std::fmt::{Debug, Display};

use crate::error::{Error, Result};

/// The element type of an array, by PyTorch's name.
///
/// ```
/// use gather::DType;
/// assert_eq!(DType::BF16.name(), "bfloat16");
/// assert_eq!(DType::from_name("int64"), Some(DType::I64));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// `bool`
    Bool,
    /// `u8`
    U8,
    /// `i8`
    I8,
    /// `i16`
    I16,
    /// `i32`
    I32,
    /// `i64`
    I64,
    /// `u16`
    U16,
    /// `u32`
    U32,
    /// `u64`
    U64,
    /// `half::f16`
    F16,
    /// `half::bf16`
    BF16,
    /// `f32`
    F32,
    /// `f64`
    F64,
}

impl DType {
    /// Every dtype, in a fixed order.
    pub const ALL: [DType; 13] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// Bytes per element.
    ///
    /// ```
    /// assert_eq!(gather::DType::BF16.size_of(), 2);
    /// ```
    pub fn size_of(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }

    /// The name used by the conformance suite and NumPy (`float32`, `bfloat16`, `bool`, ...).
    ///
    /// ```
    /// assert_eq!(gather::DType::U8.name(), "uint8");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// PyTorch's C++ name of the type, used in its error messages (`Float`, `Long`, ...).
    ///
    /// ```
    /// assert_eq!(gather::DType::I64.torch_name(), "Long");
    /// ```
    pub fn torch_name(self) -> &'static str {
        match self {
            DType::Bool => "Bool",
            DType::U8 => "Byte",
            DType::I8 => "Char",
            DType::I16 => "Short",
            DType::I32 => "Int",
            DType::I64 => "Long",
            DType::U16 => "UInt16",
            DType::U32 => "UInt32",
            DType::U64 => "UInt64",
            DType::F16 => "Half",
            DType::BF16 => "BFloat16",
            DType::F32 => "Float",
            DType::F64 => "Double",
        }
    }

    /// Parses [`DType::name`].
    ///
    /// ```
    /// assert_eq!(gather::DType::from_name("float16"), Some(gather::DType::F16));
    /// assert_eq!(gather::DType::from_name("complex64"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// True for the four floating-point types.
    ///
    /// ```
    /// assert!(gather::DType::BF16.is_float());
    /// assert!(!gather::DType::Bool.is_float());
    /// ```
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// True for the eight integer types (not bool).
    ///
    /// ```
    /// assert!(gather::DType::U64.is_integer());
    /// assert!(!gather::DType::Bool.is_integer());
    /// ```
    pub fn is_integer(self) -> bool {
        !self.is_float() && self != DType::Bool
    }
}

impl Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A Python-style scalar argument (`value` of scatter/index_fill, `alpha` of index_add).
///
/// It is converted to the element type the way PyTorch converts a Python scalar: floats round to
/// nearest for float types and truncate toward zero for integers; a nonzero value is `true`; a
/// negative integer wraps into an unsigned type (`-1` → `255u8`); a value that does not fit is an
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument).
///
/// ```
/// use gather::{Element, Scalar};
/// assert_eq!(u8::from_scalar(Scalar::Int(-1)).unwrap(), 255);
/// assert_eq!(i32::from_scalar(Scalar::Float(2.7)).unwrap(), 2);
/// assert!(u8::from_scalar(Scalar::Int(300)).is_err());
/// assert!(bool::from_scalar(Scalar::Float(0.5)).unwrap());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Scalar {
    /// `True` / `False`
    Bool(bool),
    /// A Python int.
    Int(i64),
    /// A Python float (NaN and infinities allowed).
    Float(f64),
}

impl From<f64> for Scalar {
    fn from(v: f64) -> Self {
        Scalar::Float(v)
    }
}
impl From<f32> for Scalar {
    fn from(v: f32) -> Self {
        Scalar::Float(v as f64)
    }
}
impl From<i64> for Scalar {
    fn from(v: i64) -> Self {
        Scalar::Int(v)
    }
}
impl From<i32> for Scalar {
    fn from(v: i32) -> Self {
        Scalar::Int(v as i64)
    }
}
impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Scalar::Bool(v)
    }
}

impl Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x}"),
        }
    }
}

fn overflow(s: Scalar, dt: DType) -> Error {
    Error::invalid(format!(
        "value cannot be converted to type {} without overflow (value {s})",
        dt.name()
    ))
    .with_hint(format!(
        "pick a value inside the range of {}, or convert the array to a wider dtype first",
        dt.name()
    ))
}

/// An element type of the gather family, with the arithmetic PyTorch uses for reductions.
///
/// `Acc` is the type reductions accumulate in: `f32` for `f16`/`bf16`, the type itself otherwise.
///
/// ```
/// use gather::element::Element;
/// assert_eq!(f32::acc_max(1.0, f32::NAN).is_nan(), true); // a NaN contributor wins
/// assert_eq!(f32::acc_max(f32::NAN, 1.0).is_nan(), true); // a NaN already there stays
/// assert_eq!(bool::acc_add(true, true), true);
/// assert_eq!(u8::max_identity(), 0);
/// ```
pub trait Element:
    crate::kernels::words::Plain + Copy + Send + Sync + PartialEq + Debug + Default + 'static
{
    /// The dtype tag.
    const DTYPE: DType;
    /// The accumulation type of reductions.
    type Acc: Element;
    /// Whether `Acc` is wider than the type (`f16`, `bf16`), so that sums round once. A constant
    /// rather than a test of `DTYPE`: a branch on it (`if T::WIDE_ACC`) is not compiled at all for
    /// the types it does not apply to.
    #[doc(hidden)]
    const WIDE_ACC: bool = false;
    /// The type of this one's width whose kernels run some of its scatter reductions on its bits,
    /// so that they are compiled once per width: the unsigned integer for the integers and `bool`,
    /// `Self` for the floats.
    #[doc(hidden)]
    type Bits: Element
        + crate::kernels::words::Plain<Word = <Self as crate::kernels::words::Plain>::Word>;
    /// Whether sums and products run in [`Element::Bits`]: the signed integers, whose wrapping
    /// arithmetic has the bits of the unsigned one's, and `bool` (or and and are max and min of
    /// the bytes 0 and 1). A constant, so that the type's own instances are not compiled.
    #[doc(hidden)]
    const SUM_ON_BITS: bool = false;
    /// Whether `amax`/`amin` run in [`Element::Bits`]: `bool` alone.
    #[doc(hidden)]
    const ORDER_ON_BITS: bool = false;

    /// Widens to the accumulation type.
    fn to_acc(self) -> Self::Acc;
    /// Rounds back from the accumulation type.
    fn from_acc(acc: Self::Acc) -> Self;
    /// `a + b` (wrapping for integers, or for bool).
    fn acc_add(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// `a * b` (wrapping for integers, and for bool).
    fn acc_mul(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// PyTorch's `amax` update: `isnan(new) ? new : max(cur, new)`.
    fn acc_max(cur: Self::Acc, new: Self::Acc) -> Self::Acc;
    /// PyTorch's `amin` update: `isnan(new) ? new : min(cur, new)`.
    fn acc_min(cur: Self::Acc, new: Self::Acc) -> Self::Acc;
    /// `a / count` for `mean`: true division for floats, floor division for integers.
    fn acc_div_count(a: Self::Acc, count: usize) -> Self::Acc;
    /// The additive identity.
    fn acc_zero() -> Self::Acc;
    /// The multiplicative identity.
    fn acc_one() -> Self::Acc;
    /// The `amax` update in the element type: [`Element::acc_max`] of the two, as an element.
    /// `f16`/`bf16` compare their bits, with no conversion.
    #[inline(always)]
    fn elem_max(cur: Self, new: Self) -> Self {
        Self::from_acc(Self::acc_max(cur.to_acc(), new.to_acc()))
    }
    /// The `amin` update in the element type (see [`Element::elem_max`]).
    #[inline(always)]
    fn elem_min(cur: Self, new: Self) -> Self {
        Self::from_acc(Self::acc_min(cur.to_acc(), new.to_acc()))
    }
    /// [`Element::to_acc`] of each element of `src` into `dst` (of one length): for `f16`, the
    /// CPU's conversion instructions where it has them (tested once per run, not per element).
    #[doc(hidden)]
    #[inline]
    fn widen_run(src: &[Self], dst: &mut [Self::Acc]) {
        assert_eq!(src.len(), dst.len(), "a run of two lengths");
        for (d, s) in dst.iter_mut().zip(src) {
            *d = s.to_acc();
        }
    }
    /// [`Element::from_acc`] of each element of `src` into `dst` (see [`Element::widen_run`]).
    #[doc(hidden)]
    #[inline]
    fn narrow_run(src: &[Self::Acc], dst: &mut [Self]) {
        assert_eq!(src.len(), dst.len(), "a run of two lengths");
        for (d, s) in dst.iter_mut().zip(src) {
            *d = Self::from_acc(*s);
        }
    }
    /// The identity of `amax`: `-inf`, or the lowest value of an integer type (`false` for bool).
    fn max_identity() -> Self;
    /// The identity of `amin`: `+inf`, or the highest value of an integer type (`true` for bool).
    fn min_identity() -> Self;
    /// Converts a Python-style scalar, failing when it does not fit (see [`Scalar`]).
    fn from_scalar(s: Scalar) -> Result<Self>;
    /// True for a NaN (always false for integers and bool).
    fn is_nan(self) -> bool;
    /// The value as `f64` (exact for every type but the largest 64-bit integers).
    fn to_f64(self) -> f64;
    /// Sorting order of PyTorch's sort/topk: NaN is larger than every number, and `-0.0 == 0.0`.
    fn sort_cmp(a: Self, b: Self) -> Ordering;
}

macro_rules! int_element {
    ($t:ty, $dt:expr, $bits:ty) => {
        impl Element for $t {
            const DTYPE: DType = $dt;
            type Acc = $t;
            type Bits = $bits;
            const SUM_ON_BITS: bool = <$t>::MIN != 0;
            #[inline(always)]
            fn to_acc(self) -> $t {
                self
            }
            #[inline(always)]
            fn from_acc(a: $t) -> $t {
                a
            }
            #[inline(always)]
            fn acc_add(a: $t, b: $t) -> $t {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn acc_mul(a: $t, b: $t) -> $t {
                a.wrapping_mul(b)
            }
            #[inline(always)]
            fn acc_max(cur: $t, new: $t) -> $t {
                if cur < new { new } else { cur }
            }
            #[inline(always)]
            fn acc_min(cur: $t, new: $t) -> $t {
                if new < cur { new } else { cur }
            }
            #[inline(always)]
            fn acc_div_count(a: $t, count: usize) -> $t {
                // Floor division, as PyTorch's `div(..., rounding_mode="floor")`. A count too large
                // for the type cannot occur for signed types narrower than the count without the
                // sum itself having wrapped; compute in i128 to stay exact.
                let n = count.max(1) as i128;
                let q = (a as i128).div_euclid(n);
                q as $t
            }
            #[inline(always)]
            fn acc_zero() -> $t {
                0
            }
            #[inline(always)]
            fn acc_one() -> $t {
                1
            }
            fn max_identity() -> $t {
                <$t>::MIN
            }
            fn min_identity() -> $t {
                <$t>::MAX
            }
            fn from_scalar(s: Scalar) -> Result<$t> {
                match s {
                    Scalar::Bool(b) => Ok(b as $t),
                    Scalar::Int(i) => {
                        let min = <$t>::MIN as i128;
                        let max = <$t>::MAX as i128;
                        let v = i as i128;
                        if v > max {
                            return Err(overflow(s, $dt));
                        }
                        if v < min {
                            // Unsigned types accept negative values down to -MAX and wrap them.
                            if min == 0 && -v <= max {
                                return Ok(i as $t);
                            }
                            return Err(overflow(s, $dt));
                        }
                        Ok(i as $t)
                    }
                    Scalar::Float(x) => {
                        if x.is_nan()
                            || x.is_infinite()
                            || x < <$t>::MIN as f64
                            || x > <$t>::MAX as f64
                        {
                            return Err(overflow(s, $dt));
                        }
                        Ok(x.trunc() as $t)
                    }
                }
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                false
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn sort_cmp(a: $t, b: $t) -> Ordering {
                a.cmp(&b)
            }
        }
    };
}

int_element!(u8, DType::U8, u8);
int_element!(i8, DType::I8, u8);
int_element!(i16, DType::I16, u16);
int_element!(i32, DType::I32, u32);
int_element!(i64, DType::I64, u64);
int_element!(u16, DType::U16, u16);
int_element!(u32, DType::U32, u32);
int_element!(u64, DType::U64, u64);

#[inline(always)]
fn float_sort_cmp(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        // -0.0 == 0.0 here, as in PyTorch's comparator.
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

fn float_from_scalar(s: Scalar, max: f64, dt: DType) -> Result<f64> {
    let x = match s {
        Scalar::Bool(b) => return Ok(b as u8 as f64),
        Scalar::Int(i) => i as f64,
        Scalar::Float(x) => x,
    };
    if x.is_finite() && (x > max || x < -max) {
        return Err(overflow(s, dt));
    }
    Ok(x)
}

/// `f16` bits as an `f32`, the value `half::f16::to_f32` gives (NaNs quieted). `half` converts
/// through F16C behind a run-time CPU test, which leaves each conversion a call: an `f16` sum
/// ran at a tenth of PyTorch's speed. These are integer and float operations that inline and
/// vectorize; every input is tested against `half`.
#[inline(always)]
pub(crate) fn f16_to_f32(h: f16) -> f32 {
    let h = h.to_bits() as u32;
    let sign = (h & 0x8000) << 16;
    let em = h & 0x7fff;
    // Normal halves: the exponent rebiased from 15 to 127.
    let normal = (em << 13) + (112 << 23);
    // Subnormal halves and zero: the mantissa times 2^-24, exact in f32 (no subnormal input, so
    // a flush-to-zero mode changes nothing).
    let sub = (em as f32 * f32::from_bits(0x3380_0000)).to_bits();
    // Infinities, and NaNs with their payload and the quiet bit.
    let quiet = if em > 0x7c00 { 0x0040_0000 } else { 0 };
    let special = 0x7f80_0000 | ((em & 0x3ff) << 13) | quiet;
    let bits = if em < 0x0400 {
        sub
    } else if em < 0x7c00 {
        normal
    } else {
        special
    };
    f32::from_bits(sign | bits)
}

/// `f32` to `f16`, rounding to nearest even, as `half::f16::from_f32` does (NaNs quieted, their
/// payload's top bits kept), without its run-time CPU test (see [`f16_to_f32`]).
#[inline(always)]
pub(crate) fn f32_to_f16(f: f32) -> f16 {
    let x = f.to_bits();
    let sign = (x >> 16) & 0x8000;
    let a = x & 0x7fff_ffff;
    let nan = 0x7e00 | ((a >> 13) & 0x3ff);
    // Results below 2^-14 (subnormal or zero): adding 0.5 puts the f16 subnormal's last bit at
    // the float's last, so the float unit rounds to nearest even (a flush-to-zero mode only
    // affects inputs that round to zero anyway).
    let sub = (f32::from_bits(a) + 0.5)
        .to_bits()
        .wrapping_sub(0x3f00_0000);
    // Normal results: the exponent rebiased from 127 to 15, then the 13 dropped bits rounded
    // to nearest even; a carry out of the largest finite values gives infinity.
    let odd = (a >> 13) & 1;
    let normal = a.wrapping_add(0xc800_0fff).wrapping_add(odd) >> 13;
    let bits = if a > 0x7f80_0000 {
        nan
    } else if a >= 0x4780_0000 {
        0x7c00
    } else if a < 0x3880_0000 {
        sub
    } else {
        normal
    };
    f16::from_bits((sign | bits) as u16)
}

/// The bits of a 16-bit float (`f16`, `bf16`) as an unsigned integer of the same order, NaNs
/// aside: `-0.0` as `0.0`, negative values with every bit flipped, the others with the sign bit.
#[inline(always)]
pub(crate) fn half_order(bits: u16) -> u16 {
    let b = if bits == 0x8000 { 0 } else { bits };
    b ^ (((b as i16) >> 15) as u16 | 0x8000)
}

/// Whether PyTorch's `amax` (`MAX`) or `amin` update of `cur` by `new` takes `new`, for the bits
/// of a 16-bit float whose infinity is `inf`: a NaN `new` always, a NaN `cur` never, else by
/// order, `-0.0` as `0.0` (the float compare of [`Element::acc_max`], without converting).
#[inline(always)]
fn half_takes<const MAX: bool>(cur: u16, new: u16, inf: u16) -> bool {
    let (c, n) = (half_order(cur), half_order(new));
    let by_order = if MAX { c < n } else { n < c };
    (new & 0x7fff > inf) | ((cur & 0x7fff <= inf) & by_order)
}

macro_rules! float_element {
    ($t:ty, $dt:expr, $acc:ty, $to:expr, $from:expr, $max:expr, $from_f64:expr, $to_f64:expr $(, half = $inf:expr)? $(, runs = ($widen:expr, $narrow:expr))?) => {
        impl Element for $t {
            $(
                #[inline]
                fn widen_run(src: &[$t], dst: &mut [$acc]) {
                    $widen(src, dst)
                }
                #[inline]
                fn narrow_run(src: &[$acc], dst: &mut [$t]) {
                    $narrow(src, dst)
                }
            )?
            // 16-bit floats (`$inf`: the bits of their infinity) order their bits for amax/amin.
            $(
                #[inline(always)]
                fn elem_max(cur: $t, new: $t) -> $t {
                    if half_takes::<true>(cur.to_bits(), new.to_bits(), $inf) { new } else { cur }
                }
                #[inline(always)]
                fn elem_min(cur: $t, new: $t) -> $t {
                    if half_takes::<false>(cur.to_bits(), new.to_bits(), $inf) { new } else { cur }
                }
            )?
            const DTYPE: DType = $dt;
            type Acc = $acc;
            type Bits = $t;
            const WIDE_ACC: bool = matches!($dt, DType::F16 | DType::BF16);
            #[inline(always)]
            fn to_acc(self) -> $acc {
                $to(self)
            }
            #[inline(always)]
            fn from_acc(a: $acc) -> $t {
                $from(a)
            }
            #[inline(always)]
            fn acc_add(a: $acc, b: $acc) -> $acc {
                a + b
            }
            #[inline(always)]
            fn acc_mul(a: $acc, b: $acc) -> $acc {
                a * b
            }
            #[inline(always)]
            fn acc_max(cur: $acc, new: $acc) -> $acc {
                // `|`, not `||`: both tests are cheap, and without the branch the loop vectorises
                // (a compare, an unordered compare and a blend).
                if new.is_nan() | (cur < new) { new } else { cur }
            }
            #[inline(always)]
            fn acc_min(cur: $acc, new: $acc) -> $acc {
                if new.is_nan() | (new < cur) { new } else { cur }
            }
            #[inline(always)]
            fn acc_div_count(a: $acc, count: usize) -> $acc {
                a / (count.max(1) as $acc)
            }
            #[inline(always)]
            fn acc_zero() -> $acc {
                0.0
            }
            #[inline(always)]
            fn acc_one() -> $acc {
                1.0
            }
            fn max_identity() -> $t {
                $from(<$acc>::NEG_INFINITY)
            }
            fn min_identity() -> $t {
                $from(<$acc>::INFINITY)
            }
            fn from_scalar(s: Scalar) -> Result<$t> {
                float_from_scalar(s, $max, $dt).map($from_f64)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                $to(self).is_nan()
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                $to_f64(self)
            }
            #[inline(always)]
            fn sort_cmp(a: $t, b: $t) -> Ordering {
                float_sort_cmp($to_f64(a), $to_f64(b))
            }
        }
    };
}

float_element!(
    f32,
    DType::F32,
    f32,
    |x: f32| x,
    |a: f32| a,
    f32::MAX as f64,
    |x: f64| x as f32,
    |x: f32| x as f64
);
float_element!(
    f64,
    DType::F64,
    f64,
    |x: f64| x,
    |a: f64| a,
    f64::MAX,
    |x: f64| x,
    |x: f64| x
);
float_element!(
    f16,
    DType::F16,
    f32,
    f16_to_f32,
    f32_to_f16,
    f16::MAX.to_f64(),
    f16::from_f64,
    |x: f16| f16_to_f32(x) as f64,
    half = 0x7c00,
    runs = (
        crate::kernels::convert::widen_f16,
        crate::kernels::convert::narrow_f16
    )
);
float_element!(
    bf16,
    DType::BF16,
    f32,
    |x: bf16| x.to_f32(),
    bf16::from_f32,
    bf16::MAX.to_f64(),
    bf16::from_f64,
    |x: bf16| x.to_f64(),
    half = 0x7f80,
    runs = (
        crate::kernels::convert::widen_bf16,
        crate::kernels::convert::narrow_bf16
    )
);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    type Acc = bool;
    type Bits = u8;
    const SUM_ON_BITS: bool = true;
    const ORDER_ON_BITS: bool = true;
    #[inline(always)]
    fn to_acc(self) -> bool {
        self
    }
    #[inline(always)]
    fn from_acc(a: bool) -> bool {
        a
    }
    #[inline(always)]
    fn acc_add(a: bool, b: bool) -> bool {
        a | b
    }
    #[inline(always)]
    fn acc_mul(a: bool, b: bool) -> bool {
        a & b
    }
    #[inline(always)]
    fn acc_max(cur: bool, new: bool) -> bool {
        cur | new
    }
    #[inline(always)]
    fn acc_min(cur: bool, new: bool) -> bool {
        cur & new
    }
    #[inline(always)]
    fn acc_div_count(a: bool, _count: usize) -> bool {
        a
    }
    fn acc_zero() -> bool {
        false
    }
    fn acc_one() -> bool {
        true
    }
    fn max_identity() -> bool {
        false
    }
    fn min_identity() -> bool {
        true
    }
    fn from_scalar(s: Scalar) -> Result<bool> {
        Ok(match s {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::Float(x) => x != 0.0,
        })
    }
    fn is_nan(self) -> bool {
        false
    }
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn sort_cmp(a: bool, b: bool) -> Ordering {
        a.cmp(&b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_conversions_equal_halfs_for_every_half_and_the_floats_around_them() {
        for h in 0..=u16::MAX {
            let v = f16::from_bits(h);
            assert_eq!(
                f16_to_f32(v).to_bits(),
                v.to_f32().to_bits(),
                "f16 {h:#06x} to f32"
            );
        }
        let check = |x: u32| {
            let f = f32::from_bits(x);
            assert_eq!(
                f32_to_f16(f).to_bits(),
                f16::from_f32(f).to_bits(),
                "f32 {x:#010x} to f16"
            );
        };
        // Each half's value, its neighbours and the floats around the midpoint to the next
        // half: every rounding boundary, subnormals, the overflow to infinity, NaNs.
        for h in 0..=u16::MAX {
            let v = f16::from_bits(h).to_f32().to_bits();
            let next = f16::from_bits(h.wrapping_add(1)).to_f32().to_bits();
            let mid = v / 2 + next / 2 + (v & next & 1);
            for x in [v, mid] {
                for d in 0..=2u32 {
                    check(x.wrapping_add(d));
                    check(x.wrapping_sub(d));
                }
            }
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1_000_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            check(seed as u32);
        }
    }

    #[test]
    fn run_conversions_equal_the_element_ones_for_every_half_in_runs_of_any_length() {
        fn check<T: Element<Acc = f32>>(halves: &[T], floats: &[f32]) {
            // Runs of every length up to 17 (the conversions' 8- and 4-wide blocks and their
            // remainders), then the rest at once.
            for len in (1..=17).chain([halves.len()]) {
                for (h, f) in halves.chunks(len).zip(floats.chunks(len)) {
                    let mut wide = vec![0.0f32; h.len()];
                    T::widen_run(h, &mut wide);
                    let want: Vec<u32> = h.iter().map(|v| v.to_acc().to_bits()).collect();
                    assert_eq!(wide.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want);
                    let mut narrow = vec![T::default(); f.len()];
                    T::narrow_run(f, &mut narrow);
                    let want: Vec<T> = f.iter().map(|&v| T::from_acc(v)).collect();
                    let same = narrow.iter().zip(&want).all(|(a, b)| {
                        a == b
                            || (a.is_nan()
                                && b.is_nan()
                                && a.to_f64().to_bits() == b.to_f64().to_bits())
                    });
                    assert!(same, "{:?} narrowed to {narrow:?}, not {want:?}", f);
                }
            }
        }
        // Every half, and floats at and around every half and every midpoint between two.
        let mut floats = Vec::new();
        for h in 0..=u16::MAX {
            let v = f16::from_bits(h).to_f32().to_bits();
            let next = f16::from_bits(h.wrapping_add(1)).to_f32().to_bits();
            let mid = v / 2 + next / 2 + (v & next & 1);
            floats.extend([v, v + 1, mid.wrapping_sub(1), mid, mid + 1].map(f32::from_bits));
        }
        let halves: Vec<f16> = (0..=u16::MAX)
            .cycle()
            .take(floats.len())
            .map(f16::from_bits)
            .collect();
        check(&halves, &floats);
        let bhalves: Vec<bf16> = (0..=u16::MAX)
            .cycle()
            .take(floats.len())
            .map(bf16::from_bits)
            .collect();
        check(&bhalves, &floats);
    }

    #[test]
    fn half_max_and_min_equal_the_f32_updates_for_every_pair_class() {
        // Every value class of both types (NaNs of both signs, infinities, zeros of both signs,
        // subnormals, normals), each pair both ways: the bits equal those of the update through
        // f32, but for a NaN result, which keeps `new`'s own bits.
        fn check<T: Element + Into<f32> + Copy + std::fmt::Debug>(
            vals: &[T],
            bits: impl Fn(T) -> u16,
        ) {
            for &c in vals {
                for &n in vals {
                    let (m, want) = (
                        T::elem_max(c, n),
                        T::from_acc(T::acc_max(c.to_acc(), n.to_acc())),
                    );
                    let (lo, want_lo) = (
                        T::elem_min(c, n),
                        T::from_acc(T::acc_min(c.to_acc(), n.to_acc())),
                    );
                    for (got, want) in [(m, want), (lo, want_lo)] {
                        if want.is_nan() {
                            assert!(got.is_nan(), "{c:?} {n:?}");
                        } else {
                            assert_eq!(bits(got), bits(want), "{c:?} {n:?}");
                        }
                    }
                }
            }
        }
        let f: Vec<f16> = [
            0x7e00u16, 0xfe00, 0x7c01, 0x7c00, 0xfc00, 0x0000, 0x8000, 0x0001, 0x8001, 0x3c00,
            0xbc00, 0x7bff, 0xfbff, 0x3c01,
        ]
        .into_iter()
        .map(f16::from_bits)
        .collect();
        check(&f, |v: f16| v.to_bits());
        let b: Vec<bf16> = [
            0x7fc0u16, 0xffc0, 0x7f81, 0x7f80, 0xff80, 0x0000, 0x8000, 0x0001, 0x8001, 0x3f80,
            0xbf80, 0x7f7f, 0xff7f, 0x3f81,
        ]
        .into_iter()
        .map(bf16::from_bits)
        .collect();
        check(&b, |v: bf16| v.to_bits());
    }

    #[test]
    fn integer_mean_floors_toward_negative_infinity() {
        assert_eq!(i64::acc_div_count(-7, 2), -4);
        assert_eq!(i64::acc_div_count(-2, 3), -1);
        assert_eq!(i8::acc_div_count(7, 2), 3);
        assert_eq!(u8::acc_div_count(255, 2), 127);
    }

    #[test]
    fn scalar_conversion_follows_pytorch() {
        assert_eq!(u8::from_scalar(Scalar::Int(-255)).unwrap(), 1);
        assert!(u8::from_scalar(Scalar::Int(-256)).is_err());
        assert!(u8::from_scalar(Scalar::Float(-1.0)).is_err());
        assert!(i64::from_scalar(Scalar::Float(f64::NAN)).is_err());
        assert!(f16::from_scalar(Scalar::Float(1e6)).is_err());
        assert!(
            f16::from_scalar(Scalar::Float(f64::INFINITY))
                .unwrap()
                .is_infinite()
        );
        assert!(f32::from_scalar(Scalar::Float(f64::NAN)).unwrap().is_nan());
        assert_eq!(i32::from_scalar(Scalar::Float(-2.7)).unwrap(), -2);
    }

    #[test]
    fn nan_sorts_above_everything_and_signed_zeros_tie() {
        assert_eq!(f32::sort_cmp(f32::NAN, f32::INFINITY), Ordering::Greater);
        assert_eq!(f32::sort_cmp(-0.0, 0.0), Ordering::Equal);
    }
}
