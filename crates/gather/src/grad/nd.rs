//! The gradients of `gather_nd` and `scatter_nd` (plain and additive).
//!
//! ```text
//! gather_nd(data, indices)      d data[indices[m]..] += g[m..]        (scatter_nd add of g)
//! scatter_nd(data, indices, updates, None)
//!                               d data = g with zeros on written slices, d updates[m] = g[indices[m]..]
//! scatter_nd(data, indices, updates, Add)
//!                               d data = g,                             d updates[m] = g[indices[m]..]
//! ```

use ndarray::{ArrayBase, ArrayD, Data, Dimension, IntoDimension, IxDyn};

use super::GradFloat;
use super::output::{GradOutputOf, check_grad_output};
use crate::error::{Error, Result};
use crate::index::{Bounds, IndexElem};
use crate::ops::nd::{Reduction, gather_nd_bounded, scatter_nd_bounded};

/// The gradient of [`gather_nd()`](crate::gather_nd()) with respect to `data`: every output
/// slice's gradient added back where it was read (in tuple order; f16/bf16 round per step).
///
/// ```
/// use ndarray::array;
/// let g = array![1.0f32, 10.0, 100.0];
/// let d = gather::grad::gather_nd(&g, (2, 2), &array![[0, 0], [1, 1], [0, 0]], 0)?;
/// assert_eq!(d, array![[101.0, 0.0], [0.0, 10.0]].into_dyn());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn gather_nd<T, S, DG, I, SI, DI, Sh>(
    grad_out: &ArrayBase<S, DG>,
    data_shape: Sh,
    indices: &ArrayBase<SI, DI>,
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
    let op = "grad::gather_nd";
    let shape = data_shape.into_dimension();
    let shape = shape.slice().to_vec();
    // The forward on zeros checks every shape rule and the indices, and gives the output shape.
    let zeros = ArrayD::<T>::from_elem(IxDyn(&shape), T::default());
    let idx = indices.view().into_dyn();
    let fwd = gather_nd_bounded(op, zeros.view(), idx.view(), batch_dims, Bounds::Strict)?;
    check_grad_output(op, GradOutputOf::GatherNd, grad_out.shape(), fwd.shape())?;
    // Batch axes become leading coordinates of each tuple: [B.., M.., k] -> [B.., M.., b + k].
    let q = idx.ndim();
    let k = idx.shape()[q - 1];
    let mut full_shape = idx.shape().to_vec();
    full_shape[q - 1] = batch_dims + k;
    let full = ArrayD::from_shape_fn(IxDyn(&full_shape), |c| {
        let j = c[q - 1];
        if j < batch_dims {
            c[j] as i64
        } else {
            let mut ic = c.slice().to_vec();
            ic[q - 1] = j - batch_dims;
            idx[IxDyn(&ic)].to_i64()
        }
    });
    let mut out = zeros;
    let wide = crate::kernels::zip::map(&grad_out.view().into_dyn(), |v| v.widen());
    let mut acc = crate::kernels::zip::map(&out.view(), |v| v.widen());
    scatter_nd_bounded(
        op,
        acc.view_mut(),
        full.view(),
        wide.view(),
        Reduction::Add,
        Bounds::Strict,
    )?;
    crate::kernels::zip::zip2(&mut out.view_mut(), &acc.view(), |o, &a| *o = T::narrow(a));
    Ok(out)
}

/// The gradients of [`scatter_nd()`](crate::scatter_nd()): `(d data, d updates)`. For
/// `Reduction::None` the data gradient is zero on every written slice; for `Reduction::Add` it is
/// `grad_out`. Each update gets the gradient of the slice it landed on. The other reductions are
/// an error (InvalidArgument).
///
/// ```
/// use gather::ops::nd::Reduction;
/// use ndarray::array;
/// let g = array![[1.0f64, 2.0], [3.0, 4.0]];
/// let (dd, du) = gather::grad::scatter_nd(&g, &array![[1]], (1, 2), Reduction::None)?;
/// assert_eq!(dd, array![[1.0, 2.0], [0.0, 0.0]].into_dyn());
/// assert_eq!(du, array![[3.0, 4.0]].into_dyn());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_nd<T, S, DG, I, SI, DI, Sh>(
    grad_out: &ArrayBase<S, DG>,
    indices: &ArrayBase<SI, DI>,
    updates_shape: Sh,
    reduction: Reduction,
) -> Result<(ArrayD<T>, ArrayD<T>)>
where
    T: GradFloat,
    S: Data<Elem = T>,
    DG: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    Sh: IntoDimension,
{
    let op = "grad::scatter_nd";
    if !matches!(reduction, Reduction::None | Reduction::Add) {
        return Err(Error::invalid(format!(
            "{op}: the gradient of reduction {} is not implemented",
            reduction.name()
        ))
        .with_hint("none and add have gradients; for mul/max/min use scatter_reduce with an element index, whose gradients exist"));
    }
    let us = updates_shape.into_dimension();
    let g = grad_out.view().into_dyn();
    let idx = indices.view().into_dyn();
    // The forward on zeros checks the shapes and the indices.
    let mut written = ArrayD::<T>::from_elem(g.raw_dim(), T::default());
    let ones = ArrayD::from_elem(IxDyn(us.slice()), T::one_value());
    scatter_nd_bounded(
        op,
        written.view_mut(),
        idx.view(),
        ones.view(),
        Reduction::None,
        Bounds::Strict,
    )?;
    let d_updates = gather_nd_bounded(op, g.view(), idx.view(), 0, Bounds::Strict)?;
    let d_data = match reduction {
        Reduction::None => {
            let mut d = g.to_owned();
            d.zip_mut_with(&written, |d, &w| {
                if w != T::default() {
                    *d = T::default()
                }
            });
            d
        }
        _ => g.to_owned(),
    };
    Ok((d_data, d_updates))
}

