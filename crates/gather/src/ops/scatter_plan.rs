//! [`ScatterPlan`]: a row index validated once (and grouped, when grouping pays), then applied
//! many times.
//!
//! A graph network scatters the same edges in every layer, forward and backward:
//! `scatter_add(dst, 0, ids expanded to [E, F], src)`. Each such call checks every id, and, when
//! the rows are too short to give every thread a cache line of each, groups the positions by
//! destination row before it adds. A plan does both once, keeping the ids as compact `u32` rows;
//! every later call only adds (in index order per destination element: bitwise the same result
//! as the op, for any number of threads).
//!
//! ```text
//! ScatterPlan::new(&ids, 4)     ids = [2, 0, 2, 1, 0, 2]     (checked: every id in 0..4)
//!   row 0 ← src rows [1, 4]
//!   row 1 ← src rows [3]
//!   row 2 ← src rows [0, 2, 5]
//!   row 3 ← (none: left as it is)
//! plan.scatter_add(&dst[4, F], &src[6, F])   dst[ids[e], f] += src[e, f], in order of e per row
//! ```
//!
//! A plan is tied to the size of the dimension it was validated for: applying it to a destination
//! with another number of rows is an error (`ShapeMismatch`), never an out-of-bounds write.

use ndarray::{Array, ArrayBase, ArrayViewMut, Data, DataMut, Dimension, Ix1, IxDyn};

use super::scatter::{Mode, Reduce, check_mode_dtype, reduce_into};
use crate::element::{DType, Element};
use crate::error::{Error, ErrorKind, Result, fmt_shape};
use crate::index::{Bounds, CheckedIndex, IndexElem};
use crate::kernels;
use crate::kernels::segment::Segments;

/// A 1-d row index, checked against a dimension size and grouped by destination row, ready to
/// be applied to many `scatter_add` / `scatter_reduce` calls along dim 0.
///
/// `plan.scatter_add(&dst, &src)` is `scatter_add(&dst, 0, &ids expanded to src's shape, &src)`
/// (and `index_add(&dst, 0, &ids, &src)`), bitwise, without the per-call checks and grouping.
///
/// ```
/// use gather::ScatterPlan;
/// use ndarray::{array, Array2, Axis};
/// let ids = array![2i64, 0, 2];
/// let plan = ScatterPlan::new(&ids, 3).unwrap();
/// let src = array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]];
/// let out = plan.scatter_add(&Array2::<f32>::zeros((3, 2)), &src).unwrap();
/// assert_eq!(out, array![[3.0, 4.0], [0.0, 0.0], [6.0, 8.0]]);
/// // The same as the op with the index expanded along the row:
/// let idx = ids.view().insert_axis(Axis(1));
/// let idx = idx.broadcast((3, 2)).unwrap();
/// assert_eq!(out, gather::scatter_add(&Array2::<f32>::zeros((3, 2)), 0, &idx, &src).unwrap());
/// ```
#[derive(Debug, Clone)]
pub struct ScatterPlan {
    /// The destination row of each position, checked against `size`.
    ids: Vec<u32>,
    /// The positions grouped by row, built when a grouped loop first needs them.
    segs: std::sync::OnceLock<Segments>,
    size: usize,
}

impl ScatterPlan {
    /// Checks every value of `index` against a dimension of `size` (`0 <= id < size`, as
    /// PyTorch's `scatter_add`) and keeps them as `u32` rows; the grouping by value is built the
    /// first time a call needs it.
    ///
    /// # Errors
    /// `IndexOutOfBounds` for a value outside `0..size`, with its position; `InvalidArgument` for
    /// an index of more than `u32::MAX` positions or a `size` of more than 2^32 rows.
    ///
    /// ```
    /// use gather::{ErrorKind, ScatterPlan};
    /// use ndarray::array;
    /// let plan = ScatterPlan::new(&array![1u32, 1, 0], 2).unwrap();
    /// assert_eq!((plan.len(), plan.size(), plan.rows()), (3, 2, 2));
    /// let err = ScatterPlan::new(&array![0i64, 5], 4).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::IndexOutOfBounds);
    /// ```
    pub fn new<I, S>(index: &ArrayBase<S, Ix1>, size: usize) -> Result<ScatterPlan>
    where
        I: IndexElem,
        S: Data<Elem = I>,
    {
        let op = "ScatterPlan::new";
        check_index(op, index.shape(), size)?;
        let view = index.view().into_dyn();
        CheckedIndex::new(op, view, 0, size, Bounds::Strict)?;
        // Checked: every value is in `0..size`, and `size` rows are addressable, so they fit.
        let mut ids = super::try_vec::<u32>(op, index.len())?;
        ids.extend(index.iter().map(|v| v.to_i64() as u32));
        Ok(ScatterPlan {
            ids,
            segs: std::sync::OnceLock::new(),
            size,
        })
    }

