//! Which tensors and arguments each op takes, with PyTorch's defaults, and the command-line
//! options they come from. `run`, `explain` and `check` all build their calls here, so an op
//! gets the same arguments (every one written out, defaults included, as in the conformance
//! suite's `case.json`) whichever subcommand runs it.
//!
//! ```
//! use gather_cli::opargs::{spec, OpOptions};
//! let s = spec("scatter_reduce").unwrap();
//! assert_eq!(s.outputs, &["output"]);
//! let mut o = OpOptions::default();
//! o.dim = Some("1".into());
//! o.reduce = Some("amax".into());
//! let args = o.to_args(s, &["input", "index", "src"]).unwrap();
//! assert_eq!(args.str("reduce").unwrap(), "amax");
//! assert_eq!(args.bool_or("include_self", false).unwrap(), true); // PyTorch's default
//! assert!(spec("frobnicate").is_err());
//! ```

use clap::Args as ClapArgs;
use gather::dynamic::{Arg, Args};

use crate::fail::{CliResult, Failure};

/// How an argument behaves when it is not given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fallback {
    /// It must be given.
    Required,
    /// PyTorch's default value.
    Value(Lit),
    /// `None` (null).
    Null,
    /// Only passed when given (optional arguments PyTorch has no default value for).
    Omit,
}

/// A constant argument value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lit {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
}

/// One op: its tensors (name, required), its arguments (name, default), its outputs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpSpec {
    /// PyTorch's name.
    pub name: &'static str,
    /// Tensor arguments and whether each is required.
    pub tensors: &'static [(&'static str, bool)],
    /// Non-tensor arguments and their defaults.
    pub args: &'static [(&'static str, Fallback)],
    /// Output names, in order.
    pub outputs: &'static [&'static str],
}

use Fallback::{Null, Omit, Required, Value};
use Lit::{Bool, Int};

const OUT: &[&str] = &["output"];
const VALUES_INDICES: &[&str] = &["values", "indices"];
/// The segment ops: `src` and one of three ways of giving the segments (the library checks that
/// exactly one is given).
const SEGMENT_TENSORS: &[(&str, bool)] = &[
    ("src", true),
    ("offsets", false),
    ("ids", false),
    ("lengths", false),
];

