//! The library's hints, spelled for the caller's framework.
//!
//! The `gather` crate writes the fix in an error's hint as Rust (`ndarray`) calls:
//! `index.view().insert_axis(Axis(1))`, `mapv(|v| v as i64)`. A Python caller gets the same
//! fix as calls of the framework whose arrays it passed, so that it can be pasted:
//!
//! ```text
//! Rust (the library)                    NumPy                        torch
//! index.view().insert_axis(Axis(1))     np.expand_dims(index, 1)     index.unsqueeze(1)
//! src.mapv(|v| v as f32)                src.astype(np.float32)       src.to(torch.float32)
//! index.index_axis(Axis(0), 0)          index.take(0, axis=0)        index.select(0, 0)
//! ```
//!
//! JAX and CuPy read as NumPy under their own module (`jnp`, `cp`); JAX's index conversions name
//! int32, which JAX keeps without its 64-bit mode. The XLA handler, which raises through JAX
//! rather than through these bindings, spells its hints for JAX too.

use std::sync::OnceLock;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use regex_lite::{Captures, Regex};

/// The framework a hint is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    NumPy,
    Torch,
    Jax,
    CuPy,
}

impl Dialect {
    /// The dialect of a framework module's name (`torch`, `jax.numpy`, `cupy`; anything else
    /// reads as NumPy), as the bindings name the module a result goes back to.
    pub(crate) fn of_module(name: &str) -> Self {
        match name.split('.').next().unwrap_or_default() {
            "torch" => Dialect::Torch,
            "jax" | "jaxlib" => Dialect::Jax,
            "cupy" => Dialect::CuPy,
            _ => Dialect::NumPy,
        }
    }

    fn parse(name: &str) -> Option<Self> {
        match name {
            "numpy" => Some(Dialect::NumPy),
            "torch" => Some(Dialect::Torch),
            "jax" => Some(Dialect::Jax),
            "cupy" => Some(Dialect::CuPy),
            _ => None,
        }
    }

    /// The module prefix of the framework's functions and dtypes.
    fn module(self) -> &'static str {
        match self {
            Dialect::NumPy => "np",
            Dialect::Torch => "torch",
            Dialect::Jax => "jnp",
            Dialect::CuPy => "cp",
        }
    }

    /// `x` with size-1 axes inserted at `axes` (in the order the library inserts them).
    fn expand_dims(self, x: &str, axes: &[&str]) -> String {
        if self == Dialect::Torch {
            return axes
                .iter()
                .fold(x.to_string(), |call, a| format!("{call}.unsqueeze({a})"));
        }
        let axes = match axes {
            [a] => a.to_string(),
            _ => format!("({})", axes.join(", ")),
        };
        format!("{}.expand_dims({x}, {axes})", self.module())
    }

    /// `call` broadcast to `shape` (written as a tuple) without a copy.
    fn broadcast_to(self, call: &str, shape: &str) -> String {
        if self == Dialect::Torch {
            let sizes = shape.trim_start_matches('(').trim_end_matches(')');
            return format!("{call}.expand({})", sizes.trim_end_matches(','));
        }
        format!("{}.broadcast_to({call}, {shape})", self.module())
    }

    /// `x` converted to the library's dtype `ty` (`i64`, `f32`, ...; `_` for the input's).
    fn cast(self, x: &str, ty: &str) -> String {
        let name = match ty {
            "_" => return format!("{x}.{}(input.dtype)", self.cast_method()),
            "i64" if self == Dialect::Jax => "int32",
            "i64" => "int64",
            "i32" => "int32",
            "u8" => "uint8",
            "f32" => "float32",
            "f64" => "float64",
            other => other,
        };
        format!("{x}.{}({}.{name})", self.cast_method(), self.module())
    }

    fn cast_method(self) -> &'static str {
        if self == Dialect::Torch {
            "to"
        } else {
            "astype"
        }
    }
}

