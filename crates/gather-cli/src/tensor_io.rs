//! Tensors in and out of the command: inline literals, `.npy` files and `.safetensors` files.
//!
//! A tensor argument is one of
//! - an inline literal in JSON's nested-list syntax: `'[[10, 20, 30], [40, 50, 60]]'`, `'[true, false]'`,
//!   `5` (a 0-d tensor). Integers become `int64`, numbers with a point or an exponent `float32`
//!   (PyTorch's defaults for `torch.tensor`), `true`/`false` `bool`; `--dtype` converts data
//!   tensors to another type;
//! - a `.npy` file, of any of the 13 element types, little-endian, C or Fortran order. NumPy has
//!   no bfloat16: with `--bf16-npy`, `<u2` data files are read as bfloat16 bit patterns (the
//!   conformance suite's convention), and bfloat16 results are always written that way;
//! - a tensor in a `.safetensors` file, named `file.safetensors:name` (the name may be left out
//!   when the file holds a single tensor).
//!
//! Outputs are written atomically: into a temporary file beside the target, renamed into place
//! only when it is complete, so a failure never leaves a partial file.
//!
//! ```
//! use gather::DType;
//! use gather_cli::tensor_io::{parse_inline, show_tensor, Role};
//! let t = parse_inline("[[10, 20, 30], [40, 50, 60]]", Role::Data, None).unwrap();
//! assert_eq!((t.dtype(), t.shape()), (DType::I64, &[2usize, 3][..]));
//! assert_eq!(show_tensor(&t), "[[10, 20, 30], [40, 50, 60]]");
//! let x = parse_inline("[1.5, 2]", Role::Data, Some(DType::F64)).unwrap();
//! assert_eq!(x.dtype(), DType::F64);
//! assert!(parse_inline("[[1, 2], [3]]", Role::Data, None).unwrap_err().message.contains("ragged"));
//! ```

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use gather::dynamic::{Tensor, TensorElem};
use gather::{DType, Scalar, with_tensor};
use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn, ShapeBuilder};
use serde_json::Value;

use crate::compare::Flat;
use crate::fail::{CliResult, Failure};
use crate::progress::{Kind, Progress};

/// What a tensor argument is for; decides the dtype of inline literals and whether `--dtype`
/// and `--bf16-npy` apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Values (`input`, `src`, `source`): converted by `--dtype`.
    Data,
    /// Positions or flags (`index`, `mask`, `repeats`): kept as they are.
    Index,
}

/// How to load tensor arguments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Convert data tensors to this dtype.
    pub dtype: Option<DType>,
    /// Read `<u2` `.npy` data files as bfloat16 bit patterns.
    pub bf16_npy: bool,
    /// Show a progress bar while reading large files.
    pub progress: bool,
}

/// Where a tensor argument comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An inline literal.
    Inline(String),
    /// A `.npy` file.
    Npy(PathBuf),
    /// A `.safetensors` file and, optionally, the tensor's name.
    Safetensors(PathBuf, Option<String>),
}

impl Source {
    /// Classifies a tensor argument.
    ///
    /// ```
    /// use gather_cli::tensor_io::Source;
    /// assert!(matches!(Source::parse("[1, 2]").unwrap(), Source::Inline(_)));
    /// assert!(matches!(Source::parse("x.npy").unwrap(), Source::Npy(_)));
    /// assert_eq!(
    ///     Source::parse("m.safetensors:w").unwrap(),
    ///     Source::Safetensors("m.safetensors".into(), Some("w".into()))
    /// );
    /// assert!(Source::parse("x.csv").is_err());
    /// ```
    pub fn parse(spec: &str) -> CliResult<Source> {
        let trimmed = spec.trim();
        if trimmed.starts_with('[')
            || trimmed == "true"
            || trimmed == "false"
            || (trimmed.parse::<f64>().is_ok() && !Path::new(spec).exists())
        {
            return Ok(Source::Inline(trimmed.to_string()));
        }
        if let Some(pos) = spec.find(".safetensors") {
            let end = pos + ".safetensors".len();
            let path = PathBuf::from(&spec[..end]);
            return match &spec[end..] {
                "" => Ok(Source::Safetensors(path, None)),
                rest => match rest.strip_prefix(':') {
                    Some(name) if !name.is_empty() => {
                        Ok(Source::Safetensors(path, Some(name.to_string())))
                    }
                    _ => Err(
                        Failure::input(format!("`{spec}`: expected `file.safetensors:name`"))
                            .with_hint(
                                "name the tensor after a colon, e.g. `model.safetensors:weight`",
                            ),
                    ),
                },
            };
        }
        if spec.ends_with(".npy") {
            return Ok(Source::Npy(PathBuf::from(spec)));
        }
        Err(Failure::input(format!(
            "`{spec}` is neither a .npy or .safetensors file nor an inline tensor"
        ))
        .with_hint(
            "give `x.npy`, `x.safetensors:name`, or an inline tensor such as '[[1, 2], [3, 4]]'",
        ))
    }
}