/// Every op of the library, as `gather::dynamic::call` runs it.
pub const SPECS: &[OpSpec] = &[
    OpSpec {
        name: "gather",
        tensors: &[("input", true), ("index", true)],
        args: &[
            ("dim", Required),
            ("sparse_grad", Value(Bool(false))),
            ("bounds", Omit),
            ("fill_value", Omit),
        ],
        outputs: OUT,
    },
    OpSpec {
        name: "scatter",
        tensors: &[("input", true), ("index", true), ("src", false)],
        args: &[
            ("dim", Required),
            ("value", Omit),
            ("reduce", Omit),
            ("bounds", Omit),
            ("fill_value", Omit),
        ],
        outputs: OUT,
    },
    OpSpec {
        name: "scatter_add",
        tensors: &[("input", true), ("index", true), ("src", true)],
        args: &[("dim", Required), ("bounds", Omit), ("fill_value", Omit)],
        outputs: OUT,
    },
    OpSpec {
        name: "scatter_reduce",
        tensors: &[("input", true), ("index", true), ("src", true)],
        args: &[
            ("dim", Required),
            ("reduce", Required),
            ("include_self", Value(Bool(true))),
            ("bounds", Omit),
            ("fill_value", Omit),
        ],
        outputs: OUT,
    },
    OpSpec {
        name: "index_select",
        tensors: &[("input", true), ("index", true)],
        args: &[("dim", Required), ("bounds", Omit), ("fill_value", Omit)],
        outputs: OUT,
    },
    OpSpec {
        name: "take",
        tensors: &[("input", true), ("index", true)],
        args: &[("bounds", Omit), ("fill_value", Omit)],
        outputs: OUT,
    },
    OpSpec {
        name: "take_along_dim",
        tensors: &[("input", true), ("index", true)],
        args: &[("dim", Null), ("bounds", Omit), ("fill_value", Omit)],
        outputs: OUT,
    },
    OpSpec {
        name: "index_add",
        tensors: &[("input", true), ("index", true), ("source", true)],
        args: &[
            ("dim", Required),
            ("alpha", Value(Int(1))),
            ("bounds", Omit),
            ("fill_value", Omit),
        ],
        outputs: OUT,
    },
    OpSpec {
        name: "index_copy",
        tensors: &[("input", true), ("index", true), ("source", true)],
        args: &[("dim", Required), ("bounds", Omit), ("fill_value", Omit)],
        outputs: OUT,
    },
    OpSpec {
        name: "index_fill",
        tensors: &[("input", true), ("index", true)],
        args: &[
            ("dim", Required),
            ("value", Required),
            ("bounds", Omit),
            ("fill_value", Omit),
        ],
        outputs: OUT,
    },
    OpSpec {
        name: "index_reduce",
        tensors: &[("input", true), ("index", true), ("source", true)],
        args: &[
            ("dim", Required),
            ("reduce", Required),
            ("include_self", Value(Bool(true))),
            ("bounds", Omit),
            ("fill_value", Omit),
        ],
        outputs: OUT,
    },
    OpSpec {
        name: "masked_select",
        tensors: &[("input", true), ("mask", true)],
        args: &[],
        outputs: OUT,
    },
    OpSpec {
        name: "masked_scatter",
        tensors: &[("input", true), ("mask", true), ("source", true)],
        args: &[],
        outputs: OUT,
    },
    OpSpec {
        name: "put",
        tensors: &[("input", true), ("index", true), ("source", true)],
        args: &[
            ("accumulate", Value(Bool(false))),
            ("bounds", Omit),
            ("fill_value", Omit),
        ],
        outputs: OUT,
    },
    OpSpec {
        name: "topk",
        tensors: &[("input", true)],
        args: &[
            ("k", Required),
            ("dim", Value(Int(-1))),
            ("largest", Value(Bool(true))),
            ("sorted", Value(Bool(true))),
        ],
        outputs: VALUES_INDICES,
    },
    OpSpec {
        name: "sort",
        tensors: &[("input", true)],
        args: &[
            ("dim", Value(Int(-1))),
            ("descending", Value(Bool(false))),
            ("stable", Value(Bool(false))),
        ],
        outputs: VALUES_INDICES,
    },
    OpSpec {
        name: "argsort",
        tensors: &[("input", true)],
        args: &[
            ("dim", Value(Int(-1))),
            ("descending", Value(Bool(false))),
            ("stable", Value(Bool(false))),
        ],
        outputs: OUT,
    },
    OpSpec {
        name: "repeat_interleave",
        tensors: &[("input", false), ("repeats", false)],
        args: &[("repeats", Omit), ("dim", Null), ("output_size", Omit)],
        outputs: OUT,
    },
    OpSpec {
        name: "select_batched",
        tensors: &[("input", true), ("index", true)],
        args: &[
            ("dim", Required),
            ("batch_dims", Value(Int(0))),
            ("bounds", Omit),
            ("fill_value", Omit),
        ],
        outputs: OUT,
    },
    OpSpec {
        name: "scatter_groups",
        tensors: &[("src", true), ("index", true)],
        args: &[
            ("dim", Required),
            ("reduce", Required),
            ("correction", Omit),
            ("dim_size", Omit),
            ("fill", Omit),
        ],
        outputs: OUT,
    },
    OpSpec {
        name: "scatter_any",
        tensors: &[("src", true), ("index", true)],
        args: &[("dim", Required), ("dim_size", Omit), ("fill", Omit)],
        outputs: OUT,
    },
    OpSpec {
        name: "scatter_all",
        tensors: &[("src", true), ("index", true)],
        args: &[("dim", Required), ("dim_size", Omit), ("fill", Omit)],
        outputs: OUT,
    },
    OpSpec {
        name: "scatter_softmax",
        tensors: &[("src", true), ("index", true)],
        args: &[("dim", Required)],
        outputs: OUT,
    },
    OpSpec {
        name: "scatter_log_softmax",
        tensors: &[("src", true), ("index", true)],
        args: &[("dim", Required)],
        outputs: OUT,
    },
    OpSpec {
        name: "scatter_reduce_arg",
        tensors: &[("input", true), ("index", true), ("src", true)],
        args: &[
            ("dim", Required),
            ("reduce", Required),
            ("include_self", Value(Bool(true))),
        ],
        outputs: VALUES_INDICES,
    },
    OpSpec {
        name: "segment_reduce",
        tensors: SEGMENT_TENSORS,
        args: &[
            ("dim", Value(Int(0))),
            ("reduce", Required),
            ("correction", Omit),
            ("fill", Omit),
            ("num_segments", Omit),
        ],
        outputs: OUT,
    },
    OpSpec {
        name: "segment_arg_reduce",
        tensors: SEGMENT_TENSORS,
        args: &[
            ("dim", Value(Int(0))),
            ("reduce", Required),
            ("fill", Omit),
            ("num_segments", Omit),
        ],
        outputs: VALUES_INDICES,
    },
    OpSpec {
        name: "segment_any",
        tensors: SEGMENT_TENSORS,
        args: &[
            ("dim", Value(Int(0))),
            ("fill", Omit),
            ("num_segments", Omit),
        ],
        outputs: OUT,
    },
    OpSpec {
        name: "segment_all",
        tensors: SEGMENT_TENSORS,
        args: &[
            ("dim", Value(Int(0))),
            ("fill", Omit),
            ("num_segments", Omit),
        ],
        outputs: OUT,
    },
    OpSpec {
        name: "segment_softmax",
        tensors: SEGMENT_TENSORS,
        args: &[("dim", Value(Int(0))), ("num_segments", Omit)],
        outputs: OUT,
    },
    OpSpec {
        name: "segment_log_softmax",
        tensors: SEGMENT_TENSORS,
        args: &[("dim", Value(Int(0))), ("num_segments", Omit)],
        outputs: OUT,
    },
    OpSpec {
        name: "bincount",
        tensors: &[("input", true), ("weights", false)],
        args: &[("dim", Null), ("minlength", Value(Int(0)))],
        outputs: OUT,
    },
    OpSpec {
        name: "gather_broadcast",
        tensors: &[("input", true), ("index", true)],
        args: &[("dim", Required)],
        outputs: OUT,
    },
    OpSpec {
        name: "scatter_broadcast",
        tensors: &[("input", true), ("index", true), ("src", true)],
        args: &[("dim", Required)],
        outputs: OUT,
    },
    OpSpec {
        name: "scatter_add_broadcast",
        tensors: &[("input", true), ("index", true), ("src", true)],
        args: &[("dim", Required)],
        outputs: OUT,
    },
    OpSpec {
        name: "scatter_reduce_broadcast",
        tensors: &[("input", true), ("index", true), ("src", true)],
        args: &[
            ("dim", Required),
            ("reduce", Required),
            ("include_self", Value(Bool(true))),
        ],
        outputs: OUT,
    },
];

