//! Shared pieces of the fuzz targets: a decoder that turns the fuzzer's bytes into shapes, dims,
//! index values (with a bias towards the extremes: `-1`, `size`, `i64::MIN`, `i64::MAX`), and
//! views of any layout (reversed, stepped, transposed, stride-0 broadcast, and broadcast axes so
//! long that the element count overflows any buffer); plus the plain reference implementations the
//! targets check small results against.

use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD, Dimension, IxDyn, Slice};

/// Reads the fuzzer's bytes; past the end every read is 0, so every input decodes to a case.
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data, pos: 0 }
    }

    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    pub fn u64(&mut self) -> u64 {
        (0..8).fold(0u64, |acc, _| (acc << 8) | self.byte() as u64)
    }

    /// A value in `0..n` (0 when `n == 0`).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { self.byte() as usize % n }
    }

    pub fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// The rest of the bytes.
    pub fn rest(&mut self) -> &'a [u8] {
        let r = self.data.get(self.pos..).unwrap_or(&[]);
        self.pos = self.data.len();
        r
    }

    /// A dim for an array of rank `nd`: mostly valid (both signs), sometimes out of range or
    /// extreme.
    pub fn dim(&mut self, nd: usize) -> isize {
        let nd = nd.max(1) as isize;
        match self.byte() % 16 {
            0 => nd + self.below(3) as isize,
            1 => -nd - 1 - self.below(3) as isize,
            2 => isize::MIN,
            3 => isize::MAX,
            k if k % 2 == 0 => self.below(nd as usize) as isize,
            _ => self.below(nd as usize) as isize - nd,
        }
    }

    /// An index value for a dimension of `size`: mostly in range, sometimes negative (valid for
    /// wrapping ops), sometimes just out of range, sometimes an extreme.
    pub fn index_value(&mut self, size: usize) -> i64 {
        let n = size as i64;
        match self.byte() % 32 {
            0 => -1,
            1 => n,
            2 => i64::MIN,
            3 => i64::MAX,
            4 => -n,
            5 => -n - 1,
            6 => n + self.byte() as i64,
            7 => i32::MAX as i64,
            8 => i32::MIN as i64,
            9 => self.u64() as i64,
            10..=13 if n > 0 => -(self.below(size) as i64) - 1,
            _ if n > 0 => self.below(size) as i64,
            _ => self.byte() as i64 - 128,
        }
    }

    /// A small shape of rank `nd` (axes of 0 to 5 elements).
    pub fn shape(&mut self, nd: usize) -> Vec<usize> {
        (0..nd)
            .map(|_| match self.byte() % 8 {
                0 => 0,
                1 | 2 => 1,
                k => (k as usize) - 1,
            })
            .collect()
    }

    /// A layout for an array of rank `nd`.
    pub fn layout(&mut self, nd: usize, allow_broadcast: bool) -> Layout {
        let modes = (0..nd)
            .map(|_| match self.byte() % 8 {
                0 => Mode::Reversed,
                1 => Mode::Step2,
                2 if allow_broadcast => Mode::Broadcast,
                _ => Mode::Plain,
            })
            .collect();
        Layout {
            modes,
            transpose: self.flag(),
        }
    }
}

/// How one axis of a view is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Plain,
    /// Negative stride.
    Reversed,
    /// Every second element of a longer base.
    Step2,
    /// Stride 0: one element repeated.
    Broadcast,
}

/// A layout: a mode per axis, and whether the base is stored with its two last axes swapped.
#[derive(Debug, Clone)]
pub struct Layout {
    pub modes: Vec<Mode>,
    pub transpose: bool,
}

/// The backing store of a view of a given logical shape and layout. The base holds `value(k)` at
/// logical row-major position `k` for every position the view can see (stride-0 axes see their
/// first element only).
pub struct Backing<T> {
    base: ArrayD<T>,
    shape: Vec<usize>,
    layout: Layout,
}

impl<T: Clone> Backing<T> {
    pub fn new(shape: &[usize], layout: &Layout, value: impl Fn(usize) -> T) -> Self {
        let nd = shape.len();
        let base_shape: Vec<usize> = shape
            .iter()
            .zip(&layout.modes)
            .map(|(&n, m)| match m {
                Mode::Broadcast => n.min(1),
                Mode::Step2 => 2 * n,
                _ => n,
            })
            .collect();
        let transpose = layout.transpose && nd >= 2;
        let mut stored_shape = base_shape.clone();
        if transpose {
            stored_shape.swap(nd - 1, nd - 2);
        }
        let mut base = ArrayD::from_elem(IxDyn(&stored_shape), value(0));
        if transpose {
            base.swap_axes(nd - 1, nd - 2);
        }
        let mut b = Backing {
            base,
            shape: shape.to_vec(),
            layout: layout.clone(),
        };
        // Fill the visible positions with their logical row-major number (broadcast axes count
        // as position 0).
        let strides = row_major(shape);
        let mut view = b.sliced_mut();
        for (pos, v) in view.indexed_iter_mut() {
            let k = pos
                .slice()
                .iter()
                .zip(&strides)
                .fold(0usize, |acc, (i, s)| acc.wrapping_add(i.wrapping_mul(*s)));
            *v = value(k);
        }
        drop(view);
        b
    }

    fn sliced_mut(&mut self) -> ArrayViewMutD<'_, T> {
        let modes = &self.layout.modes;
        let shape = &self.shape;
        self.base
            .slice_each_axis_mut(|ax| axis_slice(modes, shape, ax.axis.index()))
    }

    /// Calls `f` with the view of the logical shape (stride 0 on broadcast axes, which may be
    /// far longer than any buffer could hold).
    pub fn with_view<R>(&self, f: impl FnOnce(ArrayViewD<'_, T>) -> R) -> R {
        let modes = &self.layout.modes;
        let shape = &self.shape;
        let sliced = self
            .base
            .slice_each_axis(|ax| axis_slice(modes, shape, ax.axis.index()));
        match sliced.broadcast(IxDyn(shape)) {
            Some(b) => f(b),
            // A shape whose element count overflows isize cannot be a view at all.
            None => f(sliced),
        }
    }

    /// A mutable view of the logical shape (broadcast axes are laid out plainly here).
    pub fn view_mut(&mut self) -> ArrayViewMutD<'_, T> {
        self.sliced_mut()
    }
}

/// The slice of the base that gives axis `a` of the view its layout (a broadcast axis keeps its
/// one element; `with_view` stretches it).
fn axis_slice(modes: &[Mode], shape: &[usize], a: usize) -> Slice {
    match modes[a] {
        Mode::Reversed => Slice::new(0, None, -1),
        Mode::Step2 => Slice::new(0, Some((2 * shape[a]) as isize), 2),
        _ => Slice::new(0, None, 1),
    }
}

/// Row-major strides of `shape`.
pub fn row_major(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for a in (0..shape.len().saturating_sub(1)).rev() {
        s[a] = s[a + 1].wrapping_mul(shape[a + 1].max(1));
    }
    s
}