/// Loads a tensor argument (see the module docs).
///
/// ```
/// use gather_cli::tensor_io::{load, LoadOptions, Role};
/// let t = load("[[0, 2], [1, 0]]", Role::Index, &LoadOptions::default()).unwrap();
/// assert_eq!(t.shape(), &[2, 2]);
/// let e = load("/nonexistent.npy", Role::Data, &LoadOptions::default()).unwrap_err();
/// assert!(e.message.starts_with("cannot read /nonexistent.npy"));
/// ```
pub fn load(spec: &str, role: Role, opts: &LoadOptions) -> CliResult<Tensor> {
    let dtype = if role == Role::Data { opts.dtype } else { None };
    let t = match Source::parse(spec)? {
        Source::Inline(text) => return parse_inline(&text, role, dtype),
        Source::Npy(path) => {
            let bytes = read_file(&path, opts.progress)?;
            parse_npy(&bytes, opts.bf16_npy && role == Role::Data)
                .map_err(|e| Failure::input(e).context(&path.display().to_string()))?
        }
        Source::Safetensors(path, name) => {
            let bytes = read_file(&path, opts.progress)?;
            parse_safetensors(&bytes, name.as_deref())
                .map_err(|e| e.context(&path.display().to_string()))?
        }
    };
    match dtype {
        Some(d) if d != t.dtype() => cast(&t, d).map_err(|e| e.context(spec)),
        _ => Ok(t),
    }
}

/// Reads a whole file, with a progress bar when that takes more than a second.
fn read_file(path: &Path, progress: bool) -> CliResult<Vec<u8>> {
    let fail = |e: std::io::Error| Failure::input(format!("cannot read {}: {e}", path.display()));
    let mut file = std::fs::File::open(path).map_err(fail)?;
    let len = file.metadata().map_err(fail)?.len();
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len as usize).map_err(|_| {
        Failure::input(format!(
            "{}: {len} bytes do not fit in memory",
            path.display()
        ))
    })?;
    let bar = Progress::start(
        &format!("reading {}", path.display()),
        Kind::Bytes(len),
        progress,
    );
    let mut chunk = vec![0u8; 1 << 22];
    loop {
        let n = file.read(&mut chunk).map_err(fail)?;
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&chunk[..n]);
        bar.inc(n as u64);
    }
    bar.finish();
    Ok(bytes)
}

// ---------------------------------------------------------------------------------------------
// Inline literals

enum Leaf {
    Bool(bool),
    Int(i64),
    Float(f64),
}

fn flatten(
    v: &Value,
    depth: usize,
    shape: &mut Vec<usize>,
    leaves: &mut Vec<Leaf>,
) -> Result<(), String> {
    match v {
        Value::Array(items) => {
            if depth == shape.len() {
                if !leaves.is_empty() {
                    return Err("ragged nesting: a number where a list was expected".into());
                }
                shape.push(items.len());
            } else if shape[depth] != items.len() {
                return Err(format!(
                    "ragged nesting: lists of length {} and {} at depth {depth}",
                    shape[depth],
                    items.len()
                ));
            }
            for item in items {
                flatten(item, depth + 1, shape, leaves)?;
            }
            Ok(())
        }
        _ if depth != shape.len() => {
            Err("ragged nesting: a number where a list was expected".into())
        }
        Value::Bool(b) => {
            leaves.push(Leaf::Bool(*b));
            Ok(())
        }
        Value::Number(n) => {
            leaves.push(match n.as_i64() {
                Some(i) => Leaf::Int(i),
                None if n.is_u64() => return Err(format!("integer {n} does not fit in int64")),
                None => Leaf::Float(n.as_f64().ok_or_else(|| format!("bad number {n}"))?),
            });
            Ok(())
        }
        other => Err(format!("unexpected {other} (only numbers, true and false)")),
    }
}