/// The names of every op, comma-separated (for help texts and hints).
///
/// ```
/// assert!(gather_cli::opargs::op_names().starts_with("gather, scatter, "));
/// ```
pub fn op_names() -> String {
    SPECS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
}

/// The spec of `op`, or an error listing the ops.
pub fn spec(op: &str) -> CliResult<&'static OpSpec> {
    SPECS.iter().find(|s| s.name == op).ok_or_else(|| {
        Failure::input(format!("unknown op `{op}`"))
            .with_hint(format!("the ops are: {}", op_names()))
    })
}

/// The non-tensor options of an op call, as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq, ClapArgs, Default)]
pub struct OpOptions {
    /// The dim to work along; negative counts from the end. `none` for take_along_dim and
    /// repeat_interleave means "flatten".
    #[arg(long, allow_negative_numbers = true, value_name = "D")]
    pub dim: Option<String>,
    /// Reduction: sum, prod, mean, amax, amin (scatter_reduce, index_reduce); add, multiply (scatter).
    #[arg(long, value_name = "NAME")]
    pub reduce: Option<String>,
    /// Include the input's values in the reduction (default true).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub include_self: Option<String>,
    /// Scalar to write (scatter without --src, index_fill): a number, true/false, nan, inf, -inf.
    #[arg(long, allow_negative_numbers = true, value_name = "X")]
    pub value: Option<String>,
    /// Multiplier of the source (index_add, default 1).
    #[arg(long, allow_negative_numbers = true, value_name = "X")]
    pub alpha: Option<String>,
    /// put: add into the destination instead of overwriting (default false).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub accumulate: Option<String>,
    /// topk: how many.
    #[arg(long, short = 'k', allow_negative_numbers = true, value_name = "K")]
    pub k: Option<String>,
    /// topk: the largest (default true) or the smallest.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub largest: Option<String>,
    /// topk: return the k results sorted (default true).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub sorted: Option<String>,
    /// sort, argsort: descending order (default false).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub descending: Option<String>,
    /// sort, argsort: keep the order of equal elements (default false).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub stable: Option<String>,
    /// repeat_interleave: the number of repeats (an integer), or a tensor of repeats (a file
    /// or an inline list).
    #[arg(long, allow_negative_numbers = true, value_name = "N|TENSOR")]
    pub repeats: Option<String>,
    /// repeat_interleave: the total output length along dim.
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub output_size: Option<String>,
    /// select_batched: how many leading axes the index shares with the input (default 0).
    #[arg(long, allow_negative_numbers = true, value_name = "B")]
    pub batch_dims: Option<String>,
    /// What to do with out-of-range index values: error (PyTorch's, the default), wrap (negatives
    /// count from the end), clip, fill (reads; with --fill-value), drop (writes: skip them).
    #[arg(long, value_name = "POLICY")]
    pub bounds: Option<String>,
    /// The value read for out-of-range indices under --bounds fill.
    #[arg(long, allow_negative_numbers = true, value_name = "X")]
    pub fill_value: Option<String>,
    /// scatter_groups, scatter_any/all: the output's size along dim (default: largest index + 1).
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub dim_size: Option<String>,
    /// scatter_groups, segment ops: what empty groups hold: identity (default), zero, nan, or a
    /// value.
    #[arg(long, allow_negative_numbers = true, value_name = "FILL")]
    pub fill: Option<String>,
    /// --reduce var / std: subtracted from the group size in the denominator (default 1).
    #[arg(long, allow_negative_numbers = true, value_name = "C")]
    pub correction: Option<String>,
    /// bincount: the least number of bins (default 0).
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub minlength: Option<String>,
    /// Segment ops with --ids: the number of segments (default: largest id + 1).
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub num_segments: Option<String>,
}

