//! `gather.ScatterPlan`: the library's scatter plan in Python. Built from a host index (NumPy,
//! or a CPU tensor of another framework) it applies to host arrays; built from a CUDA index it
//! lives on that GPU (`gather_cuda::ScatterPlan`) and applies to CUDA arrays there.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use ::gather as lib;
use ::gather::dynamic::{self, Arg, Args, Inputs, Tensor, TensorView};
use ::gather::{Reduce, backend};
use ndarray::Ix1;
use pyo3::prelude::*;

use crate::hints::Dialect;
use crate::{Call, Out, py_error, to_pyerr};

pub(crate) enum Plan {
    Host(lib::ScatterPlan),
    Gpu(gather_cuda::ScatterPlan),
}

/// The live plans by key: a program compiled by `jax.jit` names its plan by the key (an XLA
/// attribute is a number, not an object), and the XLA handler finds the plan here when it
/// runs. Weak, so that a plan lives as long as its Python object.
static PLANS: Mutex<BTreeMap<u64, Weak<Plan>>> = Mutex::new(BTreeMap::new());
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// The plan of `key`, while its Python object lives.
pub(crate) fn plan_of(key: u64) -> Option<Arc<Plan>> {
    let plans = PLANS.lock().unwrap_or_else(|p| p.into_inner());
    plans.get(&key)?.upgrade()
}

fn register(plan: &Arc<Plan>) -> u64 {
    let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
    let mut plans = PLANS.lock().unwrap_or_else(|p| p.into_inner());
    plans.retain(|_, p| p.strong_count() > 0);
    plans.insert(key, Arc::downgrade(plan));
    key
}

/// ScatterPlan(index, size)
///
/// A 1-d row index checked against a dimension of ``size`` rows and grouped by row once, then
/// applied to many ``scatter_add``/``scatter_reduce`` calls along dim 0: each call only folds.
/// A graph network scatters the same edges in every layer and step.
///
/// ``plan.scatter_add(dst, src)`` equals ``gather.scatter_add(dst, 0, index[:, None]`` expanded to
/// ``src``'s shape ``, src)``, bitwise. Built from a CUDA index (a PyTorch, CuPy or JAX array on
/// a GPU) the plan is kept on that GPU and takes CUDA arrays there; built from a host index it
/// takes host arrays.
///
/// >>> plan = gather.ScatterPlan(np.array([2, 0, 2]), 3)
/// >>> plan.scatter_add(np.zeros((3, 2)), np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
/// array([[3., 4.],
///        [0., 0.],
///        [6., 8.]])
/// >>> len(plan), plan.size
/// (3, 3)
#[pyclass(module = "gather._native", frozen)]
pub(crate) struct ScatterPlan {
    plan: Arc<Plan>,
    key: u64,
}

/// The host plan of an integer index view.
fn host_plan(index: &TensorView<'_>, size: usize) -> lib::Result<lib::ScatterPlan> {
    let op = "ScatterPlan::new";
    backend::check_scatter_plan_index(op, index.shape(), size)?;
    macro_rules! new {
        ($a:expr) => {{
            let a = $a.view().into_dimensionality::<Ix1>();
            lib::ScatterPlan::new(&a.expect("checked to be 1-d"), size)
        }};
    }
    match index {
        TensorView::I64(a) => new!(a),
        TensorView::I32(a) => new!(a),
        TensorView::I16(a) => new!(a),
        TensorView::I8(a) => new!(a),
        TensorView::U8(a) => new!(a),
        other => Err(backend::index_dtype(op, "index", other.dtype())),
    }
}

