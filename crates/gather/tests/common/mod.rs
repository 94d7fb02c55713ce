//! Shared helpers of the property tests: random arrays seen through random layouts, and a plain
//! row-major walk over a shape.
#![allow(dead_code)]

use ndarray::{ArrayD, ArrayViewD, IxDyn, Slice};
use proptest::prelude::*;

/// How an array is laid out in memory relative to its logical shape.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Per axis: step of the slice taken from a larger base (negative reverses), or 0 to make the
    /// axis a stride-0 broadcast of a single element.
    pub steps: Vec<isize>,
    /// Transpose the two last axes of the base before slicing.
    pub transpose: bool,
}

pub fn layout(ndim: usize) -> impl Strategy<Value = Layout> {
    (proptest::collection::vec(prop_oneof![4 => Just(1isize), 1 => Just(2), 2 => Just(-1), 1 => Just(-2), 1 => Just(0)], ndim), any::<bool>())
        .prop_map(|(steps, transpose)| Layout { steps, transpose })
}

/// A base array holding `values` (cycled) from which `view_of` cuts a view of `shape` with `layout`.
pub struct Strided<T> {
    base: ArrayD<T>,
    shape: Vec<usize>,
    layout: Layout,
}

impl<T: Clone> Strided<T> {
    pub fn new(shape: &[usize], layout: &Layout, values: &[T]) -> Self {
        let base_shape: Vec<usize> = shape
            .iter()
            .zip(&layout.steps)
            .map(|(&n, &s)| if s == 0 { 1 } else { n * s.unsigned_abs() })
            .collect();
        let mut base_shape_t = base_shape.clone();
        let nd = shape.len();
        let transpose = layout.transpose && nd >= 2;
        if transpose {
            base_shape_t.swap(nd - 1, nd - 2);
        }
        let count: usize = base_shape_t.iter().product();
        let data: Vec<T> = (0..count)
            .map(|i| values[i % values.len().max(1)].clone())
            .collect();
        let mut base = ArrayD::from_shape_vec(IxDyn(&base_shape_t), data).unwrap();
        if transpose {
            base.swap_axes(nd - 1, nd - 2);
        }
        Strided {
            base,
            shape: shape.to_vec(),
            layout: layout.clone(),
        }
    }

    /// The sliced base: the logical view but with length 1 on the step-0 axes; call
    /// `.broadcast(shape)` on it (see [`Strided::shape`]) for the logical view.
    pub fn sliced(&self) -> ArrayViewD<'_, T> {
        let mut v = self.base.view();
        for (a, &s) in self.layout.steps.iter().enumerate() {
            if s != 0 {
                v.slice_axis_inplace(ndarray::Axis(a), Slice::new(0, None, s));
            }
        }
        v
    }

    /// The logical shape.
    pub fn shape(&self) -> IxDyn {
        IxDyn(&self.shape)
    }
}

/// Every multi-index of `shape` in row-major order.
pub fn positions(shape: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let mut p = vec![0usize; shape.len()];
    for _ in 0..n {
        out.push(p.clone());
        for a in (0..shape.len()).rev() {
            p[a] += 1;
            if p[a] < shape[a] {
                break;
            }
            p[a] = 0;
        }
    }
    out
}

/// A shape of `ndim` axes, each of size `0..=max`.
pub fn shape(ndim: usize, max: usize) -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0..=max, ndim)
}