fn parse_bool(name: &str, v: &str) -> CliResult<Arg> {
    match v {
        "true" | "True" | "1" => Ok(Arg::Bool(true)),
        "false" | "False" | "0" => Ok(Arg::Bool(false)),
        _ => Err(Failure::input(format!(
            "--{}: expected true or false, got `{v}`",
            flag(name)
        ))),
    }
}

fn parse_int(name: &str, v: &str) -> CliResult<Arg> {
    v.trim()
        .parse::<i64>()
        .map(Arg::Int)
        .map_err(|_| Failure::input(format!("--{}: expected an integer, got `{v}`", flag(name))))
}

/// A scalar (`value`, `alpha`): `true`/`false`, an integer, a float, `nan`, `inf`, `-inf`.
fn parse_scalar(name: &str, v: &str) -> CliResult<Arg> {
    let v = v.trim();
    match v.to_ascii_lowercase().as_str() {
        "true" => return Ok(Arg::Bool(true)),
        "false" => return Ok(Arg::Bool(false)),
        "nan" => return Ok(Arg::Str("nan".into())),
        "inf" | "+inf" => return Ok(Arg::Str("inf".into())),
        "-inf" => return Ok(Arg::Str("-inf".into())),
        _ => {}
    }
    if let Ok(i) = v.parse::<i64>() {
        return Ok(Arg::Int(i));
    }
    v.parse::<f64>().map(Arg::Float).map_err(|_| {
        Failure::input(format!(
            "--{}: expected a number, true/false, nan or inf, got `{v}`",
            flag(name)
        ))
    })
}

