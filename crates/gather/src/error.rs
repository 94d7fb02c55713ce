//! One error type for every op: a kind, a one-line message with the numbers, and a hint with the fix.
//!
//! ```
//! use gather::prelude::*;
//! use ndarray::array;
//!
//! let x = array![[10, 20, 30], [40, 50, 60]];
//! let err = x.gather(1, &array![[0, 3]]).unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::IndexOutOfBounds);
//! assert_eq!(err.index_value(), Some(3));
//! assert_eq!(err.coordinate(), Some(&[0usize, 1][..]));
//! assert!(err.to_string().contains("index 3 is out of bounds for dimension 1 with size 3"));
//! ```

use std::fmt;

/// The category of a failure. Maps one to one onto the conformance suite's error categories.
///
/// ```
/// use gather::ErrorKind;
/// assert_eq!(ErrorKind::RankMismatch.category(), "rank_mismatch");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// `dim` outside `[-ndim, ndim)`.
    DimOutOfRange,
    /// A tensor argument has the wrong number of dimensions.
    RankMismatch,
    /// Sizes are incompatible (non-dim sizes, element counts, broadcasting).
    ShapeMismatch,
    /// An index value outside the valid range.
    IndexOutOfBounds,
    /// Anything else: bad reduction name, `k` out of range, wrong dtype, a scalar that does not fit.
    InvalidArgument,
}

impl ErrorKind {
    /// The conformance suite's name of the category (`dim_out_of_range`, ...).
    pub fn category(self) -> &'static str {
        match self {
            ErrorKind::DimOutOfRange => "dim_out_of_range",
            ErrorKind::RankMismatch => "rank_mismatch",
            ErrorKind::ShapeMismatch => "shape_mismatch",
            ErrorKind::IndexOutOfBounds => "index_out_of_bounds",
            ErrorKind::InvalidArgument => "invalid_argument",
        }
    }
}

/// The error every op returns. `Display` prints the message and, where there is one, the hint on a
/// second line starting with `hint:`.
///
/// ```
/// use gather::{Error, ErrorKind};
/// let e = Error::new(ErrorKind::InvalidArgument, "sort: bad").with_hint("do it right");
/// assert_eq!(e.to_string(), "sort: bad\nhint: do it right");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    hint: Option<String>,
    index_value: Option<i64>,
    coordinate: Option<Vec<usize>>,
}