type Rule = (Regex, fn(&Captures, Dialect) -> String);

/// The rewrites, in order: the longer forms first, so that the chain of a view's inserted axes
/// is one call and not one per axis.
fn rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| {
        let rule = |pattern: &str, f: fn(&Captures, Dialect) -> String| {
            (Regex::new(pattern).expect("a valid pattern"), f)
        };
        vec![
            rule(
                r"(\w+)\.view\(\)((?:\.insert_axis\(Axis\(\d+\)\))+)(\.broadcast\((\([^)]*\))\)\.unwrap\(\))?",
                |c, d| {
                    let axes: Vec<&str> = c[2]
                        .split("Axis(")
                        .skip(1)
                        .filter_map(|s| s.split(')').next())
                        .collect();
                    let call = d.expand_dims(&c[1], &axes);
                    match c.get(4) {
                        Some(shape) => d.broadcast_to(&call, shape.as_str()),
                        None => call,
                    }
                },
            ),
            rule(r"(\w+)\.insert_axis\(Axis\((\d+)\)\)", |c, d| {
                d.expand_dims(&c[1], &[&c[2]])
            }),
            rule(r"(\w+)\.index_axis\(Axis\((\w+)\), 0\)", |c, d| match d {
                Dialect::Torch => format!("{}.select({}, 0)", &c[1], &c[2]),
                _ => format!("{}.take(0, axis={})", &c[1], &c[2]),
            }),
            rule(r"(\w+)\.mapv\(\|\w+\| \w+ != 0\)", |c, _| {
                format!("{} != 0", &c[1])
            }),
            rule(
                r"(\w+)\.mapv\(\|\w+\| if \w+ < 0 \{ \w+ \+ (\d+) \} else \{ \w+ \}\)",
                |c, d| {
                    let x = &c[1];
                    format!("{}.where({x} < 0, {x} + {}, {x})", d.module(), &c[2])
                },
            ),
            rule(r"(\w*)\.?mapv\(\|\w+\| \w+ as (\w+)\)", |c, d| {
                d.cast(&c[1], &c[2])
            }),
            rule(r"Array1::from_iter\((\w+)\.iter\(\)\.copied\(\)\)", |c, d| {
                match d {
                    Dialect::Torch => format!("{}.flatten()", &c[1]),
                    _ => format!("{}.ravel()", &c[1]),
                }
            }),
            rule(
                r"slice_axis\(Axis\((\d+)\), Slice::from\(\.\.(\d+)\)\)",
                |c, d| match d {
                    Dialect::Torch => format!("narrow({}, 0, {})", &c[1], &c[2]),
                    Dialect::NumPy => format!("take(range({}), axis={})", &c[2], &c[1]),
                    _ => format!("take({}.arange({}), axis={})", d.module(), &c[2], &c[1]),
                },
            ),
            rule(r"(\w+)\.slice_mut\(s!\[\.\.\]\)", |c, _| format!("{}[...]", &c[1])),
            rule(r"\.into_shape_with_order\(", |_, _| ".reshape(".into()),
            rule(r"`into_shape`", |_, _| "`reshape`".into()),
            rule(r"`insert_axis`", |_, d| match d {
                Dialect::Torch => "`unsqueeze`".into(),
                _ => format!("`{}.expand_dims`", d.module()),
            }),
            rule(r"`mapv`", |_, d| format!("`{}`", d.cast_method())),
            rule(r"OutOfBounds::Fill\((\w+)\)", |c, _| {
                format!("bounds=\"fill\", fill_value={}", &c[1])
            }),
            rule(r"OutOfBounds::(\w+)", |c, _| {
                format!("bounds=\"{}\"", c[1].to_lowercase())
            }),
        ]
    })
}

/// `hint` with its Rust calls written in `dialect`.
pub(crate) fn respell(hint: &str, dialect: Dialect) -> String {
    rules().iter().fold(hint.to_string(), |text, (pattern, f)| {
        pattern
            .replace_all(&text, |c: &Captures| f(c, dialect))
            .into_owned()
    })
}