/// Parses an inline literal (see the module docs) into a tensor of `dtype`, or of the literal's
/// own type: `bool`, `int64`, or `float32` (an empty list is `float32` for data and `int64`
/// for indices).
///
/// ```
/// use gather_cli::tensor_io::{parse_inline, Role};
/// assert_eq!(parse_inline("7", Role::Data, None).unwrap().shape(), &[] as &[usize]);
/// assert_eq!(parse_inline("[]", Role::Index, None).unwrap().dtype(), gather::DType::I64);
/// assert!(parse_inline("[1, true]", Role::Data, None).is_err());
/// ```
pub fn parse_inline(text: &str, role: Role, dtype: Option<DType>) -> CliResult<Tensor> {
    let bad = |why: String| {
        Failure::input(format!("inline tensor `{text}`: {why}"))
            .with_hint("write nested lists of numbers, e.g. '[[10, 20, 30], [40, 50, 60]]' (quote it for the shell)")
    };
    let v: Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    let mut shape = Vec::new();
    let mut leaves = Vec::new();
    flatten(&v, 0, &mut shape, &mut leaves).map_err(bad)?;
    if leaves.len() != shape.iter().product::<usize>() {
        return Err(bad("ragged nesting".into()));
    }
    let bools = leaves.iter().filter(|l| matches!(l, Leaf::Bool(_))).count();
    if bools != 0 && bools != leaves.len() {
        return Err(bad("mixes true/false with numbers".into()));
    }
    let floats = leaves.iter().any(|l| matches!(l, Leaf::Float(_)));
    let own = if bools > 0 {
        DType::Bool
    } else if floats || (leaves.is_empty() && role == Role::Data) {
        DType::F32
    } else {
        DType::I64
    };
    let target = dtype.unwrap_or(own);
    let scalars: Vec<Scalar> = leaves
        .iter()
        .map(|l| match *l {
            Leaf::Bool(b) => Scalar::Bool(b),
            Leaf::Int(i) => Scalar::Int(i),
            Leaf::Float(x) => Scalar::Float(x),
        })
        .collect();
    from_scalars(target, &shape, &scalars)
        .map_err(|e| e.context(&format!("inline tensor `{text}`")))
}

fn from_scalars(dtype: DType, shape: &[usize], values: &[Scalar]) -> CliResult<Tensor> {
    fn go<T: TensorElem>(shape: &[usize], values: &[Scalar]) -> CliResult<Tensor> {
        let mut data = Vec::with_capacity(values.len());
        for &s in values {
            if let (Scalar::Float(x), false) = (s, T::DTYPE.is_float()) {
                if x.fract() != 0.0 || !x.is_finite() {
                    return Err(Failure::input(format!(
                        "{x} is not a whole number, so it cannot be {}",
                        T::DTYPE
                    )));
                }
            }
            data.push(T::from_scalar(s)?);
        }
        ArrayD::from_shape_vec(IxDyn(shape), data)
            .map(T::wrap)
            .map_err(|e| Failure::input(format!("shape {shape:?}: {e}")))
    }
    match dtype {
        DType::Bool => go::<bool>(shape, values),
        DType::U8 => go::<u8>(shape, values),
        DType::I8 => go::<i8>(shape, values),
        DType::I16 => go::<i16>(shape, values),
        DType::I32 => go::<i32>(shape, values),
        DType::I64 => go::<i64>(shape, values),
        DType::U16 => go::<u16>(shape, values),
        DType::U32 => go::<u32>(shape, values),
        DType::U64 => go::<u64>(shape, values),
        DType::F16 => go::<f16>(shape, values),
        DType::BF16 => go::<bf16>(shape, values),
        DType::F32 => go::<f32>(shape, values),
        DType::F64 => go::<f64>(shape, values),
        _ => Err(Failure::input(format!(
            "{} is not supported here",
            dtype.name()
        ))),
    }
}

/// Converts `t` to `dtype` exactly: fails on values that do not fit (300 into uint8) and on
/// fractions into integer types.
///
/// ```
/// use gather::{dynamic::Tensor, DType};
/// let t = Tensor::from(ndarray::arr1(&[1i64, 300]).into_dyn());
/// assert_eq!(gather_cli::tensor_io::cast(&t, DType::F32).unwrap().dtype(), DType::F32);
/// assert!(gather_cli::tensor_io::cast(&t, DType::U8).is_err());
/// ```
pub fn cast(t: &Tensor, dtype: DType) -> CliResult<Tensor> {
    let flat = Flat::of(t);
    let scalars: Vec<Scalar> = (0..flat.len())
        .map(|i| match flat.dtype {
            DType::Bool => Ok(Scalar::Bool(flat.bits[i] != 0)),
            DType::U64 => i64::try_from(flat.bits[i])
                .map(Scalar::Int)
                .map_err(|_| Failure::input(format!("{} does not fit in int64", flat.bits[i]))),
            d if d.is_integer() => Ok(Scalar::Int(flat.bits[i] as i64)),
            _ => Ok(Scalar::Float(flat.vals[i])),
        })
        .collect::<CliResult<_>>()?;
    from_scalars(dtype, t.shape(), &scalars)
        .map_err(|e| e.context(&format!("converting {} to {dtype}", t.dtype())))
}

