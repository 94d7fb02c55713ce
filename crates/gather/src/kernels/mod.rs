//! The inner loops: the only place in the crate with `unsafe`.
//!
//! Every kernel is a safe function. It takes ndarray views (whose memory ndarray vouches for) and a
//! [`CheckedIndex`](crate::index::CheckedIndex) (whose values were checked against the size they
//! index), re-asserts the O(rank) shape relations that make every offset it computes land inside
//! its operands, and only then runs unchecked loops planned by [`crate::plan::Nest`]. Each `unsafe`
//! block states the invariant it relies on in a `// SAFETY:` comment.

pub(crate) mod gather;
pub(crate) mod scatter;
pub(crate) mod take;

use crate::index::Bounds;

/// A raw pointer that may be shared across rayon tasks.
///
/// Tasks write through it only at positions that no other task writes (the planner hands each task
/// a disjoint set of destination positions), and read only memory that no task writes.
pub(crate) struct SharedPtr<T>(pub(crate) *mut T);

impl<T> Clone for SharedPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SharedPtr<T> {}

// SAFETY: the pointer is only dereferenced at offsets the planner assigns to exactly one task (for
// writes) or at memory that is not written during the kernel (for reads), so sharing it across
// threads cannot create a data race. `T: Send + Sync` keeps non-thread-safe element types out.
unsafe impl<T: Send + Sync> Send for SharedPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for SharedPtr<T> {}

/// Maps a checked index value to a position under `bounds` for a dimension of `size`.
#[inline(always)]
pub(crate) fn position(bounds: Bounds, value: i64, size: usize) -> isize {
    match bounds {
        Bounds::Strict => value as isize,
        Bounds::Wrap => {
            if value < 0 {
                (value + size as i64) as isize
            } else {
                value as isize
            }
        }
        Bounds::Modulo => value.rem_euclid(size as i64) as isize,
    }
}
