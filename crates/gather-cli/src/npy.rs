//! Reading `.npy` files into [`Tensor`]s, by the conformance suite's storage rules.
//!
//! A file is read as the Rust type of its *logical* dtype (the suite's `file_dtypes` entry), and
//! its stored descriptor must be the one the suite's README prescribes for that dtype. The one
//! twist: a `bfloat16` tensor is stored as its raw 16-bit patterns in a `<u2` array.
//!
//! ```
//! use gather::DType;
//! use gather_cli::npy::{descr_for, parse_npy};
//!
//! assert_eq!(descr_for(DType::BF16), "<u2");
//! // A hand-written .npy file: version 1.0, header padded to 64 bytes, two little-endian u16.
//! let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
//! let mut header = "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }".to_string();
//! while (10 + header.len() + 1) % 64 != 0 {
//!     header.push(' ');
//! }
//! header.push('\n');
//! bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
//! bytes.extend_from_slice(header.as_bytes());
//! bytes.extend_from_slice(&[0x80, 0x3f, 0x00, 0xc0]); // 1.0 and -2.0 as bfloat16
//! let t = parse_npy(&bytes, DType::BF16).unwrap();
//! assert_eq!(t.shape(), &[2]);
//! assert_eq!(t.to_f64_vec(), vec![1.0, -2.0]);
//! ```

use std::path::Path;

use gather::DType;
use gather::dynamic::{Tensor, TensorElem};
use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn, ShapeBuilder};
use npyz::{Deserialize, NpyFile, Order};

/// The `.npy` descriptor the suite stores a tensor of logical dtype `dtype` with.
///
/// ```
/// assert_eq!(gather_cli::npy::descr_for(gather::DType::Bool), "|b1");
/// assert_eq!(gather_cli::npy::descr_for(gather::DType::F16), "<f2");
/// ```
pub fn descr_for(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U16 | DType::BF16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        _ => unreachable!("gather-cli knows every DType of its gather version"),
    }
}

/// Reads the `.npy` file at `path` as a tensor of logical dtype `dtype`.
///
/// ```
/// let err = gather_cli::npy::load_npy(std::path::Path::new("/nonexistent.npy"), gather::DType::F32);
/// assert!(err.unwrap_err().contains("/nonexistent.npy"));
/// ```
pub fn load_npy(path: &Path, dtype: DType) -> Result<Tensor, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_npy(&bytes, dtype).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses the bytes of a `.npy` file as a tensor of logical dtype `dtype` (see the module docs).
///
/// ```
/// // Not an .npy file at all.
/// assert!(gather_cli::npy::parse_npy(b"hello", gather::DType::F32).is_err());
/// ```
pub fn parse_npy(bytes: &[u8], dtype: DType) -> Result<Tensor, String> {
    let file = NpyFile::new(bytes).map_err(|e| format!("not a valid .npy file: {e}"))?;
    let descr = match file.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => return Err(format!("unsupported structured dtype {}", other.descr())),
    };
    let want = descr_for(dtype);
    if descr != want {
        return Err(format!(
            "stored as `{descr}`, but logical dtype {dtype} must be stored as `{want}`"
        ));
    }
    let shape: Vec<usize> = file
        .shape()
        .iter()
        .map(|&s| usize::try_from(s).map_err(|_| format!("dimension {s} is too large")))
        .collect::<Result<_, _>>()?;
    let fortran = file.order() == Order::Fortran;
    Ok(match dtype {
        DType::Bool => read::<bool>(file, &shape, fortran)?,
        DType::U8 => read::<u8>(file, &shape, fortran)?,
        DType::I8 => read::<i8>(file, &shape, fortran)?,
        DType::I16 => read::<i16>(file, &shape, fortran)?,
        DType::I32 => read::<i32>(file, &shape, fortran)?,
        DType::I64 => read::<i64>(file, &shape, fortran)?,
        DType::U16 => read::<u16>(file, &shape, fortran)?,
        DType::U32 => read::<u32>(file, &shape, fortran)?,
        DType::U64 => read::<u64>(file, &shape, fortran)?,
        DType::F16 => read::<f16>(file, &shape, fortran)?,
        DType::F32 => read::<f32>(file, &shape, fortran)?,
        DType::F64 => read::<f64>(file, &shape, fortran)?,
        DType::BF16 => {
            let bits = read_array::<u16>(file, &shape, fortran)?;
            Tensor::BF16(bits.mapv(bf16::from_bits))
        }
        _ => return Err(format!("{} has no .npy reader", dtype.name())),
    })
}

fn read<T: Deserialize + TensorElem>(
    file: NpyFile<&[u8]>,
    shape: &[usize],
    fortran: bool,
) -> Result<Tensor, String> {
    Ok(T::wrap(read_array::<T>(file, shape, fortran)?))
}

fn read_array<T: Deserialize + Clone>(
    file: NpyFile<&[u8]>,
    shape: &[usize],
    fortran: bool,
) -> Result<ArrayD<T>, String> {
    let data: Vec<T> = file
        .into_vec()
        .map_err(|e| format!("cannot read the data: {e}"))?;
    let dims = IxDyn(shape);
    let array = if fortran {
        ArrayD::from_shape_vec(dims.f(), data)
    } else {
        ArrayD::from_shape_vec(dims, data)
    }
    .map_err(|e| format!("data does not match shape {shape:?}: {e}"))?;
    Ok(if fortran {
        array.as_standard_layout().into_owned()
    } else {
        array
    })
}

/// The bytes of a `.npy` file (version 1.0, C order) holding `t`, stored the way the suite stores
/// it (`bfloat16` as `<u2` bit patterns). [`parse_npy`] reads it back unchanged.
///
/// ```
/// use gather::dynamic::Tensor;
/// use gather_cli::npy::{parse_npy, to_npy_bytes};
/// let t = Tensor::from(ndarray::arr2(&[[1i16, -2, 3]]).into_dyn());
/// let bytes = to_npy_bytes(&t);
/// assert_eq!(bytes.len() % 64, (3 * 2) % 64); // the header is padded to 64 bytes
/// assert_eq!(parse_npy(&bytes, t.dtype()).unwrap(), t);
/// ```
pub fn to_npy_bytes(t: &Tensor) -> Vec<u8> {
    let flat = crate::compare::Flat::of(t);
    let dims: Vec<String> = flat.shape.iter().map(|s| s.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr_for(flat.dtype)
    );
    // magic (6) + version (2) + header length (2) + header + '\n', padded to 64 bytes.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let size = element_size(flat.dtype);
    let mut bytes = Vec::with_capacity(10 + header.len() + size * flat.len());
    bytes.extend_from_slice(b"\x93NUMPY\x01\x00");
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for b in &flat.bits {
        bytes.extend_from_slice(&b.to_le_bytes()[..size]);
    }
    bytes
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

/// Writes `t` to `path` as a `.npy` file (see [`to_npy_bytes`]).
///
/// ```
/// use gather::dynamic::Tensor;
/// let path = std::env::temp_dir().join("gather_cli_npy_doctest.npy");
/// let t = Tensor::from(ndarray::arr0(half::bf16::from_f32(1.5)).into_dyn());
/// gather_cli::npy::save_npy(&path, &t).unwrap();
/// assert_eq!(gather_cli::npy::load_npy(&path, gather::DType::BF16).unwrap(), t);
/// ```
pub fn save_npy(path: &Path, t: &Tensor) -> Result<(), String> {
    std::fs::write(path, to_npy_bytes(t))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
