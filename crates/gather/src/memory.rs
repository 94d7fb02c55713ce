//! Memory for large arrays: buffers backed by transparent huge pages.
//!
//! A data-dependent read from an array larger than the last-level cache costs a page-table walk as
//! well as a cache miss when the array sits on 4 KiB pages: a 64 MiB table spans 16 384 pages,
//! far beyond the TLB's reach, but only 32 huge (2 MiB) pages. NumPy asks for huge pages for every
//! array of 4 MiB or more (so PyTorch tensors made with `torch.from_numpy` have them too); Rust's
//! allocator does not. The library already does this for the outputs it allocates; this module
//! lets a caller do the same for the tables it gathers from or scatters into.

use crate::error::{Error, Result};

/// An empty `Vec` with room for `capacity` elements, whose memory the kernel is asked to back with
/// transparent huge pages (`madvise(MADV_HUGEPAGE)`), as NumPy does for arrays of 4 MiB or more.
///
/// Where NumPy advises the 2 MiB-aligned interior of its allocation, leaving up to 2 MiB at each
/// end on 4 KiB pages, a large buffer here is sized so that the system allocator maps it on a
/// 2 MiB boundary, and then advised whole: its capacity may exceed `capacity` by less than 2 MiB
/// (and by at most an eighth), memory that is never touched.
///
/// Fill it (`extend`, `resize`, rayon's `collect_into_vec`) before anything else touches the
/// memory: the advice applies to pages not yet faulted in. Buffers under 4 MiB, systems other than
/// Linux and kernels without transparent huge pages get an ordinary `Vec`; the advice never
/// changes the contents. The `Vec` is freed as usual.
///
/// ```text
///   Vec::with_capacity(n)            huge_page_vec(n)
///   |4K|4K|4K|4K| ... 16 384 pages   |   2 MiB   |   2 MiB   | ... 32 pages   (64 MiB)
/// ```
///
/// # Errors
/// An error (never an abort) when `capacity` elements do not fit in memory.
///
/// # Example
///
/// A 16 MiB lookup table on huge pages, then a gather from it:
///
/// ```
/// use ndarray::{array, Array1};
///
/// let n = 1 << 22;
/// let mut v = gather::memory::huge_page_vec::<f32>(n)?;
/// v.extend((0..n).map(|i| i as f32));
/// let table = Array1::from(v);
/// assert_eq!(gather::take(&table, &array![7i64, 3])?, array![7.0, 3.0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn huge_page_vec<T>(capacity: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(crate::kernels::huge_page_capacity::<T>(capacity))
        .map_err(|_| too_large(capacity, std::mem::size_of::<T>()))?;
    crate::kernels::advise_huge_pages(&mut v);
    Ok(v)
}

/// An array of zeros whose memory is written, on huge pages where it is large: where
/// `ArrayD::zeros` takes fresh zeroed pages from the system, the first read of each maps the
/// shared zero page and the first write then copies it, a fault that on a multi-threaded
/// process also interrupts every other core to flush its TLB (a scatter's mean counts, 32 MB,
/// spent most of their call there).
pub(crate) fn zeroed<T: Clone + num_traits::Zero>(dim: ndarray::IxDyn) -> ndarray::ArrayD<T> {
    let n = ndarray::Dimension::size(&dim);
    let mut v = huge_page_vec::<T>(n).unwrap_or_default();
    v.resize(n, T::zero());
    ndarray::ArrayD::from_shape_vec(dim, v).expect("one zero per position")
}

/// The error of a failed [`huge_page_vec`], out of line: compiled once, not per element type.
#[cold]
#[inline(never)]
fn too_large(capacity: usize, elem: usize) -> Error {
    Error::invalid(format!(
        "huge_page_vec: cannot allocate {capacity} elements ({} bytes)",
        capacity.saturating_mul(elem)
    ))
    .with_hint("ask for fewer elements, or work on smaller pieces")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_page_vec_has_the_capacity_and_is_empty() {
        for n in [0usize, 1, 1000, (4 << 20) + 3] {
            let v = huge_page_vec::<u32>(n).unwrap();
            assert!(v.is_empty());
            assert!(v.capacity() >= n);
        }
    }

    #[test]
    fn huge_page_vec_keeps_what_is_written() {
        let n = 3 << 20; // 12 MiB of u32: advised
        let mut v = huge_page_vec::<u32>(n).unwrap();
        v.extend(0..n as u32);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
    }

    #[test]
    fn an_impossible_size_is_an_error_not_an_abort() {
        let err = huge_page_vec::<u64>(usize::MAX / 4).unwrap_err();
        assert!(err.to_string().contains("cannot allocate"), "{err}");
    }
}