/// The host plan applied to `dst` and `src` (`None`: `scatter_add`). The plan's own loops are
/// compiled for f32 and f64 only (about 50 KB of the extension each); the other dtypes run the
/// op with the plan's checked rows expanded over src's shape: the same result, without the
/// grouping the plan keeps.
pub(crate) fn host_apply(
    plan: &lib::ScatterPlan,
    op: &str,
    dst: &TensorView<'_>,
    src: &TensorView<'_>,
    reduce: Option<(Reduce, bool)>,
) -> lib::Result<Tensor> {
    macro_rules! apply {
        ($d:expr, $s:expr) => {
            Ok(Tensor::from(match reduce {
                None => plan.scatter_add($d, $s)?,
                Some((r, incl)) => plan.scatter_reduce($d, $s, r, incl)?,
            }))
        };
    }
    match (dst, src) {
        (TensorView::F32(d), TensorView::F32(s)) => apply!(d, s),
        (TensorView::F64(d), TensorView::F64(s)) => apply!(d, s),
        _ => {
            // The plan's own checks, which its loops run on the dtypes above.
            let (r, incl) = reduce.unwrap_or((Reduce::Sum, true));
            if dst.dtype() != src.dtype() {
                return Err(backend::dtype_mismatch(op, "src", dst.dtype(), src.dtype()));
            }
            let (len, size, dtype) = (plan.len(), plan.size(), dst.dtype());
            backend::check_scatter_plan_apply(op, len, size, dst.shape(), src.shape(), dtype, r)?;
            let mut column = vec![1; src.shape().len()];
            column[0] = plan.len();
            // Checked: src has one row per position, so the column broadcasts to it.
            let ids = plan
                .ids()
                .into_shape_with_order(column)
                .expect("as many rows");
            let ids = ids.broadcast(src.shape()).expect("src has the plan's rows");
            let mut args = Args::default();
            args.set("dim", Arg::Int(0));
            args.set("reduce", Arg::Str(r.name().into()));
            args.set("include_self", Arg::Bool(incl));
            let views = vec![
                ("input", reborrow(dst)),
                ("index", TensorView::U32(ids.into_dyn())),
                ("src", reborrow(src)),
            ];
            let out = dynamic::call("scatter_reduce", &args, &views)?;
            Ok(out.into_iter().next().expect("one output").1)
        }
    }
}

/// `v` as a view of the borrow's lifetime.
fn reborrow<'b>(v: &'b TensorView<'_>) -> TensorView<'b> {
    lib::with_elem!(TensorView, v, a => a.view().into())
}

#[pymethods]
impl ScatterPlan {
    #[new]
    fn new(py: Python<'_>, index: &Bound<'_, PyAny>, size: usize) -> PyResult<Self> {
        let mut c = Call::new(py, "ScatterPlan", None)?;
        c.plain("index", index)?;
        let plan = if let Some((_, t, _)) = c.gpu.first() {
            let t = t.clone();
            let r = py.detach(|| {
                catch_unwind(AssertUnwindSafe(|| {
                    let plan = gather_cuda::ScatterPlan::new(&t, size).map_err(lib::Error::from);
                    // The borrowed index may be freed once this returns: its last reader first.
                    crate::cuda::wait(t.device()).map_err(lib::Error::from)?;
                    plan
                }))
            });
            Plan::Gpu(c.finish(r)?)
        } else {
            let view = c.arrays[0].1.view();
            let r = py.detach(|| catch_unwind(AssertUnwindSafe(|| host_plan(&view, size))));
            Plan::Host(c.finish(r)?)
        };
        let plan = Arc::new(plan);
        let key = register(&plan);
        Ok(ScatterPlan { plan, key })
    }

    /// The plan's key for the XLA handler (see `gather._jax_ops`).
    #[getter]
    fn _key(&self) -> u64 {
        self.key
    }

    /// The number of index positions (rows of ``src`` a call reads).
    fn __len__(&self) -> usize {
        match &*self.plan {
            Plan::Host(p) => p.len(),
            Plan::Gpu(p) => p.len(),
        }
    }

    /// The number of rows a destination must have (the size the index was checked against).
    #[getter]
    fn size(&self) -> usize {
        match &*self.plan {
            Plan::Host(p) => p.size(),
            Plan::Gpu(p) => p.size(),
        }
    }

