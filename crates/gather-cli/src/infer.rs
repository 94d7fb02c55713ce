//! `gather infer`: given an input `A` and the output `B` you want, find every `dim` and an index
//! with `gather(A, dim, index) == B`, or say why there is none.
//!
//! For a dim `d`, every element `B[p]` must occur in the input's lane through `p` along `d`
//! (the elements `A[p with p[d] = k]` for every `k`); the index holds such a `k` for each `p`.
//! Values are compared by bit pattern (gather copies bits; any NaN matches any NaN), so `-0.0`
//! and `0.0` differ. When a value occurs several times in its lane the index is not unique: the
//! report says so, and the index shown takes the first occurrence.
//!
//! ```
//! use gather_cli::infer::infer;
//! use gather::dynamic::Tensor;
//! use ndarray::array;
//! let a = Tensor::from(array![[10, 20, 30], [40, 50, 60]].into_dyn());
//! let b = Tensor::from(array![[10, 30], [50, 40]].into_dyn());
//! let r = infer(&a, &b).unwrap();
//! assert_eq!(r.working_dims(), vec![1]);
//! assert_eq!(r.index_for(1).unwrap().as_slice().unwrap(), &[0, 2, 1, 0]);
//! ```

use std::collections::HashMap;
use std::io::Write;

use gather::dynamic::Tensor;
use gather::error::fmt_shape;
use ndarray::{ArrayD, IxDyn};

use crate::compare::Flat;
use crate::explain::{label, unravel};
use crate::fail::{CliResult, Failure};
use crate::tensor_io::{describe, show_tensor};

/// The verdict for one dim.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// `gather(A, dim, index) == B` with this index.
    Works {
        /// The index (the first match where there are several).
        index: ArrayD<i64>,
        /// How many output elements had more than one match.
        ambiguous: usize,
        /// One such element, described.
        example: Option<String>,
    },
    /// Why no index works for this dim.
    Fails(String),
}

/// The verdicts of every dim.
#[derive(Debug, Clone, PartialEq)]
pub struct Inference {
    /// The input's shape.
    pub input_shape: Vec<usize>,
    /// The output's shape as searched for (a size-1 axis inserted when `squeezed`).
    pub output_shape: Vec<usize>,
    /// The output had one dim fewer than the input; each dim `d` was tried with a size-1 axis
    /// inserted at `d` (PyTorch's `gather(A, d, index).squeeze(d)`).
    pub squeezed: bool,
    /// `(dim, verdict)` for every dim of the input.
    pub dims: Vec<(usize, Verdict)>,
    /// A reason that rules out every dim at once (dtype or rank), if any.
    pub global: Option<String>,
}

impl Inference {
    /// The dims that work.
    pub fn working_dims(&self) -> Vec<usize> {
        self.dims
            .iter()
            .filter(|(_, v)| matches!(v, Verdict::Works { .. }))
            .map(|(d, _)| *d)
            .collect()
    }

    /// The index found for `dim`, if that dim works.
    pub fn index_for(&self, dim: usize) -> Option<&ArrayD<i64>> {
        self.dims.iter().find_map(|(d, v)| match v {
            Verdict::Works { index, .. } if *d == dim => Some(index),
            _ => None,
        })
    }

    /// Prints the report.
    pub fn print(&self, out: &mut dyn Write) -> std::io::Result<()> {
        if let Some(g) = &self.global {
            writeln!(out, "no dim works: {g}")?;
            return Ok(());
        }
        let n = self.input_shape.len().max(1);
        if self.squeezed {
            writeln!(
                out,
                "the output has one dim fewer than the input; gather keeps the rank, so each dim d is tried as gather(input, d, index).squeeze(d) == output"
            )?;
        }
        for (d, v) in &self.dims {
            let name = format!("dim {d} (= {})", *d as i64 - n as i64);
            match v {
                Verdict::Fails(why) => writeln!(out, "{name}: no: {why}")?,
                Verdict::Works {
                    index,
                    ambiguous,
                    example,
                } => {
                    let total = index.len();
                    let unique = if *ambiguous == 0 {
                        "unique"
                    } else {
                        "not unique"
                    };
                    let call = if self.squeezed {
                        format!("gather(input, {d}, index).squeeze({d}) == output")
                    } else {
                        format!("gather(input, {d}, index) == output")
                    };
                    writeln!(out, "{name}: yes ({unique}): {call} with")?;
                    let t = Tensor::from(index.clone());
                    writeln!(out, "  index {} = {}", describe(&t), show_tensor(&t))?;
                    if *ambiguous > 0 {
                        writeln!(
                            out,
                            "  ambiguous: {ambiguous} of {total} output elements occur more than once along dim {d}, because of repeated values{}; the index takes the first occurrence, and any of them works",
                            example
                                .as_ref()
                                .map(|e| format!(" (e.g. {e})"))
                                .unwrap_or_default()
                        )?;
                    }
                }
            }
        }
        let works = self.working_dims();
        match works.len() {
            0 => writeln!(out, "no dim works")?,
            1 => writeln!(out, "answer: dim {}", works[0])?,
            _ => {
                let list: Vec<String> = works.iter().map(|d| d.to_string()).collect();
                writeln!(out, "ambiguous: dims {} all work", list.join(", "))?
            }
        }
        Ok(())
    }
}

