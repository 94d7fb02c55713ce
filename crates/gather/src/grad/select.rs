//! The gradient of `select_batched`: the output gradient added back into zeros of the input's
//! shape, at the rows the forward read (gather's gradient, seen through the same stride-0 index).
//!
//! ```text
//! select_batched(input, axis=1, index, batch_dims=1)     d input[b][index[b][k]][d] += g[b][k][d]
//!
//!  g [2, 2, 2]        index [2, 2]     d input [2, 3, 2]
//!  ┌───┬───┐          ┌───┬───┐        ┌───┬───┐
//!  │ 1 │ 2 │ ──────── │ 2 │ 0 │        │ 3 │ 4 │ n=0 ← g[0][1]
//!  │ 3 │ 4 │          ├───┼───┤        │ 0 │ 0 │ n=1
//!  ├───┼───┤          │ 1 │ 1 │        │ 1 │ 2 │ n=2 ← g[0][0]
//!  │ 5 │ 6 │ ──────── └───┴───┘        ├───┼───┤
//!  │ 7 │ 8 │                           │ 0 │ 0 │
//!  └───┴───┘                           │12 │14 │ n=1 ← g[1][0] + g[1][1]
//!                                      │ 0 │ 0 │
//!                                      └───┴───┘
//! ```

use ndarray::{ArrayBase, ArrayD, Data, Dimension, IntoDimension, IxDyn};

use super::GradFloat;
use super::output::{GradOutputOf, check_grad_output};
use crate::error::Result;
use crate::index::{Bounds, IndexElem, check_bounds};
use crate::ops::select::{flatten_own_axes, plan, reshaped, with_unit_axes};

/// The gradient of [`select_batched()`](crate::select_batched()) with respect to `input`.
///
/// `grad_out` has the forward output's shape,
/// `input.shape[..axis] + index.shape[batch_dims..] + input.shape[axis+1..]`. Rows read several
/// times get the sum of their gradients (in index order; `f16`/`bf16` in `f32`), rows never read
/// get zero.
///
/// ```
/// use ndarray::{Array, array};
/// let roi = Array::<f64, _>::zeros((2, 3, 2));
/// let labels = array![2, 1];
/// let g = array![[1.0, 2.0], [3.0, 4.0]]; // the gradient of the [2, 2] output
/// let d = gather::grad::select_batched(&g, roi.raw_dim(), 1, &labels, 1)?;
/// assert_eq!(d, array![[[0.0, 0.0], [0.0, 0.0], [1.0, 2.0]],
///                      [[0.0, 0.0], [3.0, 4.0], [0.0, 0.0]]].into_dyn());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn select_batched<T, S, DG, I, SI, DI, Sh>(
    grad_out: &ArrayBase<S, DG>,
    input_shape: Sh,
    axis: isize,
    index: &ArrayBase<SI, DI>,
    batch_dims: usize,
) -> Result<ArrayD<T>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    DG: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    Sh: IntoDimension,
{
    let op = "grad::select_batched";
    let shape = input_shape.into_dimension();
    let shape = shape.slice();
    let p = plan(op, shape, axis, index.shape(), batch_dims)?;
    check_grad_output(
        op,
        GradOutputOf::SelectBatched,
        grad_out.shape(),
        &p.out_shape,
    )?;
    let idx = index.view().into_dyn();
    check_bounds(op, &idx, p.axis, shape[p.axis], Bounds::Strict)?;
    let flat = flatten_own_axes(op, &idx, batch_dims)?;
    let unit = with_unit_axes(flat.view(), &p);
    let full = unit
        .broadcast(IxDyn(&p.gather_shape))
        .expect("size-1 axes broadcast to the plan's shape");
    let g = grad_out.view().into_dyn();
    let g = reshaped(op, &g, &p.gather_shape)?;
    super::gather(&g, IxDyn(shape), p.axis as isize, &full)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use half::bf16;
    use ndarray::{Array, Array3, Axis, array};

    #[test]
    fn equals_the_gradient_of_gather_with_the_expanded_index() {
        let keep = array![[4i64, 1, 1], [0, 2, 0]];
        let g = Array::from_shape_fn((2, 3, 4), |(a, b, c)| (a * 12 + b * 4 + c) as f64);
        let got = select_batched(&g, (2, 5, 4), 1, &keep, 1).unwrap();
        let expanded = keep.view().insert_axis(Axis(2));
        let expanded = expanded.broadcast((2, 3, 4)).unwrap();
        let want = crate::grad::gather(&g, (2, 5, 4), 1, &expanded).unwrap();
        assert_eq!(got, want.into_dyn());
    }

    #[test]
    fn matches_finite_differences_of_the_forward() {
        // d/dx of sum(w * select_batched(x)) is the VJP of w; the forward is linear in x, so a
        // central difference is exact up to rounding.
        let x = Array3::from_shape_fn((2, 4, 3), |(a, b, c)| (a * 7 + b * 3 + c) as f64 * 0.1);
        let idx = array![[[3i64, 3], [0, 1]], [[2, 0], [2, 2]]]; // own axes [2, 2]
        let w = Array::from_shape_fn((2, 2, 2, 3), |(a, b, c, d)| {
            (1 + a + 2 * b + 3 * c + d) as f64
        });
        let f = |x: &Array3<f64>| {
            (&crate::select_batched(x, 1, &idx, 1).unwrap() * &w.view().into_dyn()).sum()
        };
        let vjp = select_batched(&w, x.raw_dim(), 1, &idx, 1).unwrap();
        let h = 1e-3;
        for (c, &v) in vjp.indexed_iter() {
            let c = [c[0], c[1], c[2]];
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[c] += h;
            xm[c] -= h;
            let fd = (f(&xp) - f(&xm)) / (2.0 * h);
            assert!((fd - v).abs() < 1e-6, "at {c:?}: fd {fd} vjp {v}");
        }
    }

    #[test]
    fn bf16_gradients_accumulate_in_f32() {
        // 3000 reads of one row: bf16 steps of 16 near 3000 would stall a bf16 accumulator at 256.
        let idx = Array::<i64, _>::zeros((1, 3000));
        let g = Array::from_elem((1, 3000), bf16::ONE);
        let d = select_batched(&g, (1, 2), 1, &idx, 1).unwrap();
        assert_eq!(d[[0, 0]], bf16::from_f32(3008.0));
        assert_eq!(d[[0, 1]], bf16::ZERO);
    }

    #[test]
    fn a_gradient_of_the_wrong_shape_is_an_error() {
        let e = select_batched(
            &Array::<f32, _>::zeros((3, 4)),
            (3, 21, 4),
            1,
            &array![0i64, 1],
            1,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        let e = select_batched(
            &Array::<f32, _>::zeros((2, 4)),
            (2, 21, 4),
            1,
            &array![0i64, 21],
            1,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
    }
}