fn flag(name: &str) -> String {
    name.replace('_', "-")
}

/// True when a `--repeats` value is a tensor (a file or an inline list) rather than an integer.
///
/// ```
/// assert!(!gather_cli::opargs::repeats_is_tensor("3"));
/// assert!(gather_cli::opargs::repeats_is_tensor("[1, 2]"));
/// assert!(gather_cli::opargs::repeats_is_tensor("r.npy"));
/// ```
pub fn repeats_is_tensor(v: &str) -> bool {
    v.trim().parse::<i64>().is_err()
}

impl OpOptions {
    /// The options that were given, as `(argument name, text)`.
    fn given(&self) -> Vec<(&'static str, &str)> {
        let all: [(&'static str, &Option<String>); 21] = [
            ("dim", &self.dim),
            ("reduce", &self.reduce),
            ("include_self", &self.include_self),
            ("value", &self.value),
            ("alpha", &self.alpha),
            ("accumulate", &self.accumulate),
            ("k", &self.k),
            ("largest", &self.largest),
            ("sorted", &self.sorted),
            ("descending", &self.descending),
            ("stable", &self.stable),
            ("repeats", &self.repeats),
            ("output_size", &self.output_size),
            ("batch_dims", &self.batch_dims),
            ("bounds", &self.bounds),
            ("fill_value", &self.fill_value),
            ("dim_size", &self.dim_size),
            ("fill", &self.fill),
            ("correction", &self.correction),
            ("minlength", &self.minlength),
            ("num_segments", &self.num_segments),
        ];
        all.into_iter()
            .filter_map(|(n, v)| v.as_deref().map(|v| (n, v)))
            .collect()
    }

    /// The arguments of a call to `spec` with the given tensors (names): every argument the op
    /// takes, given or defaulted. Fails on a missing required argument and on an option the op
    /// does not take.
    pub fn to_args(&self, spec: &OpSpec, tensors: &[&str]) -> CliResult<Args> {
        let op = spec.name;
        let mut args = Args::default();
        let given = self.given();
        for (name, text) in &given {
            let takes = spec.args.iter().any(|(n, _)| n == name);
            let repeats_tensor = *name == "repeats" && repeats_is_tensor(text);
            if !takes || repeats_tensor {
                if repeats_tensor && op == "repeat_interleave" {
                    continue; // a repeats tensor, loaded with the other tensors
                }
                let takes_list: Vec<String> = spec
                    .args
                    .iter()
                    .filter(|(n, _)| *n != "sparse_grad")
                    .map(|(n, _)| format!("--{}", flag(n)))
                    .collect();
                return Err(
                    Failure::input(format!("{op} takes no --{}", flag(name))).with_hint(
                        if takes_list.is_empty() {
                            format!("{op} takes no options besides its tensors")
                        } else {
                            format!("{op} takes {}", takes_list.join(", "))
                        },
                    ),
                );
            }
            let arg = match *name {
                "dim" => match text.trim() {
                    "none" | "None" | "null" => {
                        if spec.args.iter().any(|(n, d)| *n == "dim" && *d == Null) {
                            Arg::None
                        } else {
                            return Err(Failure::input(format!("{op} needs an integer --dim"))
                                .with_hint("dims count from 0, or from -1 at the end"));
                        }
                    }
                    _ => parse_int(name, text)?,
                },
                "reduce" | "bounds" => Arg::Str(text.trim().to_string()),
                "value" | "alpha" | "fill_value" => parse_scalar(name, text)?,
                "fill" => match text.trim() {
                    t @ ("identity" | "zero") => Arg::Str(t.to_string()),
                    _ => parse_scalar(name, text)?,
                },
                "k" | "output_size" | "repeats" | "batch_dims" | "dim_size" | "correction"
                | "minlength" | "num_segments" => parse_int(name, text)?,
                _ => parse_bool(name, text)?,
            };
            args.set(name, arg);
        }
        for (name, default) in spec.args {
            if args.get(name).is_some() {
                continue;
            }
            match default {
                Required => {
                    return Err(
                        Failure::input(format!("{op} needs --{}", flag(name)))
                            .with_hint(match *name {
                            "dim" => {
                                "dims count from 0, or from -1 at the end: e.g. --dim 1 or --dim -1"
                                    .to_string()
                            }
                            "reduce"
                                if op == "scatter_reduce" || op == "scatter_reduce_broadcast" =>
                            {
                                "--reduce sum|prod|mean|amax|amin".to_string()
                            }
                            "reduce" if op == "scatter_groups" || op == "segment_reduce" => {
                                "--reduce sum|prod|mean|amax|amin|first|last|logsumexp|var|std"
                                    .to_string()
                            }
                            "reduce"
                                if op.ends_with("_arg_reduce") || op == "scatter_reduce_arg" =>
                            {
                                "--reduce amax|amin".to_string()
                            }
                            "reduce" => "--reduce prod|mean|amax|amin".to_string(),
                            "value" => "e.g. --value 0, --value -1.5, --value nan".to_string(),
                            "k" => "e.g. -k 3".to_string(),
                            _ => format!("give --{}", flag(name)),
                        }),
                    );
                }
                Value(Lit::Bool(b)) => args.set(name, Arg::Bool(*b)),
                Value(Lit::Int(i)) => args.set(name, Arg::Int(*i)),
                Null => args.set(name, Arg::None),
                Omit => {}
            }
        }
        // Alternatives PyTorch expresses by overloads.
        match op {
            "scatter" => {
                let has_src = tensors.contains(&"src");
                let has_value = args.get("value").is_some();
                if has_src == has_value {
                    return Err(Failure::input(if has_src {
                        "scatter takes either --src or --value, not both"
                    } else {
                        "scatter needs --src (a tensor) or --value (a scalar)"
                    })
                    .with_hint("--src writes src[p] at each index position p; --value writes the same scalar everywhere"));
                }
            }
            "repeat_interleave" => {
                let has_tensor = tensors.contains(&"repeats");
                let has_int = args.get("repeats").is_some();
                if !has_tensor && !has_int {
                    return Err(Failure::input(
                        "repeat_interleave needs --repeats (an integer or a tensor)",
                    )
                    .with_hint("e.g. --repeats 2, or --repeats '[1, 0, 3]'"));
                }
                if !tensors.contains(&"input") && !has_tensor {
                    return Err(Failure::input(
                        "repeat_interleave without --input needs a tensor of repeats",
                    )
                    .with_hint("e.g. --repeats '[1, 0, 3]' gives [0, 2, 2, 2]"));
                }
            }
            _ => {}
        }
        Ok(args)
    }
}

/// The tensors of an op call, as given on the command line: files or inline literals.
#[derive(Debug, Clone, PartialEq, Eq, ClapArgs, Default)]
pub struct TensorOptions {
    /// The input tensor: x.npy, x.safetensors:name, or inline like `'[[10,20,30],[40,50,60]]'`.
    #[arg(
        long,
        allow_hyphen_values = true,
        value_name = "TENSOR",
        help = "The input tensor: x.npy, x.safetensors:name, or inline like '[[10,20,30],[40,50,60]]'"
    )]
    pub input: Option<String>,
    /// The index tensor (integers).
    #[arg(long, allow_hyphen_values = true, value_name = "TENSOR")]
    pub index: Option<String>,
    /// The source tensor of scatter, scatter_add, scatter_reduce.
    #[arg(long, allow_hyphen_values = true, value_name = "TENSOR")]
    pub src: Option<String>,
    /// The source tensor of index_add, index_copy, index_reduce, masked_scatter, put.
    #[arg(long, allow_hyphen_values = true, value_name = "TENSOR")]
    pub source: Option<String>,
    /// The mask of masked_select and masked_scatter (bool).
    #[arg(long, allow_hyphen_values = true, value_name = "TENSOR")]
    pub mask: Option<String>,
    /// Segment ops: CSR offsets (S + 1 positions along dim), 1-D integers.
    #[arg(long, allow_hyphen_values = true, value_name = "TENSOR")]
    pub offsets: Option<String>,
    /// Segment ops: one sorted segment id per position along dim, 1-D integers.
    #[arg(long, allow_hyphen_values = true, value_name = "TENSOR")]
    pub ids: Option<String>,
    /// Segment ops: the length of each segment, 1-D integers.
    #[arg(long, allow_hyphen_values = true, value_name = "TENSOR")]
    pub lengths: Option<String>,
    /// bincount: a weight per input value (the output has its dtype).
    #[arg(long, allow_hyphen_values = true, value_name = "TENSOR")]
    pub weights: Option<String>,
    /// Convert the data tensors (input, src, source, weights; not bincount's integer input) to this dtype: bool, uint8, int8, int16,
    /// int32, int64, uint16, uint32, uint64, float16, bfloat16, float32, float64.
    #[arg(long, value_name = "DTYPE")]
    pub dtype: Option<String>,
    /// Read `<u2` .npy data files as bfloat16 bit patterns (NumPy has no bfloat16).
    #[arg(long)]
    pub bf16_npy: bool,
}