/// A bit pattern that makes every NaN equal.
fn key(f: &Flat, i: usize) -> u64 {
    if f.is_nan(i) { u64::MAX } else { f.bits[i] }
}

/// `input[0][:][1]`: the lane through `p` along `d`.
fn lane_label(p: &[usize], d: usize) -> String {
    let mut s = "input".to_string();
    for (a, c) in p.iter().enumerate() {
        if a == d {
            s.push_str("[:]");
        } else {
            s.push_str(&format!("[{c}]"));
        }
    }
    s
}

/// Tries one dim: `a_shape` and `b_shape` have the same rank (at least 1).
fn try_dim(
    a: &Flat,
    a_shape: &[usize],
    b: &Flat,
    b_shape: &[usize],
    d: usize,
    shown_b: &[usize],
) -> Verdict {
    for ax in 0..a_shape.len() {
        if ax != d && b_shape[ax] > a_shape[ax] {
            return Verdict::Fails(format!(
                "the output has size {} at dim {ax} but the input only {}; gather's output is no larger than the input except along dim",
                b_shape[ax], a_shape[ax]
            ));
        }
    }
    let size = a_shape[d];
    if size == 0 && !b.is_empty() {
        return Verdict::Fails(format!(
            "dim {d} of the input is empty, so there is nothing to pick"
        ));
    }
    let mut strides = vec![1usize; a_shape.len()];
    for ax in (0..a_shape.len().saturating_sub(1)).rev() {
        strides[ax] = strides[ax + 1] * a_shape[ax + 1];
    }
    let mut lanes: HashMap<usize, HashMap<u64, (usize, usize)>> = HashMap::new();
    let mut index = Vec::with_capacity(b.len());
    let mut ambiguous = 0;
    let mut example = None;
    for p in 0..b.len() {
        let pc = unravel(p, b_shape);
        let base: usize = (0..pc.len())
            .filter(|&ax| ax != d)
            .map(|ax| pc[ax] * strides[ax])
            .sum();
        let lane = lanes.entry(base).or_insert_with(|| {
            let mut m: HashMap<u64, (usize, usize)> = HashMap::new();
            for k in 0..size {
                let e = m.entry(key(a, base + k * strides[d])).or_insert((k, 0));
                e.1 += 1;
            }
            m
        });
        let shown_p = unravel(p, shown_b);
        match lane.get(&key(b, p)) {
            Some(&(k, count)) => {
                index.push(k as i64);
                if count > 1 {
                    ambiguous += 1;
                    if example.is_none() {
                        let ks: Vec<String> = (0..size)
                            .filter(|&k| key(a, base + k * strides[d]) == key(b, p))
                            .take(4)
                            .map(|k| {
                                let mut c = pc.clone();
                                c[d] = k;
                                label("input", &c)
                            })
                            .collect();
                        example = Some(format!(
                            "{} = {} is {}{}",
                            label("out", &shown_p),
                            b.show(p),
                            ks.join(" and "),
                            if count > 4 { " and more" } else { "" }
                        ));
                    }
                }
            }
            None => {
                let vals: Vec<String> = (0..size.min(8))
                    .map(|k| a.show(base + k * strides[d]))
                    .collect();
                let more = if size > 8 { ", ..." } else { "" };
                return Verdict::Fails(format!(
                    "{} = {} is not in {} = [{}{more}]",
                    label("out", &shown_p),
                    b.show(p),
                    lane_label(&pc, d),
                    vals.join(", ")
                ));
            }
        }
    }
    match ArrayD::from_shape_vec(IxDyn(shown_b), index) {
        Ok(index) => Verdict::Works {
            index,
            ambiguous,
            example,
        },
        Err(e) => Verdict::Fails(format!("internal shape error: {e}")),
    }
}