// ---------------------------------------------------------------------------------------------
// Raw little-endian element bytes

/// Element types as little-endian bytes (the layout of `.npy` and `.safetensors` data).
trait Le: TensorElem {
    const SIZE: usize;
    fn read(b: &[u8]) -> Self;
    fn put(self, out: &mut Vec<u8>);
}

macro_rules! le_num {
    ($($t:ty),*) => {$(
        impl Le for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_le_bytes(a)
            }
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
le_num!(u8, i8, i16, i32, i64, u16, u32, u64, f16, bf16, f32, f64);

impl Le for bool {
    const SIZE: usize = 1;
    fn read(b: &[u8]) -> Self {
        b[0] != 0
    }
    fn put(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
}

fn element_size(dtype: DType) -> usize {
    match dtype {
        DType::Bool | DType::U8 | DType::I8 => 1,
        DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
        DType::I32 | DType::U32 | DType::F32 => 4,
        DType::I64 | DType::U64 | DType::F64 => 8,
        _ => unreachable!("gather-cli knows every DType of its gather version"),
    }
}

/// The row-major little-endian bytes of `t`'s elements.
///
/// ```
/// use gather::dynamic::Tensor;
/// let t = Tensor::from(ndarray::arr1(&[1u16, 258]).into_dyn());
/// assert_eq!(gather_cli::tensor_io::data_bytes(&t), vec![1, 0, 2, 1]);
/// ```
pub fn data_bytes(t: &Tensor) -> Vec<u8> {
    fn go<T: Le>(a: &ArrayD<T>) -> Vec<u8> {
        let mut out = Vec::with_capacity(a.len() * T::SIZE);
        for &v in a.iter() {
            v.put(&mut out);
        }
        out
    }
    with_tensor!(t, a => go(a))
}

fn decode_typed<T: Le>(data: &[u8], shape: &[usize], fortran: bool) -> Result<Tensor, String> {
    let values: Vec<T> = data.chunks_exact(T::SIZE).map(T::read).collect();
    let array = if fortran {
        ArrayD::from_shape_vec(IxDyn(shape).f(), values)
            .map(|a| a.as_standard_layout().into_owned())
    } else {
        ArrayD::from_shape_vec(IxDyn(shape), values)
    };
    array
        .map(T::wrap)
        .map_err(|e| format!("data does not match shape {shape:?}: {e}"))
}

fn decode(dtype: DType, data: &[u8], shape: &[usize], fortran: bool) -> Result<Tensor, String> {
    match dtype {
        DType::Bool => decode_typed::<bool>(data, shape, fortran),
        DType::U8 => decode_typed::<u8>(data, shape, fortran),
        DType::I8 => decode_typed::<i8>(data, shape, fortran),
        DType::I16 => decode_typed::<i16>(data, shape, fortran),
        DType::I32 => decode_typed::<i32>(data, shape, fortran),
        DType::I64 => decode_typed::<i64>(data, shape, fortran),
        DType::U16 => decode_typed::<u16>(data, shape, fortran),
        DType::U32 => decode_typed::<u32>(data, shape, fortran),
        DType::U64 => decode_typed::<u64>(data, shape, fortran),
        DType::F16 => decode_typed::<f16>(data, shape, fortran),
        DType::BF16 => decode_typed::<bf16>(data, shape, fortran),
        DType::F32 => decode_typed::<f32>(data, shape, fortran),
        DType::F64 => decode_typed::<f64>(data, shape, fortran),
        _ => Err(format!("{} has no decoder", dtype.name())),
    }
}

/// The number of bytes of `shape` elements of `size` bytes, or an error when that overflows.
fn byte_count(shape: &[usize], size: usize) -> Result<usize, String> {
    shape
        .iter()
        .try_fold(size, |acc, &s| acc.checked_mul(s))
        .ok_or_else(|| format!("shape {shape:?} is too large"))
}

// ---------------------------------------------------------------------------------------------
// .npy

/// The fields of a `.npy` header this reader needs.
struct NpyHeader {
    descr: String,
    fortran: bool,
    shape: Vec<usize>,
    data_start: usize,
}

/// The value after `'key':` in a header dict, up to the next top-level comma or brace.
fn header_field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let pos = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = header[pos + key.len() + 2..].trim_start();
    Some(rest.strip_prefix(':')?.trim_start())
}

fn parse_npy_header(bytes: &[u8]) -> Result<NpyHeader, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not a .npy file (it does not start with the .npy magic bytes)".into());
    }
    let (len, start): (usize, usize) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!("unsupported .npy format version {v}")),
    };
    let end = start
        .checked_add(len)
        .filter(|&e| e <= bytes.len())
        .ok_or("the .npy header is truncated")?;
    let header =
        std::str::from_utf8(&bytes[start..end]).map_err(|_| "the .npy header is not text")?;
    let malformed = |what: &str| format!("malformed .npy header ({what}): {}", header.trim());
    let descr = header_field(header, "descr").ok_or_else(|| malformed("no 'descr'"))?;
    if descr.starts_with('[') {
        return Err("structured dtypes (records) are not supported".into());
    }
    let quote = descr.chars().next().filter(|c| *c == '\'' || *c == '"');
    let quote = quote.ok_or_else(|| malformed("'descr' is not a string"))?;
    let descr = descr[1..]
        .split(quote)
        .next()
        .ok_or_else(|| malformed("'descr' is not a string"))?
        .to_string();
    let fortran = match header_field(header, "fortran_order") {
        Some(v) if v.starts_with("True") => true,
        Some(v) if v.starts_with("False") => false,
        _ => return Err(malformed("no 'fortran_order'")),
    };
    let shape_text = header_field(header, "shape")
        .and_then(|v| v.strip_prefix('('))
        .and_then(|v| v.split(')').next())
        .ok_or_else(|| malformed("no 'shape' tuple"))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L')
                .parse::<usize>()
                .map_err(|_| malformed(&format!("bad dimension `{s}`")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(NpyHeader {
        descr,
        fortran,
        shape,
        data_start: end,
    })
}

/// The dtype of a `.npy` descriptor (`<f4` → float32); `<u2` is bfloat16 with `bf16`.
fn npy_dtype(descr: &str, bf16: bool) -> Result<DType, String> {
    let (order, code) = descr.split_at(descr.len().min(1));
    if order == ">" && !code.ends_with('1') {
        return Err(format!(
            "big-endian data (`{descr}`) is not supported; save it little-endian (NumPy: `a.astype(a.dtype.newbyteorder('<'))`)"
        ));
    }
    Ok(match code {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u2" if bf16 => DType::BF16,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => {
            return Err(format!(
                "unsupported dtype `{descr}`; supported: bool, (u)int8/16/32/64, float16/32/64 (and bfloat16 as `<u2` with --bf16-npy)"
            ));
        }
    })
}