impl TensorOptions {
    /// `(tensor name, argument)` of every tensor given, including a tensor of `--repeats`.
    pub fn given<'a>(&'a self, ops: &'a OpOptions) -> Vec<(&'static str, &'a str)> {
        let mut v: Vec<(&'static str, &str)> = [
            ("input", &self.input),
            ("index", &self.index),
            ("src", &self.src),
            ("source", &self.source),
            ("mask", &self.mask),
            ("offsets", &self.offsets),
            ("ids", &self.ids),
            ("lengths", &self.lengths),
            ("weights", &self.weights),
        ]
        .into_iter()
        .filter_map(|(n, v)| v.as_deref().map(|v| (n, v)))
        .collect();
        if let Some(r) = ops.repeats.as_deref().filter(|r| repeats_is_tensor(r)) {
            v.push(("repeats", r));
        }
        v
    }

    /// The `--dtype`, parsed.
    pub fn dtype(&self) -> CliResult<Option<gather::DType>> {
        parse_dtype(self.dtype.as_deref())
    }
}

/// Parses a dtype name (`float32`, `bfloat16` ...; also `f32`, `i64`, `bf16` ...).
///
/// ```
/// use gather::DType;
/// assert_eq!(gather_cli::opargs::parse_dtype(Some("f16")).unwrap(), Some(DType::F16));
/// assert_eq!(gather_cli::opargs::parse_dtype(Some("int32")).unwrap(), Some(DType::I32));
/// assert!(gather_cli::opargs::parse_dtype(Some("complex64")).is_err());
/// ```
pub fn parse_dtype(name: Option<&str>) -> CliResult<Option<gather::DType>> {
    let Some(name) = name else { return Ok(None) };
    let long = match name {
        "f16" | "half" => "float16",
        "bf16" => "bfloat16",
        "f32" | "float" => "float32",
        "f64" | "double" => "float64",
        "i8" => "int8",
        "i16" => "int16",
        "i32" | "int" => "int32",
        "i64" | "long" => "int64",
        "u8" => "uint8",
        "u16" => "uint16",
        "u32" => "uint32",
        "u64" => "uint64",
        other => other,
    };
    gather::DType::from_name(long).map(Some).ok_or_else(|| {
        let names: Vec<&str> = gather::DType::ALL.iter().map(|d| d.name()).collect();
        Failure::input(format!("unknown dtype `{name}`"))
            .with_hint(format!("the dtypes are: {}", names.join(", ")))
    })
}

