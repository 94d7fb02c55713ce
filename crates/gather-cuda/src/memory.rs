//! Device buffers with a cache: a freed buffer goes back to a per-device free list and the next
//! allocation of its size class takes it, without a driver call (as PyTorch's caching allocator
//! does). Every operation runs on the device's one stream, so a buffer reused by a later call
//! is only touched after the earlier call's work, in stream order.

use std::collections::BTreeMap;
use std::ops::RangeBounds;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, CudaViewMut};

/// The free lists, by size class.
#[derive(Default)]
pub(crate) struct Cache {
    free: Mutex<BTreeMap<usize, Vec<CudaSlice<u8>>>>,
}

/// The size class of a request: 512-byte steps up to 1 MiB, 2 MiB steps above.
pub(crate) fn size_class(bytes: usize) -> usize {
    let bytes = bytes.max(1);
    if bytes <= 1 << 20 {
        bytes.div_ceil(512) * 512
    } else {
        bytes.div_ceil(2 << 20) * (2 << 20)
    }
}

impl Cache {
    /// A cached buffer of exactly this class, if there is one.
    pub(crate) fn take(&self, class: usize) -> Option<CudaSlice<u8>> {
        self.free.lock().unwrap().get_mut(&class)?.pop()
    }

    fn put(&self, class: usize, s: CudaSlice<u8>) {
        self.free.lock().unwrap().entry(class).or_default().push(s);
    }

    /// Frees every cached buffer (to the driver's pool); their count.
    pub(crate) fn clear(&self) -> usize {
        let mut free = self.free.lock().unwrap();
        let n = free.values().map(Vec::len).sum();
        free.clear();
        n
    }
}

/// A device buffer that returns to its device's cache when dropped.
/// Device memory a tensor views: a buffer of the cache (returned to it on drop), or memory of
/// another library (a DLPack import), kept alive by its owner until the last view drops.
pub(crate) struct Buffer {
    slice: Option<CudaSlice<u8>>,
    class: usize,
    cache: Arc<Cache>,
    /// What keeps borrowed memory alive (`None` for a buffer of the cache).
    _owner: Option<Box<dyn Send + Sync>>,
    /// The device address of byte 0.
    pub(crate) base: u64,
}

impl Buffer {
    pub(crate) fn new(slice: CudaSlice<u8>, class: usize, base: u64, cache: Arc<Cache>) -> Self {
        Buffer {
            slice: Some(slice),
            class,
            cache,
            _owner: None,
            base,
        }
    }

    /// Memory at `base` that `owner` keeps alive.
    pub(crate) fn borrowed(base: u64, owner: Box<dyn Send + Sync>, cache: Arc<Cache>) -> Self {
        Buffer {
            slice: None,
            class: 0,
            cache,
            _owner: Some(owner),
            base,
        }
    }

    pub(crate) fn slice_mut(&mut self, r: impl RangeBounds<usize>) -> CudaViewMut<'_, u8> {
        self.slice
            .as_mut()
            .expect("only new buffers are uploaded into")
            .slice_mut(r)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(s) = self.slice.take() {
            self.cache.put(self.class, s);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn size_classes_round_up_in_steps() {
        use super::size_class;
        assert_eq!(size_class(0), 512);
        assert_eq!(size_class(513), 1024);
        assert_eq!(size_class(1 << 20), 1 << 20);
        assert_eq!(size_class((1 << 20) + 1), 2 << 20);
        assert_eq!(size_class(5 << 20), 6 << 20);
    }
}
