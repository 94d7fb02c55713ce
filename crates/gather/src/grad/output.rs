//! What each gradient's `grad_output` must match, in the words of its error: one list for the
//! CPU library and the devices (`gather::backend`), so that a wrong grad_output reads alike
//! everywhere.

use crate::error::Result;

/// The forward output whose shape a gradient's `grad_output` must have, as its error names it.
///
/// ```
/// use gather::backend::{GradOutputOf, check_grad_output};
/// let e = check_grad_output("grad::gather", GradOutputOf::Gather, &[2], &[3]).unwrap_err();
/// assert!(e.message().contains("the output of gather (the index) has shape [3]"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GradOutputOf {
    /// An op under a bounds policy whose output has the input's shape.
    Input,
    /// `gather`: the index's shape.
    Gather,
    /// `gather_broadcast`.
    GatherBroadcast,
    /// `gather_nd`.
    GatherNd,
    /// `index_select`.
    IndexSelect,
    /// `index_reduce`: the input's shape.
    IndexReduce,
    /// `scatter` (PyTorch's legacy `reduce=` form): the input's shape.
    Scatter,
    /// `scatter_reduce`: the input's shape.
    ScatterReduce,
    /// `masked_select`: one element per true position.
    MaskedSelect,
    /// `masked_scatter`: the broadcast of input and mask.
    MaskedScatter,
    /// `repeat_interleave`.
    RepeatInterleave,
    /// `select_batched`.
    SelectBatched,
    /// `take`: the index's shape.
    Take,
    /// `take_along_dim` along a dim.
    TakeAlongDim,
    /// `take_along_dim` with dim None: one element per index element.
    TakeAlongDimFlat,
}

impl GradOutputOf {
    fn words(self) -> &'static str {
        match self {
            GradOutputOf::Input => "the input",
            GradOutputOf::Gather => "the output of gather (the index)",
            GradOutputOf::GatherBroadcast => "the output of gather_broadcast",
            GradOutputOf::GatherNd => "the output of gather_nd",
            GradOutputOf::IndexSelect => "the output of index_select",
            GradOutputOf::IndexReduce => "input (the output of index_reduce)",
            GradOutputOf::Scatter => "input (the output of scatter)",
            GradOutputOf::ScatterReduce => "input (the output of scatter_reduce)",
            GradOutputOf::MaskedSelect => {
                "the output of masked_select (one element per true position)"
            }
            GradOutputOf::MaskedScatter => "the broadcast of input and mask",
            GradOutputOf::RepeatInterleave => "the output of repeat_interleave",
            GradOutputOf::SelectBatched => "the output of select_batched",
            GradOutputOf::Take => "the output of take (the index)",
            GradOutputOf::TakeAlongDim => "the output of take_along_dim",
            GradOutputOf::TakeAlongDimFlat => "the output of take_along_dim with dim None",
        }
    }
}

/// The error of gradient `op` for a grad_output of shape `got` where `of`'s shape is `want`.
pub(crate) fn check_grad_output(
    op: &str,
    of: GradOutputOf,
    got: &[usize],
    want: &[usize],
) -> Result<()> {
    super::check_shape(op, "grad_output", got, of.words(), want)
}
