//! The error of every GPU call: an op's own error (worded as the CPU library words it) or a
//! device error (no driver, no GPU, a failed CUDA call).

use std::fmt;

/// What a GPU call can fail with.
///
/// ```
/// let e = gather_cuda::Error::from(gather::Error::new(gather::ErrorKind::InvalidArgument, "bad"));
/// assert_eq!(e.op().unwrap().message(), "bad");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// The op rejected its arguments, as the CPU library would.
    Op(gather::Error),
    /// The GPU, its driver or NVRTC is missing or failed.
    Device(String),
}

impl Error {
    /// The op's error, if it is one.
    ///
    /// ```
    /// assert!(gather_cuda::Error::Device("no GPU".into()).op().is_none());
    /// ```
    pub fn op(&self) -> Option<&gather::Error> {
        match self {
            Error::Op(e) => Some(e),
            Error::Device(_) => None,
        }
    }

    pub(crate) fn device(what: impl fmt::Display) -> Self {
        Error::Device(what.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Op(e) => e.fmt(f),
            Error::Device(m) => write!(f, "CUDA: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<gather::Error> for Error {
    fn from(e: gather::Error) -> Self {
        Error::Op(e)
    }
}

impl From<cudarc::driver::DriverError> for Error {
    fn from(e: cudarc::driver::DriverError) -> Self {
        Error::Device(e.to_string())
    }
}

/// A GPU call's error as the CPU library's: an op's error as it is, a device error as an
/// `InvalidArgument` with its message (for callers that speak `gather::Result`, such as the ops
/// by name).
///
/// ```
/// let e: gather::Error = gather_cuda::Error::Device("no GPU".into()).into();
/// assert_eq!(e.kind(), gather::ErrorKind::InvalidArgument);
/// ```
impl From<Error> for gather::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Op(e) => e,
            other => gather::Error::new(gather::ErrorKind::InvalidArgument, other.to_string()),
        }
    }
}

/// The result of every GPU call.
pub type Result<T> = std::result::Result<T, Error>;