/// Parses a `.npy` file of any supported dtype (with `bf16`, `<u2` data is bfloat16).
///
/// ```
/// use gather::dynamic::Tensor;
/// use gather_cli::tensor_io::{npy_bytes, parse_npy};
/// let t = Tensor::from(ndarray::arr2(&[[1.5f32, 2.0]]).into_dyn());
/// assert_eq!(parse_npy(&npy_bytes(&t), false).unwrap(), t);
/// assert!(parse_npy(b"\x93NUMPY\x01\x00", false).is_err());
/// ```
pub fn parse_npy(bytes: &[u8], bf16: bool) -> Result<Tensor, String> {
    let h = parse_npy_header(bytes)?;
    let dtype = npy_dtype(&h.descr, bf16)?;
    let need = byte_count(&h.shape, element_size(dtype))?;
    let data = &bytes[h.data_start..];
    if data.len() < need {
        return Err(format!(
            "the file is truncated: shape {} of {dtype} needs {need} bytes of data, found {}",
            gather::error::fmt_shape(&h.shape),
            data.len()
        ));
    }
    decode(dtype, &data[..need], &h.shape, h.fortran)
}

/// The bytes of a `.npy` file (version 1.0, C order) holding `t`; bfloat16 is stored as `<u2`
/// bit patterns.
///
/// ```
/// use gather::dynamic::Tensor;
/// let t = Tensor::from(ndarray::arr0(true).into_dyn());
/// let bytes = gather_cli::tensor_io::npy_bytes(&t);
/// assert_eq!(gather_cli::tensor_io::parse_npy(&bytes, false).unwrap(), t);
/// ```
pub fn npy_bytes(t: &Tensor) -> Vec<u8> {
    let dims: Vec<String> = t.shape().iter().map(|s| s.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        crate::npy::descr_for(t.dtype())
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let data = data_bytes(t);
    let mut bytes = Vec::with_capacity(10 + header.len() + data.len());
    bytes.extend_from_slice(b"\x93NUMPY\x01\x00");
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&data);
    bytes
}