    /// The number of index positions (rows of `src` the plan reads).
    ///
    /// ```
    /// let plan = gather::ScatterPlan::new(&ndarray::array![0, 0, 1], 5).unwrap();
    /// assert_eq!(plan.len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the index had no positions (applying the plan then changes nothing).
    ///
    /// ```
    /// let plan = gather::ScatterPlan::new(&ndarray::Array1::<i64>::zeros(0), 5).unwrap();
    /// assert!(plan.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The size of the dimension the index was validated for: the number of rows a destination
    /// must have.
    ///
    /// ```
    /// let plan = gather::ScatterPlan::new(&ndarray::array![0, 0, 1], 5).unwrap();
    /// assert_eq!(plan.size(), 5);
    /// ```
    pub fn size(&self) -> usize {
        self.size
    }

    /// The number of distinct destination rows the index reaches.
    ///
    /// ```
    /// let plan = gather::ScatterPlan::new(&ndarray::array![3, 0, 3], 5).unwrap();
    /// assert_eq!(plan.rows(), 2);
    /// ```
    pub fn rows(&self) -> usize {
        self.segments().len()
    }

    fn segments(&self) -> &Segments {
        self.segs
            .get_or_init(|| Segments::of_ids(&self.ids, self.size))
    }

    /// The checked destination row of each position, in index order.
    ///
    /// ```
    /// let plan = gather::ScatterPlan::new(&ndarray::array![3i64, 0, 3], 5).unwrap();
    /// assert_eq!(plan.ids(), ndarray::array![3u32, 0, 3]);
    /// ```
    pub fn ids(&self) -> ndarray::ArrayView1<'_, u32> {
        ndarray::ArrayView1::from(&self.ids[..])
    }

    /// `dst[ids[e], ..] += src[e, ..]` for every position `e`, in place, adding in index order per
    /// row (integers wrap, bool is logical or, `f16`/`bf16` accumulate in `f32`).
    ///
    /// # Errors
    /// See [`ScatterPlan::scatter_reduce_inplace`].
    ///
    /// ```
    /// use ndarray::array;
    /// let plan = gather::ScatterPlan::new(&array![1, 1], 2).unwrap();
    /// let mut dst = array![[1, 1], [1, 1]];
    /// plan.scatter_add_inplace(&mut dst, &array![[1, 2], [10, 20]]).unwrap();
    /// assert_eq!(dst, array![[1, 1], [12, 23]]);
    /// ```
    pub fn scatter_add_inplace<T, S, D, SS, DS>(
        &self,
        dst: &mut ArrayBase<S, D>,
        src: &ArrayBase<SS, DS>,
    ) -> Result<()>
    where
        T: Element,
        S: DataMut<Elem = T>,
        D: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        self.apply("ScatterPlan::scatter_add", dst, src, Reduce::Sum, true)
    }

    /// Out-of-place [`ScatterPlan::scatter_add_inplace`]: a new array.
    ///
    /// ```
    /// use ndarray::array;
    /// let plan = gather::ScatterPlan::new(&array![0, 0, 1], 2).unwrap();
    /// let out = plan.scatter_add(&array![0.0, 0.0], &array![1.0, 2.0, 4.0]).unwrap();
    /// assert_eq!(out, array![3.0, 4.0]);
    /// ```
    pub fn scatter_add<T, S, D, SS, DS>(
        &self,
        dst: &ArrayBase<S, D>,
        src: &ArrayBase<SS, DS>,
    ) -> Result<Array<T, D>>
    where
        T: Element,
        S: Data<Elem = T>,
        D: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        let mut out = super::try_to_owned("ScatterPlan::scatter_add", dst)?;
        self.scatter_add_inplace(&mut out, src)?;
        Ok(out)
    }

    /// `scatter_reduce_(0, ids expanded to src's shape, src, reduce, include_self)` with the
    /// plan's index, in place: every reduction of [`Reduce`], both `include_self`, with the op's
    /// exact semantics (and its dtype rules: `mean` of bool is an error).
    ///
    /// # Errors
    /// Checked before the first write (a failed call leaves `dst` as it was):
    /// - `RankMismatch`: `dst` is 0-d, or `src` has another number of dims;
    /// - `ShapeMismatch`: `dst` has another number of rows than the plan's size, `src` another
    ///   number of rows than the plan's positions, or `src` is larger than `dst` on another dim;
    /// - `InvalidArgument`: `mean` of bool.
    ///
    /// ```
    /// use gather::{ErrorKind, Reduce, ScatterPlan};
    /// use ndarray::array;
    /// let plan = ScatterPlan::new(&array![1, 1, 0], 2).unwrap();
    /// let mut dst = array![[0.0f32, 9.0], [5.0, 5.0]];
    /// let src = array![[1.0, 7.0], [3.0, 2.0], [4.0, 4.0]];
    /// plan.scatter_reduce_inplace(&mut dst, &src, Reduce::Amax, false).unwrap();
    /// assert_eq!(dst, array![[4.0, 4.0], [3.0, 7.0]]);
    /// // A destination with another number of rows than the plan was built for:
    /// let mut other = ndarray::Array2::<f32>::zeros((3, 2));
    /// let err = plan.scatter_reduce_inplace(&mut other, &src, Reduce::Sum, true).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
    /// ```
    pub fn scatter_reduce_inplace<T, S, D, SS, DS>(
        &self,
        dst: &mut ArrayBase<S, D>,
        src: &ArrayBase<SS, DS>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<()>
    where
        T: Element,
        S: DataMut<Elem = T>,
        D: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        self.apply(
            "ScatterPlan::scatter_reduce",
            dst,
            src,
            reduce,
            include_self,
        )
    }

    /// Out-of-place [`ScatterPlan::scatter_reduce_inplace`]: a new array.
    ///
    /// ```
    /// use gather::{Reduce, ScatterPlan};
    /// use ndarray::array;
    /// let plan = ScatterPlan::new(&array![0, 0, 1], 3).unwrap();
    /// let out = plan
    ///     .scatter_reduce(&array![10.0, 10.0, 10.0], &array![1.0, 2.0, 4.0], Reduce::Mean, true)
    ///     .unwrap();
    /// assert_eq!(out, array![13.0 / 3.0, 7.0, 10.0]);
    /// ```
    pub fn scatter_reduce<T, S, D, SS, DS>(
        &self,
        dst: &ArrayBase<S, D>,
        src: &ArrayBase<SS, DS>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<Array<T, D>>
    where
        T: Element,
        S: Data<Elem = T>,
        D: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        let mut out = super::try_to_owned("ScatterPlan::scatter_reduce", dst)?;
        self.scatter_reduce_inplace(&mut out, src, reduce, include_self)?;
        Ok(out)
    }

    fn apply<T, S, D, SS, DS>(
        &self,
        op: &str,
        dst: &mut ArrayBase<S, D>,
        src: &ArrayBase<SS, DS>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<()>
    where
        T: Element,
        S: DataMut<Elem = T>,
        D: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        check_apply(
            op,
            self.len(),
            self.size,
            dst.shape(),
            src.shape(),
            T::DTYPE,
            reduce,
        )?;
        let mut view: ArrayViewMut<'_, T, IxDyn> = dst.view_mut().into_dyn();
        let src = src.view().into_dyn();
        let target: kernels::scatter::Target<'_, '_, i64> = kernels::scatter::Target::Rows {
            dim: 0,
            ids: &self.ids,
            size: self.size,
            segs: &self.segs,
        };
        reduce_into(&mut view, &target, &src, reduce, include_self);
        Ok(())
    }
}

