//! One conformance case: its `case.json`, decoded.
//!
//! ```
//! let json = r#"{"op": "gather", "args": {"dim": -1, "sparse_grad": false},
//!   "inputs": {"input": "input.npy", "index": "index.npy"},
//!   "expected": {"output": "expected.npy"}, "error": null, "torch_error": null, "grad": null,
//!   "dtype": "float32", "file_dtypes": {"input.npy": "float32", "index.npy": "int64",
//!   "expected.npy": "float32"}, "tolerance": {"rtol": 0.0, "atol": 0.0},
//!   "any_of_duplicates": false, "unordered": false, "ties_any_index": false, "notes": ""}"#;
//! let case = gather_cli::case::Case::parse(json).unwrap();
//! assert_eq!(case.op, "gather");
//! assert_eq!(case.args.int("dim").unwrap(), -1);
//! assert_eq!(case.expected.unwrap()[0], ("output".to_string(), "expected.npy".to_string()));
//! ```

use std::collections::BTreeMap;

use gather::DType;
use gather::dynamic::{Arg, Args};
use serde_json::{Map, Value};

/// A gradient check: the output gradient and the expected input gradients.
#[derive(Debug, Clone, PartialEq)]
pub struct GradSpec {
    /// File of the gradient of the output.
    pub grad_output: String,
    /// `(input name, file)` of every expected input gradient (`expected_grad_<name>`).
    pub expected: Vec<(String, String)>,
    /// `(rtol, atol)` for the gradients.
    pub tolerance: (f64, f64),
}

/// A decoded `case.json` (see the suite's README for the meaning of each field).
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The op's PyTorch name.
    pub op: String,
    /// The non-tensor arguments.
    pub args: Args,
    /// `(tensor argument name, file)`.
    pub inputs: Vec<(String, String)>,
    /// `(output name, file)`, or `None` for an error case.
    pub expected: Option<Vec<(String, String)>>,
    /// The error category the op must fail with.
    pub error: Option<String>,
    /// PyTorch's error message, for information.
    pub torch_error: Option<String>,
    /// The gradient check, if any.
    pub grad: Option<GradSpec>,
    /// Logical dtype of every file.
    pub file_dtypes: BTreeMap<String, DType>,
    /// Forward tolerance `(rtol, atol)`; both zero for exact cases.
    pub tolerance: (f64, f64),
    /// Rule R5 applies.
    pub any_of_duplicates: bool,
    /// Rule R6 applies.
    pub unordered: bool,
    /// Rule R7 applies.
    pub ties_any_index: bool,
    /// Rule R4a: `(output name, file)` of the result an accepting library must produce.
    pub index_dtype_divergence: Option<Vec<(String, String)>>,
    /// What the case exercises.
    pub notes: String,
}

/// Decodes one JSON argument value: integers → `Int`, numbers with a point or exponent →
/// `Float`, booleans, strings (also `"nan"`/`"inf"`/`"-inf"`, decoded later by
/// [`Args::scalar`]), `null` → `None`.
///
/// ```
/// use gather::dynamic::Arg;
/// use gather_cli::case::decode_arg;
/// assert_eq!(decode_arg(&serde_json::json!(3)).unwrap(), Arg::Int(3));
/// let float: serde_json::Value = serde_json::from_str("3.0").unwrap();
/// assert_eq!(decode_arg(&float).unwrap(), Arg::Float(3.0));
/// assert_eq!(decode_arg(&serde_json::json!("nan")).unwrap(), Arg::Str("nan".into()));
/// assert_eq!(decode_arg(&serde_json::json!(null)).unwrap(), Arg::None);
/// assert!(decode_arg(&serde_json::json!([1])).is_err());
/// ```
pub fn decode_arg(v: &Value) -> Result<Arg, String> {
    Ok(match v {
        Value::Null => Arg::None,
        Value::Bool(b) => Arg::Bool(*b),
        Value::String(s) => Arg::Str(s.clone()),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Arg::Int(i)
            } else if n.is_u64() {
                return Err(format!("integer {n} does not fit in i64"));
            } else {
                Arg::Float(n.as_f64().ok_or_else(|| format!("bad number {n}"))?)
            }
        }
        other => return Err(format!("unsupported argument value {other}")),
    })
}

fn object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("`{what}` is not an object"))
}

fn field<'a>(m: &'a Map<String, Value>, name: &str) -> Result<&'a Value, String> {
    m.get(name).ok_or_else(|| format!("missing field `{name}`"))
}

fn string_map(v: &Value, what: &str) -> Result<Vec<(String, String)>, String> {
    object(v, what)?
        .iter()
        .map(|(k, f)| match f.as_str() {
            Some(s) => Ok((k.clone(), s.to_string())),
            None => Err(format!("`{what}.{k}` is not a file name")),
        })
        .collect()
}