trait One {
    fn one_value() -> Self;
}

impl<T: GradFloat> One for T {
    fn one_value() -> T {
        T::from_acc(T::acc_one())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn gather_nd_gradient_matches_finite_differences_with_batch_dims() {
        let mut seed = 4u64;
        for _ in 0..40 {
            let r = 2 + (lcg(&mut seed) % 2) as usize;
            let xs: Vec<usize> = (0..r).map(|_| 1 + (lcg(&mut seed) % 3) as usize).collect();
            let b = (lcg(&mut seed) % 2) as usize;
            let k = 1 + (lcg(&mut seed) % (r - b) as u64) as usize;
            let mut is = xs[..b].to_vec();
            is.push(1 + (lcg(&mut seed) % 3) as usize);
            is.push(k);
            let idx = ArrayD::from_shape_fn(IxDyn(&is), |c| {
                (lcg(&mut seed) % xs[b + c[c.ndim() - 1]] as u64) as i64
            });
            let x = ArrayD::from_shape_fn(IxDyn(&xs), |_| (lcg(&mut seed) % 1000) as f64 / 100.0);
            let out = crate::gather_nd(&x, &idx, b).unwrap();
            let w =
                ArrayD::from_shape_fn(out.raw_dim(), |_| (lcg(&mut seed) % 1000) as f64 / 250.0);
            let vjp = gather_nd(&w, xs.clone(), &idx, b).unwrap();
            let f = |x: &ArrayD<f64>| (&crate::gather_nd(x, &idx, b).unwrap() * &w).sum();
            for (c, &v) in vjp.indexed_iter() {
                let (mut xp, mut xm) = (x.clone(), x.clone());
                xp[&c] += 1e-3;
                xm[&c] -= 1e-3;
                let fd = (f(&xp) - f(&xm)) / 2e-3;
                assert!(
                    (fd - v).abs() < 1e-6,
                    "x {xs:?} idx {idx} b {b} at {c:?}: fd {fd} vjp {v}"
                );
            }
        }
    }

    #[test]
    fn scatter_nd_gradients_match_finite_differences_for_distinct_tuples() {
        let x = array![[1.0f64, 2.0, 3.0], [4.0, 5.0, 6.0]];
        let idx = array![[1, 2], [0, 0]];
        let upd = array![7.0f64, 8.0];
        let w = array![[1.0f64, 2.0, 3.0], [4.0, 5.0, 6.0]];
        for red in [Reduction::None, Reduction::Add] {
            let (dd, du) = scatter_nd(&w, &idx, upd.raw_dim(), red).unwrap();
            let f = |x: &ndarray::Array2<f64>, u: &ndarray::Array1<f64>| {
                (&crate::scatter_nd(x, &idx, u, red).unwrap() * &w).sum()
            };
            for (c, &v) in dd.indexed_iter() {
                let (mut xp, mut xm) = (x.clone(), x.clone());
                xp[[c[0], c[1]]] += 1e-3;
                xm[[c[0], c[1]]] -= 1e-3;
                let fd = (f(&xp, &upd) - f(&xm, &upd)) / 2e-3;
                assert!((fd - v).abs() < 1e-6, "{red:?} data at {c:?}");
            }
            for (c, &v) in du.indexed_iter() {
                let (mut up, mut um) = (upd.clone(), upd.clone());
                up[c[0]] += 1e-3;
                um[c[0]] -= 1e-3;
                let fd = (f(&x, &up) - f(&x, &um)) / 2e-3;
                assert!((fd - v).abs() < 1e-6, "{red:?} updates at {c:?}");
            }
        }
        let e = scatter_nd(&w, &idx, upd.raw_dim(), Reduction::Max).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
        let e = gather_nd(&array![1.0f32], (2, 2), &array![[0, 5]], 0).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::IndexOutOfBounds);
    }
}