/// The checks of a plan's index before its values are read: 1-d, at most `u32::MAX`
/// positions, 2^32 rows (`backend::check_scatter_plan_index`).
pub(crate) fn check_index(op: &str, shape: &[usize], size: usize) -> Result<()> {
    let [len] = *shape else {
        return Err(Error::new(
            ErrorKind::RankMismatch,
            format!(
                "{op}: the index has shape {}, but a plan takes a 1-d index of rows",
                fmt_shape(shape)
            ),
        )
        .with_hint("flatten the index (and src's leading dims) into one dim of positions"));
    };
    if u32::try_from(len).is_err() {
        return Err(Error::invalid(format!(
            "{op}: an index of {} positions is more than a plan holds ({})",
            len,
            u32::MAX
        ))
        .with_hint("split the index (and src) into pieces and build a plan for each"));
    }
    if size > u32::MAX as usize + 1 {
        return Err(Error::invalid(format!(
            "{op}: a dimension of {size} rows is more than a plan addresses ({} rows)",
            u32::MAX as u64 + 1
        ))
        .with_hint("scatter into slices of at most 2^32 rows, with a plan for each"));
    }
    Ok(())
}

/// The checks of applying a plan of `len` positions into a dimension of `size` rows, before
/// anything is written (`backend::check_scatter_plan_apply`).
pub(crate) fn check_apply(
    op: &str,
    len: usize,
    size: usize,
    ds: &[usize],
    ss: &[usize],
    dtype: DType,
    reduce: Reduce,
) -> Result<()> {
    if ds.is_empty() {
        return Err(Error::new(
            ErrorKind::RankMismatch,
            format!("{op}: dst is 0-d, but a plan scatters rows along dim 0"),
        )
        .with_hint("give dst at least one dimension (its rows)"));
    }
    if ss.len() != ds.len() {
        return Err(Error::new(
            ErrorKind::RankMismatch,
            format!(
                "{op}: src has {} dimensions but dst has {} (src {}, dst {})",
                ss.len(),
                ds.len(),
                fmt_shape(ss),
                fmt_shape(ds)
            ),
        )
        .with_hint("src holds one row per index position: shape [positions, ...dst.shape[1..]]"));
    }
    if ds[0] != size {
        return Err(Error::new(
            ErrorKind::ShapeMismatch,
            format!(
                "{op}: the plan was validated for a dimension of size {}, but dst has {} rows (dst {})",
                size,
                ds[0],
                fmt_shape(ds)
            ),
        )
        .with_hint(format!(
            "build a plan for this destination: ScatterPlan::new(&index, {})",
            ds[0]
        )));
    }
    if ss[0] != len {
        return Err(Error::new(
            ErrorKind::ShapeMismatch,
            format!(
                "{op}: src has {} rows but the plan's index has {} positions (src {})",
                ss[0],
                len,
                fmt_shape(ss)
            ),
        )
        .with_hint("src needs one row per index position, in the index's order"));
    }
    if let Some(d) = (1..ds.len()).find(|&d| ss[d] > ds[d]) {
        return Err(Error::new(
            ErrorKind::ShapeMismatch,
            format!(
                "{op}: src is larger than dst at dimension {d} ({} > {}; src {}, dst {})",
                ss[d],
                ds[d],
                fmt_shape(ss),
                fmt_shape(ds)
            ),
        )
        .with_hint("only dim 0 may differ; slice src to dst's size on the other dims"));
    }
    check_mode_dtype(op, dtype, Mode::Reduce(reduce, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;
    use ndarray::{Array1, Array2, Axis, array};

    fn data(e: usize, v: usize, f: usize) -> (Array1<i64>, Array2<f32>, Array2<f32>) {
        let mut s = 99u64;
        let mut next = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            s >> 33
        };
        let ids = Array1::from_shape_simple_fn(e, || (next() % v as u64) as i64);
        let src = Array2::from_shape_simple_fn((e, f), || (next() % 1000) as f32 * 1e-3 - 0.5);
        let dst = Array2::from_shape_simple_fn((v, f), || (next() % 1000) as f32 * 1e-3);
        (ids, src, dst)
    }

    fn bits<T: Element>(a: &ndarray::ArrayD<T>) -> Vec<u64> {
        a.iter().map(|x| x.to_f64().to_bits()).collect()
    }

    #[test]
    fn plan_reuse_is_bitwise_the_op_with_an_expanded_index() {
        // One thread runs the rows in source order; three threads group the rows of 8 and 16
        // (shorter than a cache line per task) and run rows of 64 in source order.
        for threads in [1, 3] {
            crate::kernels::test_pool(threads).install(plan_reuse_matches_the_op);
        }
    }

    fn plan_reuse_matches_the_op() {
        for (e, v, f) in [
            (7, 3, 2),
            (50_000, 2_000, 16),
            (3_000, 100_000, 8),
            (4_000, 300, 64),
        ] {
            let (ids, src, dst) = data(e, v, f);
            let plan = ScatterPlan::new(&ids, v).unwrap();
            let idx = ids.view().insert_axis(Axis(1));
            let idx = idx.broadcast((e, f)).unwrap();
            for _ in 0..2 {
                let want = crate::scatter_add(&dst, 0, &idx, &src).unwrap().into_dyn();
                let got = plan.scatter_add(&dst, &src).unwrap().into_dyn();
                assert_eq!(bits(&got), bits(&want), "add e {e} v {v} f {f}");
                for r in [
                    Reduce::Sum,
                    Reduce::Prod,
                    Reduce::Mean,
                    Reduce::Amax,
                    Reduce::Amin,
                ] {
                    for include_self in [true, false] {
                        let want = crate::scatter_reduce(&dst, 0, &idx, &src, r, include_self)
                            .unwrap()
                            .into_dyn();
                        let got = plan
                            .scatter_reduce(&dst, &src, r, include_self)
                            .unwrap()
                            .into_dyn();
                        assert_eq!(bits(&got), bits(&want), "{r:?} {include_self} e {e} v {v}");
                    }
                }
            }
        }
    }

    #[test]
    fn plan_on_f16_reversed_and_narrower_src_matches_the_op() {
        let (ids, src, dst) = data(20_000, 500, 12);
        let plan = ScatterPlan::new(&ids, 500).unwrap();
        let src = src.mapv(f16::from_f32);
        let dst = dst.mapv(f16::from_f32);
        let rev = src.slice(ndarray::s![.., ..8;-1]);
        let idx = ids.view().insert_axis(Axis(1));
        let idx = idx.broadcast((20_000, 8)).unwrap();
        let want = crate::scatter_add(&dst, 0, &idx, &rev).unwrap().into_dyn();
        let got = plan.scatter_add(&dst, &rev).unwrap().into_dyn();
        assert_eq!(bits(&got), bits(&want));
    }

    #[test]
    fn a_plan_refuses_a_destination_of_another_size_and_leaves_it_unchanged() {
        let plan = ScatterPlan::new(&array![0i64, 2, 2], 3).unwrap();
        let src = array![[1.0f32], [2.0], [3.0]];
        let mut small = array![[5.0f32], [5.0]];
        let err = plan.scatter_add_inplace(&mut small, &src).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
        assert!(
            err.message()
                .contains("validated for a dimension of size 3")
        );
        assert!(err.message().contains("dst has 2 rows"));
        assert!(err.hint().unwrap().contains("ScatterPlan::new(&index, 2)"));
        assert_eq!(small, array![[5.0], [5.0]]);
        let mut dst = Array2::<f32>::zeros((3, 1));
        let err = plan
            .scatter_add_inplace(&mut dst, &array![[1.0f32], [2.0]])
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
        let err = plan
            .scatter_add_inplace(&mut dst, &array![1.0f32, 2.0, 3.0])
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::RankMismatch);
        let err = plan
            .scatter_add_inplace(&mut dst, &array![[1.0f32, 1.0], [2.0, 2.0], [3.0, 3.0]])
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
        assert_eq!(dst, Array2::<f32>::zeros((3, 1)));
        let bools = plan
            .scatter_reduce(
                &Array2::from_elem((3, 1), false),
                &Array2::from_elem((3, 1), true),
                Reduce::Mean,
                true,
            )
            .unwrap_err();
        assert_eq!(bools.kind(), ErrorKind::InvalidArgument);
        let oob = ScatterPlan::new(&array![0i64, -1], 3).unwrap_err();
        assert_eq!(oob.kind(), ErrorKind::IndexOutOfBounds);
        assert_eq!(oob.coordinate(), Some(&[1usize][..]));
    }

    #[test]
    fn an_empty_plan_changes_nothing() {
        let plan = ScatterPlan::new(&Array1::<i64>::zeros(0), 4).unwrap();
        let dst = Array2::<f32>::ones((4, 3));
        let out = plan
            .scatter_add(&dst, &Array2::<f32>::zeros((0, 3)))
            .unwrap();
        assert_eq!(out, dst);
    }
}