/// Finds every dim (and an index) with `gather(a, dim, index) == b`.
pub fn infer(a: &Tensor, b: &Tensor) -> CliResult<Inference> {
    let fa = Flat::of(a);
    let fb = Flat::of(b);
    let a_shape = if fa.shape.is_empty() {
        vec![1]
    } else {
        fa.shape.clone()
    };
    let b_view = if fb.shape.is_empty() {
        vec![1]
    } else {
        fb.shape.clone()
    };
    let mut r = Inference {
        input_shape: fa.shape.clone(),
        output_shape: fb.shape.clone(),
        squeezed: false,
        dims: Vec::new(),
        global: None,
    };
    if fa.dtype != fb.dtype {
        r.global = Some(format!(
            "the input is {} but the output is {}; gather keeps the dtype",
            fa.dtype, fb.dtype
        ));
        return Ok(r);
    }
    let n = a_shape.len();
    if b_view.len() == n {
        for d in 0..n {
            r.dims
                .push((d, try_dim(&fa, &a_shape, &fb, &b_view, d, &fb.shape)));
        }
    } else if fb.shape.len() + 1 == fa.shape.len() {
        r.squeezed = true;
        for d in 0..n {
            let mut unsqueezed = fb.shape.clone();
            unsqueezed.insert(d, 1);
            r.dims
                .push((d, try_dim(&fa, &a_shape, &fb, &unsqueezed, d, &unsqueezed)));
        }
    } else {
        r.global = Some(format!(
            "the input has {} dims {} but the output {} dims {}; gather's output has the input's number of dims (the index's shape)",
            fa.shape.len(),
            fmt_shape(&fa.shape),
            fb.shape.len(),
            fmt_shape(&fb.shape)
        ));
    }
    Ok(r)
}

/// Chooses the index to save: that of `dim` when given, else of the only working dim (the
/// first one, when several work).
pub fn chosen_index(r: &Inference, dim: Option<i64>) -> CliResult<(usize, ArrayD<i64>)> {
    let n = r.input_shape.len().max(1) as i64;
    let works = r.working_dims();
    let d = match dim {
        Some(d) => {
            let d = if d < 0 { d + n } else { d };
            if d < 0 || d >= n {
                return Err(Failure::input(format!(
                    "--dim {d} is out of range for {n} dims"
                )));
            }
            d as usize
        }
        None => *works
            .first()
            .ok_or_else(|| Failure::input("no dim works, so there is no index to save"))?,
    };
    r.index_for(d).cloned().map(|i| (d, i)).ok_or_else(|| {
        Failure::input(format!(
            "dim {d} does not work, so there is no index to save"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array, array};

    #[test]
    fn arange_example_finds_dim_1_only() {
        let a = Tensor::from(
            Array::from_shape_vec((2, 3, 4), (0..24i64).collect())
                .unwrap()
                .into_dyn(),
        );
        let b = Tensor::from(
            array![
                [[0i64, 1, 2, 3], [8, 9, 10, 11]],
                [[12, 13, 14, 15], [20, 21, 22, 23]]
            ]
            .into_dyn(),
        );
        let r = infer(&a, &b).unwrap();
        assert_eq!(r.working_dims(), vec![1]);
        let want = array![
            [[0i64, 0, 0, 0], [2, 2, 2, 2]],
            [[0, 0, 0, 0], [2, 2, 2, 2]]
        ]
        .into_dyn();
        assert_eq!(r.index_for(1), Some(&want));
    }

    #[test]
    fn repeated_values_are_reported_as_ambiguous() {
        let a = Tensor::from(array![[1.0f32, 1.0, 2.0]].into_dyn());
        let b = Tensor::from(array![[1.0f32, 2.0]].into_dyn());
        let r = infer(&a, &b).unwrap();
        match &r.dims[1].1 {
            Verdict::Works {
                ambiguous,
                example,
                index,
            } => {
                assert_eq!(*ambiguous, 1);
                assert_eq!(index, &array![[0i64, 2]].into_dyn());
                assert!(
                    example
                        .as_ref()
                        .unwrap()
                        .contains("input[0][0] and input[0][1]")
                );
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn a_squeezed_output_is_found_with_its_axis() {
        let logits = Tensor::from(array![[0.1f32, 0.7, 0.2], [0.5, 0.3, 0.2]].into_dyn());
        let picked = Tensor::from(array![0.7f32, 0.5].into_dyn());
        let r = infer(&logits, &picked).unwrap();
        assert!(r.squeezed);
        assert_eq!(r.working_dims(), vec![1]);
        assert_eq!(r.index_for(1), Some(&array![[1i64], [0]].into_dyn()));
    }

    #[test]
    fn dtype_and_rank_mismatches_rule_out_every_dim() {
        let a = Tensor::from(array![[1i32, 2]].into_dyn());
        let b = Tensor::from(array![[1i64]].into_dyn());
        assert!(infer(&a, &b).unwrap().global.unwrap().contains("int32"));
        let c = Tensor::from(ndarray::arr3(&[[[1i32]]]).into_dyn());
        let d = Tensor::from(array![1i32].into_dyn());
        assert!(infer(&c, &d).unwrap().global.unwrap().contains("dims"));
    }
}