/// Checks that the tensors given are those `spec` takes, with every required one present.
pub fn check_tensors(spec: &OpSpec, given: &[&str]) -> CliResult<()> {
    let op = spec.name;
    for g in given {
        if !spec.tensors.iter().any(|(n, _)| n == g) {
            let takes: Vec<String> = spec.tensors.iter().map(|(n, _)| format!("--{n}")).collect();
            let mut f = Failure::input(format!("{op} takes no --{g} tensor"))
                .with_hint(format!("{op} takes {}", takes.join(", ")));
            if (*g == "src" && spec.tensors.iter().any(|(n, _)| *n == "source"))
                || (*g == "source" && spec.tensors.iter().any(|(n, _)| *n == "src"))
            {
                let right = if *g == "src" { "source" } else { "src" };
                f = f.with_hint(format!("{op} calls it --{right} (PyTorch's name)"));
            }
            return Err(f);
        }
    }
    for (name, required) in spec.tensors {
        if *required && !given.contains(name) {
            return Err(Failure::input(format!("{op} needs --{name}"))
                .with_hint("give a .npy file, file.safetensors:name, or an inline tensor like '[[0, 2], [1, 0]]'"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_library_op_has_a_spec_and_back() {
        for (name, _) in gather::dynamic::OPS {
            assert!(spec(name).is_ok(), "{name}");
        }
        for s in SPECS {
            assert!(
                gather::dynamic::OPS.iter().any(|(n, _)| *n == s.name),
                "{}",
                s.name
            );
        }
    }

    #[test]
    fn defaults_are_written_out_and_unknown_options_rejected() {
        let s = spec("sort").unwrap();
        let args = OpOptions::default().to_args(s, &["input"]).unwrap();
        assert_eq!(args.int("dim").unwrap(), -1);
        assert_eq!(args.get("stable"), Some(&Arg::Bool(false)));
        let o = OpOptions {
            k: Some("2".into()),
            ..Default::default()
        };
        let e = o.to_args(s, &["input"]).unwrap_err();
        assert_eq!(e.message, "sort takes no --k");
        let e = OpOptions::default()
            .to_args(spec("gather").unwrap(), &["input", "index"])
            .unwrap_err();
        assert_eq!(e.message, "gather needs --dim");
        let o = OpOptions {
            dim: Some("none".into()),
            ..Default::default()
        };
        assert_eq!(
            o.to_args(spec("take_along_dim").unwrap(), &[])
                .unwrap()
                .get("dim"),
            Some(&Arg::None)
        );
        assert!(o.to_args(spec("gather").unwrap(), &[]).is_err());
    }

    #[test]
    fn select_batched_takes_dim_and_batch_dims_defaulting_to_zero() {
        let s = spec("select_batched").unwrap();
        let o = OpOptions {
            dim: Some("-1".into()),
            ..Default::default()
        };
        let args = o.to_args(s, &["input", "index"]).unwrap();
        assert_eq!(args.int("dim").unwrap(), -1);
        assert_eq!(args.int("batch_dims").unwrap(), 0);
        let o = OpOptions {
            dim: Some("1".into()),
            batch_dims: Some("x".into()),
            ..Default::default()
        };
        assert!(o.to_args(s, &["input", "index"]).is_err());
        let o = OpOptions {
            dim: Some("1".into()),
            batch_dims: Some("1".into()),
            ..Default::default()
        };
        let e = o
            .to_args(spec("gather").unwrap(), &["input", "index"])
            .unwrap_err();
        assert_eq!(e.message, "gather takes no --batch-dims");
    }

    #[test]
    fn scalars_parse_like_the_suite_writes_them() {
        assert_eq!(parse_scalar("value", "-1").unwrap(), Arg::Int(-1));
        assert_eq!(parse_scalar("value", "2.5").unwrap(), Arg::Float(2.5));
        assert_eq!(
            parse_scalar("value", "-inf").unwrap(),
            Arg::Str("-inf".into())
        );
        assert_eq!(parse_scalar("value", "True").unwrap(), Arg::Bool(true));
        assert!(parse_scalar("value", "abc").is_err());
    }
}