// ---------------------------------------------------------------------------------------------
// .safetensors

fn st_dtype(d: safetensors::Dtype) -> Option<DType> {
    use safetensors::Dtype as S;
    Some(match d {
        S::BOOL => DType::Bool,
        S::U8 => DType::U8,
        S::I8 => DType::I8,
        S::I16 => DType::I16,
        S::I32 => DType::I32,
        S::I64 => DType::I64,
        S::U16 => DType::U16,
        S::U32 => DType::U32,
        S::U64 => DType::U64,
        S::F16 => DType::F16,
        S::BF16 => DType::BF16,
        S::F32 => DType::F32,
        S::F64 => DType::F64,
        _ => return None,
    })
}

fn to_st_dtype(d: DType) -> safetensors::Dtype {
    use safetensors::Dtype as S;
    match d {
        DType::Bool => S::BOOL,
        DType::U8 => S::U8,
        DType::I8 => S::I8,
        DType::I16 => S::I16,
        DType::I32 => S::I32,
        DType::I64 => S::I64,
        DType::U16 => S::U16,
        DType::U32 => S::U32,
        DType::U64 => S::U64,
        DType::F16 => S::F16,
        DType::BF16 => S::BF16,
        DType::F32 => S::F32,
        DType::F64 => S::F64,
        _ => unreachable!("gather-cli knows every DType of its gather version"),
    }
}

/// Reads the tensor `name` of a `.safetensors` file (or its only tensor when `name` is `None`).
///
/// ```
/// use gather::dynamic::Tensor;
/// use gather_cli::tensor_io::{parse_safetensors, safetensors_bytes};
/// let t = Tensor::from(ndarray::arr1(&[half::bf16::from_f32(1.5)]).into_dyn());
/// let bytes = safetensors_bytes(&[("w".to_string(), t.clone())]).unwrap();
/// assert_eq!(parse_safetensors(&bytes, Some("w")).unwrap(), t);
/// assert_eq!(parse_safetensors(&bytes, None).unwrap(), t);
/// assert!(parse_safetensors(&bytes, Some("b")).unwrap_err().message.contains("no tensor `b`"));
/// ```
pub fn parse_safetensors(bytes: &[u8], name: Option<&str>) -> CliResult<Tensor> {
    let file = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| Failure::input(format!("not a valid .safetensors file: {e}")))?;
    let mut names = file.names();
    names.sort();
    let listing = || {
        let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        format!("the file holds: {}", quoted.join(", "))
    };
    let name = match name {
        Some(n) => n.to_string(),
        None if names.len() == 1 => names[0].to_string(),
        None => {
            return Err(Failure::input(format!(
                "the file holds {} tensors; name one as `file.safetensors:name`",
                names.len()
            ))
            .with_hint(listing()));
        }
    };
    let view = file.tensor(&name).map_err(|_| {
        Failure::input(format!("no tensor `{name}` in the file")).with_hint(listing())
    })?;
    let dtype = st_dtype(view.dtype()).ok_or_else(|| {
        Failure::input(format!(
            "tensor `{name}` has dtype {:?}, which gather does not support",
            view.dtype()
        ))
        .with_hint("supported: BOOL, U8, I8, I16, I32, I64, U16, U32, U64, F16, BF16, F32, F64")
    })?;
    decode(dtype, view.data(), view.shape(), false)
        .map_err(|e| Failure::input(format!("tensor `{name}`: {e}")))
}