    /// Where the plan lives and applies: ``"cpu"`` or ``"cuda:N"``.
    #[getter]
    fn device(&self) -> String {
        match &*self.plan {
            Plan::Host(_) => "cpu".to_string(),
            Plan::Gpu(p) => format!("cuda:{}", p.device().ordinal()),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "ScatterPlan(len={}, size={}, device={:?})",
            self.__len__(),
            self.size(),
            self.device()
        )
    }

    /// scatter_add(dst, src, *, dtype=None)
    ///
    /// ``dst`` with ``dst[index[e], ...] += src[e, ...]`` for every position ``e``, as a new
    /// array, adding in index order per row: bitwise ``gather.scatter_add`` with the index
    /// expanded over ``src``'s shape.
    #[pyo3(signature = (dst, src, *, dtype=None))]
    fn scatter_add(
        &self,
        py: Python<'_>,
        dst: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        self.apply(py, "ScatterPlan::scatter_add", dst, src, None, dtype)
    }

    /// scatter_reduce(dst, src, reduce, *, include_self=True, dtype=None)
    ///
    /// ``gather.scatter_reduce(dst, 0, index expanded over src's shape, src, reduce,
    /// include_self=include_self)`` with the plan's index, as a new array: ``"sum"``,
    /// ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``, with the op's semantics and bits.
    #[pyo3(signature = (dst, src, reduce, *, include_self=true, dtype=None))]
    fn scatter_reduce(
        &self,
        py: Python<'_>,
        dst: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
        reduce: &str,
        include_self: bool,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let r: Reduce = reduce
            .parse()
            .map_err(|e| to_pyerr(py, &e, Dialect::NumPy))?;
        let op = "ScatterPlan::scatter_reduce";
        self.apply(py, op, dst, src, Some((r, include_self)), dtype)
    }
}

impl ScatterPlan {
    fn apply(
        &self,
        py: Python<'_>,
        op: &'static str,
        dst: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
        reduce: Option<(Reduce, bool)>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let mut c = Call::new(py, op, dtype)?;
        c.data("dst", dst)?.data("src", src)?;
        c.one_device()?;
        let elsewhere = |what: &str, hint: &str| {
            py_error(
                py,
                "InvalidArgumentError",
                "invalid_argument",
                format!(
                    "{op}: the plan is on {} but {what}\nhint: {hint}",
                    self.device()
                ),
            )
        };
        match &*self.plan {
            Plan::Gpu(plan) => {
                let [(_, d, _), (_, s, _)] = &c.gpu[..] else {
                    return Err(elsewhere(
                        "dst and src are in host memory",
                        "build the plan from a host index, or move dst and src to its GPU",
                    ));
                };
                let (d, s) = (d.clone(), s.clone());
                let r = py.detach(|| {
                    catch_unwind(AssertUnwindSafe(|| {
                        let out = match reduce {
                            None => plan.scatter_add(&d, &s),
                            Some((r, incl)) => plan.scatter_reduce(&d, &s, r, incl),
                        };
                        crate::cuda::wait(d.device()).map_err(lib::Error::from)?;
                        out.map_err(lib::Error::from)
                    }))
                });
                let out = c.finish(r)?;
                c.result(Out::Gpu(out))
            }
            Plan::Host(plan) => {
                if let Some((_, t, _)) = c.gpu.first() {
                    return Err(elsewhere(
                        &format!("dst and src are on cuda:{}", t.device().ordinal()),
                        "build the plan from the index on that GPU",
                    ));
                }
                let views = c.views();
                let (Some(d), Some(s)) = (views.tensor("dst"), views.tensor("src")) else {
                    return Err(pyo3::exceptions::PyRuntimeError::new_err(
                        "a plan's call without dst or src",
                    ));
                };
                let r = py.detach(|| {
                    catch_unwind(AssertUnwindSafe(|| host_apply(plan, op, &d, &s, reduce)))
                });
                let out = c.finish(r)?;
                c.result(Out::Host(out))
            }
        }
    }
}