/// _respell(hint, dialect)
///
/// A hint of the library (written as Rust calls) in ``dialect``: ``"numpy"``, ``"torch"``,
/// ``"jax"`` or ``"cupy"``. For ``gather._errors``, which re-spells the errors of tensors that
/// reached the library as NumPy views.
#[pyfunction]
pub(crate) fn _respell(hint: &str, dialect: &str) -> PyResult<String> {
    let d = Dialect::parse(dialect).ok_or_else(|| {
        PyValueError::new_err(format!(
            "no dialect {dialect:?} (there are \"numpy\", \"torch\", \"jax\" and \"cupy\")"
        ))
    })?;
    Ok(respell(hint, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every hint form the library writes, in every dialect.
    #[test]
    fn every_rust_form_is_respelled_in_each_framework() {
        let cases: &[(&str, [&str; 4])] = &[
            (
                "`index.view().insert_axis(Axis(1))`",
                [
                    "`np.expand_dims(index, 1)`",
                    "`index.unsqueeze(1)`",
                    "`jnp.expand_dims(index, 1)`",
                    "`cp.expand_dims(index, 1)`",
                ],
            ),
            (
                "`index.view().insert_axis(Axis(1)).insert_axis(Axis(2)).broadcast((128, 1, 4)).unwrap()`",
                [
                    "`np.broadcast_to(np.expand_dims(index, (1, 2)), (128, 1, 4))`",
                    "`index.unsqueeze(1).unsqueeze(2).expand(128, 1, 4)`",
                    "`jnp.broadcast_to(jnp.expand_dims(index, (1, 2)), (128, 1, 4))`",
                    "`cp.broadcast_to(cp.expand_dims(index, (1, 2)), (128, 1, 4))`",
                ],
            ),
            (
                "`index.view().insert_axis(Axis(0)).broadcast((5,)).unwrap()`",
                [
                    "`np.broadcast_to(np.expand_dims(index, 0), (5,))`",
                    "`index.unsqueeze(0).expand(5)`",
                    "`jnp.broadcast_to(jnp.expand_dims(index, 0), (5,))`",
                    "`cp.broadcast_to(cp.expand_dims(index, 0), (5,))`",
                ],
            ),
            (
                "`input.insert_axis(Axis(0))`",
                [
                    "`np.expand_dims(input, 0)`",
                    "`input.unsqueeze(0)`",
                    "`jnp.expand_dims(input, 0)`",
                    "`cp.expand_dims(input, 0)`",
                ],
            ),
            (
                "`index.index_axis(Axis(a), 0)`",
                [
                    "`index.take(0, axis=a)`",
                    "`index.select(a, 0)`",
                    "`index.take(0, axis=a)`",
                    "`index.take(0, axis=a)`",
                ],
            ),
            (
                "`mask.mapv(|v| v != 0)`",
                ["`mask != 0`", "`mask != 0`", "`mask != 0`", "`mask != 0`"],
            ),
            (
                "`index.mapv(|i| if i < 0 { i + 7 } else { i })`",
                [
                    "`np.where(index < 0, index + 7, index)`",
                    "`torch.where(index < 0, index + 7, index)`",
                    "`jnp.where(index < 0, index + 7, index)`",
                    "`cp.where(index < 0, index + 7, index)`",
                ],
            ),
            (
                "convert with `mapv(|v| v as i64)`",
                [
                    "convert with `.astype(np.int64)`",
                    "convert with `.to(torch.int64)`",
                    "convert with `.astype(jnp.int32)`",
                    "convert with `.astype(cp.int64)`",
                ],
            ),
            (
                "`src.mapv(|v| v as f32)`",
                [
                    "`src.astype(np.float32)`",
                    "`src.to(torch.float32)`",
                    "`src.astype(jnp.float32)`",
                    "`src.astype(cp.float32)`",
                ],
            ),
            (
                "`src.mapv(|v| v as _)`",
                [
                    "`src.astype(input.dtype)`",
                    "`src.to(input.dtype)`",
                    "`src.astype(input.dtype)`",
                    "`src.astype(input.dtype)`",
                ],
            ),
            (
                "`Array1::from_iter(index.iter().copied())`",
                [
                    "`index.ravel()`",
                    "`index.flatten()`",
                    "`index.ravel()`",
                    "`index.ravel()`",
                ],
            ),
            (
                "`slice_axis(Axis(1), Slice::from(..3))`",
                [
                    "`take(range(3), axis=1)`",
                    "`narrow(1, 0, 3)`",
                    "`take(jnp.arange(3), axis=1)`",
                    "`take(cp.arange(3), axis=1)`",
                ],
            ),
            (
                "`self.slice_mut(s![..])`",
                ["`self[...]`", "`self[...]`", "`self[...]`", "`self[...]`"],
            ),
            (
                "(`.into_shape_with_order(n)`)",
                [
                    "(`.reshape(n)`)",
                    "(`.reshape(n)`)",
                    "(`.reshape(n)`)",
                    "(`.reshape(n)`)",
                ],
            ),
            (
                "(`insert_axis`, or `into_shape`, `mapv`)",
                [
                    "(`np.expand_dims`, or `reshape`, `astype`)",
                    "(`unsqueeze`, or `reshape`, `to`)",
                    "(`jnp.expand_dims`, or `reshape`, `astype`)",
                    "(`cp.expand_dims`, or `reshape`, `astype`)",
                ],
            ),
            (
                "use OutOfBounds::Fill(value), or OutOfBounds::Clip",
                ["use bounds=\"fill\", fill_value=value, or bounds=\"clip\""; 4],
            ),
            ("pass dim None", ["pass dim None"; 4]),
        ];
        let dialects = [Dialect::NumPy, Dialect::Torch, Dialect::Jax, Dialect::CuPy];
        for (rust, spelled) in cases {
            for (d, want) in dialects.iter().zip(spelled) {
                assert_eq!(respell(rust, *d), *want, "{rust} in {d:?}");
            }
        }
    }

    /// The libraries' sources hold every hint they write: each code span of a string literal
    /// there, in any dialect, keeps no Rust call (a new hint form without a rule fails here).
    #[test]
    fn no_hint_of_the_library_keeps_a_rust_call() {
        let rust = Regex::new(
            r"Axis\(|mapv|::|\.view\(\)|unwrap|s!\[|insert_axis|into_shape|index_axis|slice_axis|from_iter|slice_mut|\|\w+\|",
        )
        .unwrap();
        let span = Regex::new(r"`([^`\n]+)`").unwrap();
        let argument = Regex::new(r"\{[\w:?]*\}").unwrap();
        let mut checked = 0;
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut dirs = vec![crates.join("gather/src"), crates.join("gather-cuda/src")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                for line in text.lines().filter(|l| {
                    let l = l.trim_start();
                    !l.starts_with("//") && l.contains('"') && !l.contains("assert")
                }) {
                    for c in span.captures_iter(line) {
                        // As the format string writes it: `{{` is `{`, an argument a number.
                        let code = c[1].replace("{{", "\u{1}").replace("}}", "\u{2}");
                        let code = argument.replace_all(&code, "7");
                        let code = &code.replace('\u{1}', "{").replace('\u{2}', "}");
                        if !rust.is_match(code) {
                            continue;
                        }
                        for d in [Dialect::NumPy, Dialect::Torch, Dialect::Jax, Dialect::CuPy] {
                            let out = respell(&format!("`{code}`"), d);
                            assert!(
                                !rust.is_match(&out),
                                "{}: `{code}` reads as {out} in {d:?}",
                                path.display()
                            );
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked >= 20, "only {checked} hint spans found");
    }
}