/// The bytes of a `.safetensors` file holding the named tensors.
///
/// ```
/// let t = gather::dynamic::Tensor::zeros(gather::DType::U64, &[2, 0]);
/// let bytes = gather_cli::tensor_io::safetensors_bytes(&[("z".into(), t.clone())]).unwrap();
/// assert_eq!(gather_cli::tensor_io::parse_safetensors(&bytes, Some("z")).unwrap(), t);
/// ```
pub fn safetensors_bytes(tensors: &[(String, Tensor)]) -> CliResult<Vec<u8>> {
    let data: Vec<(String, DType, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(n, t)| (n.clone(), t.dtype(), t.shape().to_vec(), data_bytes(t)))
        .collect();
    let views = data
        .iter()
        .map(|(n, d, s, b)| {
            safetensors::tensor::TensorView::new(to_st_dtype(*d), s.clone(), b)
                .map(|v| (n.clone(), v))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::input(format!("cannot build the .safetensors data: {e}")))?;
    safetensors::serialize(views, None)
        .map_err(|e| Failure::input(format!("cannot build the .safetensors data: {e}")))
}

// ---------------------------------------------------------------------------------------------
// Atomic output

/// A file written completely into a temporary file beside its target, not yet in place.
pub struct Pending {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl Pending {
    /// Writes `bytes` into a new temporary file in `path`'s folder.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("x.bin");
    /// let p = gather_cli::tensor_io::Pending::write(&path, b"abc").unwrap();
    /// assert!(!path.exists()); // not in place before commit
    /// p.commit().unwrap();
    /// assert_eq!(std::fs::read(&path).unwrap(), b"abc");
    /// ```
    pub fn write(path: &Path, bytes: &[u8]) -> CliResult<Pending> {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let fail =
            |e: std::io::Error| Failure::input(format!("cannot write {}: {e}", path.display()));
        let mut builder = tempfile::Builder::new();
        builder.prefix(".gather-").suffix(".tmp");
        // Like any new file: readable by all, as the umask allows (tempfile's default is 0600).
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        if !dir.is_dir() {
            return Err(Failure::input(format!(
                "cannot write {}: the folder {} does not exist",
                path.display(),
                dir.display()
            )));
        }
        let mut tmp = builder.tempfile_in(&dir).map_err(fail)?;
        tmp.write_all(bytes).map_err(fail)?;
        tmp.as_file().sync_all().map_err(fail)?;
        Ok(Pending {
            tmp,
            path: path.to_path_buf(),
        })
    }

    /// Renames the temporary file into place.
    pub fn commit(self) -> CliResult<()> {
        let path = self.path;
        self.tmp
            .persist(&path)
            .map(|_| ())
            .map_err(|e| Failure::input(format!("cannot write {}: {}", path.display(), e.error)))
    }
}

/// Where an output goes: a `.npy` file, or a `.safetensors` file and the tensor name to use.
/// Fails when the file's folder does not exist, so that a long run does not end in that error.
///
/// ```
/// use gather_cli::tensor_io::output_target;
/// assert!(output_target("out.npy").is_ok());
/// assert!(output_target("[1, 2]").is_err());
/// assert!(output_target("/nonexistent/out.npy").unwrap_err().message.contains("does not exist"));
/// ```
pub fn output_target(spec: &str) -> CliResult<Source> {
    if let Ok(Source::Npy(p) | Source::Safetensors(p, _)) = Source::parse(spec) {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(Failure::input(format!(
                    "cannot write {}: the folder {} does not exist",
                    p.display(),
                    dir.display()
                )));
            }
        }
    }
    match Source::parse(spec) {
        Ok(Source::Inline(_)) | Err(_) => Err(Failure::input(format!(
            "`{spec}` is not an output file name"
        ))
        .with_hint("write to `out.npy` or `out.safetensors` (optionally `out.safetensors:name`)")),
        Ok(s) => Ok(s),
    }
}

/// Prepares the bytes of one output file: a `.npy` file holds one tensor; a `.safetensors` file
/// holds every tensor of `tensors`, named by their names (or by `:name` for a single one).
pub fn prepare_output(target: &Source, tensors: &[(String, Tensor)]) -> CliResult<Pending> {
    match target {
        Source::Npy(path) => match tensors {
            [(_, t)] => Pending::write(path, &npy_bytes(t)),
            _ => Err(Failure::input(format!(
                "{}: a .npy file holds one tensor, but there are {}",
                path.display(),
                tensors.len()
            ))),
        },
        Source::Safetensors(path, name) => {
            let named: Vec<(String, Tensor)> = match (name, tensors) {
                (Some(n), [(_, t)]) => vec![(n.clone(), t.clone())],
                (Some(_), _) => {
                    return Err(Failure::input(format!(
                        "{}: several outputs cannot share one name",
                        path.display()
                    ))
                    .with_hint(
                        "leave out `:name`; the tensors are then stored under their own names",
                    ));
                }
                (None, _) => tensors.to_vec(),
            };
            Pending::write(path, &safetensors_bytes(&named)?)
        }
        Source::Inline(_) => Err(Failure::input("an inline tensor is not an output file")),
    }
}

// ---------------------------------------------------------------------------------------------
// Printing

