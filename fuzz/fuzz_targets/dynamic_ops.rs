//! Every op and every gradient by name through the dynamic layer, on tensors of any of the 13
//! dtypes with random shapes, values and arguments (dims, k, repeats, output_size, reduce names,
//! scalars, including the extremes). Every call must end in Ok or a typed error.
#![no_main]

use std::collections::BTreeMap;

use gather::DType;
use gather::dynamic::{Arg, Args, GRAD_OPS, Tensor, call, call_grad};
use gather_fuzz::Bytes;
use libfuzzer_sys::fuzz_target;
use ndarray::{ArrayD, Dimension, IxDyn};

const OPS: &[&str] = &[
    "gather",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "index_select",
    "index_add",
    "index_copy",
    "index_fill",
    "index_reduce",
    "take",
    "take_along_dim",
    "put",
    "masked_select",
    "masked_scatter",
    "sort",
    "argsort",
    "topk",
    "repeat_interleave",
];

const DTYPES: [DType; 13] = [
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

const NAMES: &[&str] = &["input", "index", "src", "source", "mask", "repeats"];

/// A random tensor. With `counts`, the values are counts (repeats): small, or extreme enough that
/// the output cannot exist (mid-sized counts ask for gigabytes legitimately).
fn tensor(b: &mut Bytes, dtype: DType, bound: usize, counts: bool) -> Tensor {
    let nd = b.below(4);
    let shape = b.shape(nd);
    let n: usize = shape.iter().product();
    // A small negative count of an unsigned dtype wraps to a mid-sized one (-1 as u16 is 65535):
    // a few thousand of those ask for gigabytes legitimately, so unsigned counts stay positive.
    let unsigned = matches!(dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64);
    let vals: Vec<f64> = (0..n.min(256))
        .map(|_| match b.below(10) {
            0 => f64::NAN,
            // (Infinity as u16 or u32 counts is 65535 or 2^32 - 1: mid-sized again.)
            1 if counts && unsigned => (1u64 << 50) as f64,
            1 => f64::INFINITY,
            2 => -0.0,
            _ => {
                let mut v = b.index_value(bound);
                if counts && unsigned && (-64..0).contains(&v) {
                    v = -v;
                }
                // Every large count is +-2^50: too large for i64/u64, and 0 in a narrower dtype,
                // whose wrap-around of a random 64-bit value would be mid-sized (2^29, say).
                if counts && v.unsigned_abs() > 64 {
                    (v.signum() << 50) as f64
                } else {
                    v as f64
                }
            }
        })
        .collect();
    let at = |k: usize| vals.get(k % vals.len().max(1)).copied().unwrap_or(0.0);
    macro_rules! make {
        ($variant:ident, $conv:expr) => {
            Tensor::$variant(ArrayD::from_shape_fn(IxDyn(&shape), |p| {
                let k: usize = p.slice().iter().fold(0, |acc, &i| acc * 7 + i);
                $conv(at(k))
            }))
        };
    }
    match dtype {
        DType::Bool => make!(Bool, |v: f64| v != 0.0),
        DType::U8 => make!(U8, |v: f64| v as i64 as u8),
        DType::I8 => make!(I8, |v: f64| v as i64 as i8),
        DType::I16 => make!(I16, |v: f64| v as i64 as i16),
        DType::I32 => make!(I32, |v: f64| v as i64 as i32),
        DType::I64 => make!(I64, |v: f64| v as i64),
        DType::U16 => make!(U16, |v: f64| v as i64 as u16),
        DType::U32 => make!(U32, |v: f64| v as i64 as u32),
        DType::U64 => make!(U64, |v: f64| v as i64 as u64),
        DType::F16 => make!(F16, half::f16::from_f64),
        DType::BF16 => make!(BF16, half::bf16::from_f64),
        DType::F32 => make!(F32, |v: f64| v as f32),
        DType::F64 => make!(F64, |v: f64| v),
        other => panic!("the fuzz target has no generator for {other:?}"),
    }
}

fn arg(b: &mut Bytes) -> Arg {
    match b.below(10) {
        0 => Arg::None,
        1 => Arg::Bool(b.flag()),
        2 => Arg::Float([0.5, -1.0, f64::NAN, f64::INFINITY, 1e300][b.below(5)]),
        3 => Arg::Str(
            [
                "sum", "prod", "mean", "amax", "amin", "add", "multiply", "max", "nan", "-inf", "",
            ][b.below(11)]
            .to_string(),
        ),
        // Extremes only: a mid-sized k or repeats (say 2^31) is a legitimate request for gigabytes,
        // which is slow, not wrong; 2^50 and up must be refused.
        4 => Arg::Int([i64::MIN, i64::MAX, 1 << 50, -(1 << 50), 1 << 62][b.below(5)]),
        _ => Arg::Int(b.below(9) as i64 - 4),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes::new(data);
    let grad = b.below(4) == 0;
    let op = if grad {
        GRAD_OPS[b.below(GRAD_OPS.len())].0
    } else {
        OPS[b.below(OPS.len())]
    };
    let mut inputs = BTreeMap::new();
    let count = 1 + b.below(NAMES.len());
    for _ in 0..count {
        let name = NAMES[b.below(NAMES.len())];
        // Index-like inputs are mostly int64 (or bool for masks); values anything.
        let dtype = match (name, b.below(4)) {
            ("index", 0..=2) => DType::I64,
            ("repeats", 0..=2) => DType::I64,
            ("mask", 0..=2) => DType::Bool,
            _ => DTYPES[b.below(DTYPES.len())],
        };
        let t = tensor(&mut b, dtype, 6, name == "repeats");
        inputs.insert(name.to_string(), t);
    }
    let mut args = Args::default();
    for name in [
        "dim",
        "k",
        "repeats",
        "output_size",
        "reduce",
        "include_self",
        "value",
        "alpha",
        "accumulate",
        "largest",
        "sorted",
        "descending",
        "stable",
    ] {
        if b.flag() {
            args.set(name, arg(&mut b));
        }
    }
    let result = if grad {
        let gdtype = [DType::F32, DType::F64, DType::F16][b.below(3)];
        let g = tensor(&mut b, gdtype, 6, false);
        call_grad(op, &args, &inputs, &g.view()).map(|_| ())
    } else {
        call(op, &args, &inputs).map(|_| ())
    };
    if let Err(e) = result {
        assert!(!e.to_string().is_empty(), "an error without a message");
    }
});