impl Error {
    /// A new error of `kind` with a one-line `message`.
    ///
    /// ```
    /// use gather::{Error, ErrorKind};
    /// let e = Error::new(ErrorKind::ShapeMismatch, "sizes differ");
    /// assert_eq!(e.message(), "sizes differ");
    /// ```
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            hint: None,
            index_value: None,
            coordinate: None,
        }
    }

    /// Adds (or replaces) the hint.
    ///
    /// ```
    /// use gather::{Error, ErrorKind};
    /// let e = Error::new(ErrorKind::ShapeMismatch, "m").with_hint("h");
    /// assert_eq!(e.hint(), Some("h"));
    /// ```
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Records the offending index value and its coordinate in the index array.
    ///
    /// ```
    /// use gather::{Error, ErrorKind};
    /// let e = Error::new(ErrorKind::IndexOutOfBounds, "m").with_index(7, vec![1, 2]);
    /// assert_eq!(e.index_value(), Some(7));
    /// ```
    pub fn with_index(mut self, value: i64, coordinate: Vec<usize>) -> Self {
        self.index_value = Some(value);
        self.coordinate = Some(coordinate);
        self
    }

    /// The category.
    ///
    /// ```
    /// use gather::{Error, ErrorKind};
    /// assert_eq!(Error::new(ErrorKind::RankMismatch, "m").kind(), ErrorKind::RankMismatch);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The one-line message, without the hint.
    ///
    /// ```
    /// use gather::{Error, ErrorKind};
    /// assert_eq!(Error::new(ErrorKind::RankMismatch, "m").message(), "m");
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The hint with the fix, if there is one.
    ///
    /// ```
    /// use gather::{Error, ErrorKind};
    /// assert_eq!(Error::new(ErrorKind::RankMismatch, "m").hint(), None);
    /// ```
    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    /// For an out-of-bounds index: the value found.
    ///
    /// ```
    /// use gather::{Error, ErrorKind};
    /// assert_eq!(Error::new(ErrorKind::RankMismatch, "m").index_value(), None);
    /// ```
    pub fn index_value(&self) -> Option<i64> {
        self.index_value
    }

    /// For an out-of-bounds index: where it is in the index array.
    ///
    /// ```
    /// use gather::{Error, ErrorKind};
    /// assert_eq!(Error::new(ErrorKind::RankMismatch, "m").coordinate(), None);
    /// ```
    pub fn coordinate(&self) -> Option<&[usize]> {
        self.coordinate.as_deref()
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    pub(crate) fn shape(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::ShapeMismatch, message)
    }

    pub(crate) fn rank(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::RankMismatch, message)
    }

    pub(crate) fn bounds(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::IndexOutOfBounds, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\nhint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Formats a shape the way PyTorch prints sizes: `[3, 4]`.
///
/// ```
/// assert_eq!(gather::error::fmt_shape(&[3, 4]), "[3, 4]");
/// assert_eq!(gather::error::fmt_shape(&[]), "[]");
/// ```
pub fn fmt_shape(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|s| s.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// `e` with `op: ` in front of its message (the typed parsers do not know the op).
#[cfg(any(feature = "backend", feature = "dynamic"))]
pub(crate) fn prefixed(op: &str, e: Error) -> Error {
    let mut out = Error::new(e.kind(), format!("{op}: {}", e.message()));
    if let Some(h) = e.hint() {
        out = out.with_hint(h.to_string());
    }
    out
}

/// `e` of the forward call that a gradient of `op` makes (for its output), named as the gradient:
/// its message's leading `op: ` spelled `grad::op: `, and a hint that starts with the op's name
/// (`op does not wrap ...`) with `grad::op`, all else kept.
#[cfg(any(feature = "backend", feature = "dynamic"))]
pub(crate) fn in_grad(op: &str, mut e: Error) -> Error {
    if let Some(rest) = e.message.strip_prefix(op).filter(|r| r.starts_with(':')) {
        e.message = format!("grad::{op}{rest}");
    }
    if let Some(h) = &e.hint
        && let Some(rest) = h.strip_prefix(op).filter(|r| r.starts_with(' '))
    {
        e.hint = Some(format!("grad::{op}{rest}"));
    }
    e
}

/// The error for an index (or other position tensor `what`) of a non-integer `dtype`.
#[cfg(any(feature = "dynamic", feature = "backend"))]
pub(crate) fn index_dtype(op: &str, what: &str, dtype: crate::DType) -> Error {
    Error::invalid(format!("{op}: expected an integer dtype for {what}, but got {dtype}"))
        .with_hint(format!("{what} values select positions, so they must be integers: convert with `mapv(|v| v as i64)`"))
}

/// The error for a mask of a dtype other than bool (PyTorch rejects `uint8` masks too).
#[cfg(any(feature = "dynamic", feature = "backend"))]
pub(crate) fn mask_dtype(op: &str, dtype: crate::DType) -> Error {
    Error::invalid(format!(
        "{op}: expected a bool mask, but got mask with dtype {dtype} (PyTorch: `{op} only supports boolean masks`)"
    ))
    .with_hint("convert the mask first, e.g. `mask.mapv(|v| v != 0)`")
}

/// The error PyTorch gives when `what` (src, source) has another dtype than self.
#[cfg(any(feature = "dynamic", feature = "backend"))]
pub(crate) fn dtype_mismatch(
    op: &str,
    what: &str,
    self_dtype: crate::DType,
    other: crate::DType,
) -> Error {
    Error::invalid(format!(
        "{op}: expected self and {what} to have the same dtype, but got {self_dtype} and {other}"
    ))
    .with_hint(format!(
        "convert {what} to {self_dtype} first (e.g. `{what}.mapv(|v| v as _)`)"
    ))
}