/// `t` as nested lists, the inline syntax (`[[10, 30], [50, 40]]`); long axes are cut to their
/// first and last three entries around `...`.
///
/// ```
/// use gather::dynamic::Tensor;
/// let t = Tensor::from(ndarray::Array1::from_iter(0..10i32).into_dyn());
/// assert_eq!(gather_cli::tensor_io::show_tensor(&t), "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]");
/// let t = Tensor::from(ndarray::Array1::from_iter(0..100i32).into_dyn());
/// assert_eq!(gather_cli::tensor_io::show_tensor(&t), "[0, 1, 2, ..., 97, 98, 99]");
/// ```
pub fn show_tensor(t: &Tensor) -> String {
    show_flat(&Flat::of(t))
}

/// [`show_tensor`] of a [`Flat`] copy.
pub fn show_flat(f: &Flat) -> String {
    let summarize = f.len() > 64;
    let mut strides = vec![1usize; f.shape.len()];
    for d in (0..f.shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * f.shape[d + 1];
    }
    let mut out = String::new();
    nested(f, 0, 0, &strides, summarize, &mut out);
    out
}

fn nested(
    f: &Flat,
    axis: usize,
    offset: usize,
    strides: &[usize],
    summarize: bool,
    out: &mut String,
) {
    if axis == f.shape.len() {
        out.push_str(&f.show(offset));
        return;
    }
    let n = f.shape[axis];
    out.push('[');
    let cut = summarize && n > 6;
    let mut first = true;
    for i in 0..n {
        if cut && (3..n - 3).contains(&i) {
            if i == 3 {
                out.push_str(", ...");
            }
            continue;
        }
        if !first {
            out.push_str(", ");
        }
        first = false;
        nested(
            f,
            axis + 1,
            offset + i * strides[axis],
            strides,
            summarize,
            out,
        );
    }
    out.push(']');
}

/// `[2, 3] int64`: a tensor's shape and dtype.
///
/// ```
/// let t = gather::dynamic::Tensor::zeros(gather::DType::BF16, &[2, 3]);
/// assert_eq!(gather_cli::tensor_io::describe(&t), "[2, 3] bfloat16");
/// ```
pub fn describe(t: &Tensor) -> String {
    format!("{} {}", gather::error::fmt_shape(t.shape()), t.dtype())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::arr2;

    #[test]
    fn every_dtype_round_trips_through_npy_and_safetensors() {
        for dtype in DType::ALL {
            let t = cast(
                &Tensor::from(arr2(&[[0i64, 1, 0], [1, 1, 0]]).into_dyn()),
                dtype,
            )
            .unwrap();
            let back = parse_npy(&npy_bytes(&t), dtype == DType::BF16).unwrap();
            assert_eq!(back, t, "{dtype} via npy");
            let st = safetensors_bytes(&[("t".into(), t.clone())]).unwrap();
            assert_eq!(
                parse_safetensors(&st, Some("t")).unwrap(),
                t,
                "{dtype} via safetensors"
            );
        }
    }

    #[test]
    fn malformed_npy_files_are_errors_not_panics() {
        let good = npy_bytes(&Tensor::from(arr2(&[[1.0f32, 2.0], [3.0, 4.0]]).into_dyn()));
        for cut in 0..good.len() {
            let r = parse_npy(&good[..cut], false);
            assert!(r.is_err(), "a file cut at {cut} bytes was accepted");
        }
        // A header that claims a gigantic shape: an error, not an allocation.
        let mut huge = good.clone();
        let text =
            String::from_utf8_lossy(&huge[10..74]).replace("(2, 2)", "(99999999999, 99999999999)");
        huge.splice(10..74, text.into_bytes());
        assert!(parse_npy(&huge, false).is_err());
        let e = parse_npy(&good, false).map(|t| t.dtype());
        assert_eq!(e, Ok(DType::F32));
    }

    #[test]
    fn fortran_order_files_are_read_in_logical_order() {
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        let mut header = "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }".to_string();
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        for v in [1i32, 4, 2, 5, 3, 6] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        let t = parse_npy(&bytes, false).unwrap();
        assert_eq!(t, Tensor::from(arr2(&[[1i32, 2, 3], [4, 5, 6]]).into_dyn()));
    }

    #[test]
    fn summarised_printing_keeps_the_edges_of_every_axis() {
        let t = Tensor::from(
            ndarray::Array2::from_shape_fn((10, 10), |(i, j)| (i * 10 + j) as i32).into_dyn(),
        );
        let s = show_tensor(&t);
        assert!(
            s.starts_with("[[0, 1, 2, ..., 7, 8, 9], [10, 11, 12, ..., 17, 18, 19], [20"),
            "{s}"
        );
        assert!(s.ends_with("[90, 91, 92, ..., 97, 98, 99]]"), "{s}");
    }
}