fn opt_string(v: &Value, what: &str) -> Result<Option<String>, String> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Err(format!("`{what}` is neither null nor a string")),
    }
}

fn flag(m: &Map<String, Value>, name: &str) -> Result<bool, String> {
    match m.get(name) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(format!("`{name}` is not a boolean")),
    }
}

fn tolerance(v: &Value, what: &str) -> Result<(f64, f64), String> {
    let m = object(v, what)?;
    let num = |k: &str| {
        field(m, k)?
            .as_f64()
            .ok_or_else(|| format!("`{what}.{k}` is not a number"))
    };
    Ok((num("rtol")?, num("atol")?))
}

impl Case {
    /// Parses the text of a `case.json`.
    ///
    /// ```
    /// assert!(gather_cli::case::Case::parse("{}").unwrap_err().contains("`op`"));
    /// ```
    pub fn parse(text: &str) -> Result<Case, String> {
        let root: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
        let m = object(&root, "case.json")?;
        let op = field(m, "op")?
            .as_str()
            .ok_or("`op` is not a string")?
            .to_string();
        let mut args = Args::default();
        for (k, v) in object(field(m, "args")?, "args")? {
            args.set(k, decode_arg(v).map_err(|e| format!("args.{k}: {e}"))?);
        }
        let inputs = string_map(field(m, "inputs")?, "inputs")?;
        let expected = match field(m, "expected")? {
            Value::Null => None,
            v => Some(string_map(v, "expected")?),
        };
        let error = opt_string(field(m, "error")?, "error")?;
        let torch_error = opt_string(m.get("torch_error").unwrap_or(&Value::Null), "torch_error")?;
        let grad = match m.get("grad").unwrap_or(&Value::Null) {
            Value::Null => None,
            g => {
                let gm = object(g, "grad")?;
                let grad_output = field(gm, "grad_output")?
                    .as_str()
                    .ok_or("`grad.grad_output` is not a file name")?
                    .to_string();
                let mut expected = Vec::new();
                for (k, v) in gm {
                    if let Some(name) = k.strip_prefix("expected_grad_") {
                        let file = v
                            .as_str()
                            .ok_or_else(|| format!("`grad.{k}` is not a file"))?;
                        expected.push((name.to_string(), file.to_string()));
                    }
                }
                let tolerance = tolerance(field(gm, "tolerance")?, "grad.tolerance")?;
                Some(GradSpec {
                    grad_output,
                    expected,
                    tolerance,
                })
            }
        };
        let mut file_dtypes = BTreeMap::new();
        for (k, v) in object(field(m, "file_dtypes")?, "file_dtypes")? {
            let name = v
                .as_str()
                .ok_or_else(|| format!("`file_dtypes.{k}` is not a string"))?;
            let dt = DType::from_name(name)
                .ok_or_else(|| format!("`file_dtypes.{k}`: unknown dtype `{name}`"))?;
            file_dtypes.insert(k.clone(), dt);
        }
        let tolerance = match m.get("tolerance") {
            None | Some(Value::Null) => (0.0, 0.0),
            Some(v) => tolerance(v, "tolerance")?,
        };
        let index_dtype_divergence = match m.get("index_dtype_divergence") {
            None | Some(Value::Null) => None,
            Some(v) => Some(string_map(v, "index_dtype_divergence")?),
        };
        if error.is_none() && expected.is_none() {
            return Err("neither `expected` nor `error` is given".into());
        }
        Ok(Case {
            op,
            args,
            inputs,
            expected,
            error,
            torch_error,
            grad,
            file_dtypes,
            tolerance,
            any_of_duplicates: flag(m, "any_of_duplicates")?,
            unordered: flag(m, "unordered")?,
            ties_any_index: flag(m, "ties_any_index")?,
            index_dtype_divergence,
            notes: m
                .get("notes")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        })
    }

    /// The logical dtype of `file`.
    ///
    /// ```
    /// let json = r#"{"op": "take", "args": {}, "inputs": {}, "expected": null,
    ///   "error": "invalid_argument", "file_dtypes": {"a.npy": "bfloat16"}}"#;
    /// let case = gather_cli::case::Case::parse(json).unwrap();
    /// assert_eq!(case.dtype_of("a.npy").unwrap(), gather::DType::BF16);
    /// assert!(case.dtype_of("b.npy").is_err());
    /// ```
    pub fn dtype_of(&self, file: &str) -> Result<DType, String> {
        self.file_dtypes
            .get(file)
            .copied()
            .ok_or_else(|| format!("`file_dtypes` has no entry for {file}"))
    }
}
