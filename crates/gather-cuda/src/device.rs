//! The device handle: one CUDA context and stream per GPU and process, the kernels compiled by
//! NVRTC on first use (once per process and device), and the launch helpers the ops share.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig,
};
use cudarc::nvrtc::{CompileOptions, compile_ptx_with_opts};

use crate::error::{Error, Result};
use crate::memory::{Buffer, Cache};

/// The kernel sources, each compiled as one module on first use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Source {
    Gather,
    Scatter,
    Fiber,
    Masked,
    Repeat,
    Sort,
    Bounds,
    Arg,
    Segment,
    Groups,
    Grad,
    Atomic,
}

/// A kernel source of `src/kernels` as build.rs embeds it (no comments or indentation).
macro_rules! kernel {
    ($file:literal) => {
        include_str!(concat!(env!("OUT_DIR"), "/", $file))
    };
}

const COMMON: &str = kernel!("common.cuh");

impl Source {
    const ALL: [Source; 12] = [
        Source::Gather,
        Source::Scatter,
        Source::Fiber,
        Source::Masked,
        Source::Repeat,
        Source::Sort,
        Source::Bounds,
        Source::Arg,
        Source::Segment,
        Source::Groups,
        Source::Grad,
        Source::Atomic,
    ];

    fn text(self) -> String {
        const REDUCE: &str = kernel!("reduce.cuh");
        match self {
            Source::Gather => format!("{COMMON}\n{}", kernel!("gather.cu")),
            Source::Scatter => {
                format!("{COMMON}\n{REDUCE}\n{}", kernel!("scatter.cu"))
            }
            Source::Fiber => format!("{COMMON}\n{REDUCE}\n{}", kernel!("fiber.cu")),
            Source::Masked => format!("{COMMON}\n{}", kernel!("masked.cu")),
            Source::Repeat => format!("{COMMON}\n{}", kernel!("repeat.cu")),
            Source::Sort => format!("{COMMON}\n{}", kernel!("sorting.cu")),
            Source::Bounds => format!("{COMMON}\n{}", kernel!("bounds.cu")),
            Source::Arg => format!("{COMMON}\n{REDUCE}\n{}", kernel!("arg.cu")),
            Source::Segment => format!("{COMMON}\n{}", kernel!("segment.cu")),
            Source::Groups => format!("{COMMON}\n{REDUCE}\n{}", kernel!("groups.cu")),
            Source::Grad => format!("{COMMON}\n{}", kernel!("grad.cu")),
            Source::Atomic => format!("{COMMON}\n{REDUCE}\n{}", kernel!("atomic.cu")),
        }
    }
}

/// Compiles every kernel source to PTX for `arch` (`compute_90`, ...). Needs NVRTC but no GPU:
/// CI runs it to check that every kernel compiles.
///
/// ```no_run
/// gather_cuda::compile_all("compute_90").unwrap();
/// ```
pub fn compile_all(arch: &str) -> Result<()> {
    nvrtc_present()?;
    for s in Source::ALL {
        compile(s, arch)?;
    }
    Ok(())
}

fn nvrtc_present() -> Result<()> {
    // SAFETY: only tries to dlopen the library; cudarc would panic on first use without it.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::device(
            "NVRTC (libnvrtc.so) was not found: install the CUDA toolkit or `pip install nvidia-cuda-nvrtc` and put its lib folder on LD_LIBRARY_PATH",
        ))
    }
}

/// Keeps freed device memory in the driver's pool instead of returning it at every
/// synchronisation (the default), which made every call map its output's memory afresh.
fn keep_pool_memory(ctx: &CudaContext) -> Result<()> {
    use cudarc::driver::sys;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: plain driver calls on this context's device with valid out-pointers; the
    // attribute takes a pointer to a u64.
    unsafe {
        ctx.bind_to_thread()?;
        sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()).result()?;
        let mut keep = u64::MAX;
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            &mut keep as *mut u64 as *mut std::ffi::c_void,
        )
        .result()?;
    }
    Ok(())
}

/// `GATHER_CUDA_L2_FETCH=<bytes>`: the L2's fetch granularity for this context, an experiment
/// of scripts/gpu_check.sh for the random reads of take (each wants 4 bytes of a sector, but a
/// line holding one fetched piece holds less data than its size: a 32-byte fetch ran W9 1.16x
/// slower than the default 64, so the A/B now tries 128). Context-wide, so not a default.
fn l2_fetch_from_env(ctx: &CudaContext) -> Result<()> {
    use cudarc::driver::sys;
    if let Some(bytes) = std::env::var("GATHER_CUDA_L2_FETCH")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        // SAFETY: a plain driver call on this context, bound to the thread first.
        unsafe {
            ctx.bind_to_thread()?;
            sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_MAX_L2_FETCH_GRANULARITY, bytes).result()
        }?;
    }
    Ok(())
}

/// A pinned one-word host buffer mapped into the device, with its device address; `None` where
/// the driver cannot map it.
fn mapped_word(ctx: &Arc<CudaContext>) -> Option<(cudarc::driver::PinnedHostSlice<u64>, u64)> {
    use cudarc::driver::sys;
    // SAFETY: a one-word host buffer that only the flag's read-back and the kernels' mark write,
    // each waited for before it is read.
    let mut host =
        unsafe { ctx.alloc_pinned_with_flags::<u64>(1, sys::CU_MEMHOSTALLOC_DEVICEMAP) }.ok()?;
    let word = host.as_mut_ptr().ok()?;
    let mut addr = 0u64;
    // SAFETY: asks the driver for the device address of the live mapped word.
    unsafe { sys::cuMemHostGetDevicePointer_v2(&mut addr, word.cast(), 0) }
        .result()
        .ok()?;
    (addr != 0).then_some((host, addr))
}

/// The kernels of `source` compiled for compute_90, with their parameter counts; `None` (with
/// a note) where NVRTC is missing and not required (`GATHER_REQUIRE_NVRTC=1` makes that a
/// failure). For the tests that check kernel names without a GPU.
#[cfg(test)]
pub(crate) fn compiled_entries(source: Source) -> Option<HashMap<String, usize>> {
    if nvrtc_present().is_err() && !std::env::var("GATHER_REQUIRE_NVRTC").is_ok_and(|v| v == "1") {
        eprintln!("NVRTC not found: kernel names not checked");
        return None;
    }
    let ptx = compile(source, "compute_90").expect("the kernels compile");
    Some(param_counts(&ptx.to_src()))
}

/// The number of parameters of each `.entry` of a PTX text.
pub(crate) fn param_counts(ptx: &str) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for part in ptx.split(".entry ").skip(1) {
        let Some((name, rest)) = part.split_once('(') else {
            continue;
        };
        let params = rest.split(')').next().unwrap_or("");
        out.insert(name.trim().to_string(), params.matches(".param").count());
    }
    out
}

/// NVRTC's options besides the architecture. `GATHER_CUDA_X_HINT=last`: gather and take read
/// x with an L2 evict-last policy (an experiment of scripts/gpu_check.sh's A/B; the option is
/// part of the PTX cache's key).
fn nvrtc_options() -> Vec<String> {
    options_with(std::env::var("GATHER_CUDA_X_HINT").is_ok_and(|v| v == "last"))
}

fn options_with(x_evict_last: bool) -> Vec<String> {
    let mut options = vec!["-std=c++17".to_string()];
    if x_evict_last {
        options.push("-DGATHER_X_EVICT_LAST".into());
    }
    options
}

/// NVRTC's (major, minor) version, part of the cache's key.
fn nvrtc_version() -> Result<(i32, i32)> {
    static VERSION: OnceLock<(i32, i32)> = OnceLock::new();
    nvrtc_present()?;
    Ok(*VERSION.get_or_init(|| {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: NVRTC is loaded (checked above); the call writes two ints.
        unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
        (major, minor)
    }))
}

fn compile(s: Source, arch: &str) -> Result<cudarc::nvrtc::Ptx> {
    compile_with(s, arch, nvrtc_options())
}

fn compile_with(s: Source, arch: &str, options: Vec<String>) -> Result<cudarc::nvrtc::Ptx> {
    let arch: &'static str = Box::leak(arch.to_string().into_boxed_str());
    let opts = CompileOptions {
        arch: Some(arch),
        options,
        ..Default::default()
    };
    compile_ptx_with_opts(s.text(), opts)
        .map_err(|e| Error::device(format!("NVRTC could not compile the {s:?} kernels: {e}")))
}

/// The bad-index flag on the GPU (kernels update it with device atomics, cheap even when many
/// values are bad) and the pinned host word it is read back into.
struct Flag {
    /// Two words: the smallest flagged position, and the device address of the mapped host word
    /// that the first flagging of a call sets (0 under `GATHER_CUDA_FLAG=copy`).
    dev: CudaSlice<u64>,
    _host: cudarc::driver::PinnedHostSlice<u64>,
    /// The pinned word's address (taken once: the slice's accessors wait on an event each time).
    word: *mut u64,
    /// Whether the kernels set the mapped word, so that an unflagged call copies nothing back.
    mapped: bool,
}

// SAFETY: `word` points into `_host`, which the Flag owns; the Flag is only used under its
// Mutex.
unsafe impl Send for Flag {}

pub(crate) struct Inner {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    arch: String,
    /// The number of multiprocessors, which sizes the grids.
    sms: usize,
    /// The dynamic shared memory a block may have once its kernel opts in.
    shared_optin: usize,
    /// The dynamic shared memory each kernel has been allowed past the default 48 KB.
    shared_allowed: Mutex<HashMap<&'static str, usize>>,
    modules: Mutex<HashMap<Source, Arc<CudaModule>>>,
    /// Freed buffers kept for reuse.
    pub(crate) cache: Arc<Cache>,
    /// Each compiled kernel's number of parameters, read off its PTX: a launch with another
    /// number of arguments is refused instead of letting the driver read past them.
    params: Mutex<HashMap<String, usize>>,
    functions: Mutex<HashMap<&'static str, CudaFunction>>,
    /// The bad-index flag: the smallest flagged position, `u64::MAX` when none. One per device,
    /// held by a call while it uses it.
    flag: Mutex<Flag>,
    /// `GATHER_CUDA_SYNC=1`: wait after every launch, so that a failing kernel is named.
    sync_each: bool,
    /// `GATHER_CUDA_EXACT_ALLOC=1`: buffers of exactly the bytes asked for, not their size class,
    /// so that compute-sanitizer (or the emulator under AddressSanitizer) sees every overrun.
    exact_alloc: bool,
    /// `GATHER_CUDA_PROFILE=1`: the last mark and the time booked per kernel.
    #[allow(clippy::type_complexity)]
    profile: Option<Mutex<(std::time::Instant, HashMap<String, (f64, u64)>)>>,
}

/// A GPU: its context, stream and compiled kernels. Cheap to clone; every handle of one device
/// in a process shares them.
///
/// ```no_run
/// let gpu = gather_cuda::Cuda::new(0)?;
/// println!("{}", gpu.name()?);
/// # Ok::<(), gather_cuda::Error>(())
/// ```
#[derive(Clone)]
pub struct Cuda {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Cuda {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cuda({})", self.inner.ctx.ordinal())
    }
}

fn devices() -> &'static Mutex<HashMap<usize, Cuda>> {
    static D: OnceLock<Mutex<HashMap<usize, Cuda>>> = OnceLock::new();
    D.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Cuda {
    /// The GPU numbered `ordinal`, or an error that says what is missing (the driver, a GPU,
    /// NVRTC). Never panics.
    ///
    /// ```
    /// // Without a GPU this is an error, not a crash.
    /// match gather_cuda::Cuda::new(0) {
    ///     Ok(gpu) => println!("{gpu:?}"),
    ///     Err(e) => println!("no GPU: {e}"),
    /// }
    /// ```
    pub fn new(ordinal: usize) -> Result<Cuda> {
        let mut map = devices().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = map.get(&ordinal) {
            return Ok(d.clone());
        }
        // SAFETY: only tries to dlopen the driver; cudarc would panic on first use without it.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(Error::device(
                "the NVIDIA driver (libcuda.so) was not found: this machine has no usable GPU",
            ));
        }
        nvrtc_present()?;
        let count = CudaContext::device_count()?;
        if ordinal as i64 >= count as i64 {
            return Err(Error::device(format!(
                "there is no GPU {ordinal}: this machine has {count}"
            )));
        }
        let ctx = CudaContext::new(ordinal)?;
        // SAFETY: every buffer of this crate is allocated, used and freed on the one stream
        // below, so stream order already orders its uses; cudarc's tracking would otherwise
        // create two events per allocation and record one each time a buffer's address is taken.
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx.compute_capability()?;
        let sms = ctx.attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )?;
        let shared_optin = ctx.attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?;
        let stream = ctx.new_stream()?;
        keep_pool_memory(&ctx)?;
        l2_fetch_from_env(&ctx)?;
        // The word is mapped into the device's address space, for the kernels to mark a call
        // that flagged something; GATHER_CUDA_FLAG=copy copies the flag back after every call
        // instead (the way before, kept for the A/B of scripts/gpu_check.sh), as does a driver
        // that cannot map it, rather than the GPU being unusable.
        let copy = std::env::var("GATHER_CUDA_FLAG").is_ok_and(|v| v == "copy");
        let (mut host, mapped) = match (!copy).then(|| mapped_word(&ctx)).flatten() {
            Some(m) => m,
            // SAFETY: a one-word host buffer that only the flag's read-back writes, then waits.
            None => (unsafe { ctx.alloc_pinned_with_flags::<u64>(1, 0) }?, 0),
        };
        let word = host.as_mut_ptr()?;
        // SAFETY: the word is the Flag's, and no kernel has run yet.
        unsafe { word.write_volatile(0) };
        let mut dev = stream.alloc_zeros::<u64>(2)?;
        stream.memcpy_htod(&[u64::MAX, mapped], &mut dev)?;
        let flag = Flag {
            dev,
            _host: host,
            word,
            mapped: mapped != 0,
        };
        let gpu = Cuda {
            inner: Arc::new(Inner {
                ctx,
                stream,
                arch: format!("compute_{major}{minor}"),
                sms: sms.max(1) as usize,
                shared_optin: shared_optin.max(0) as usize,
                shared_allowed: Mutex::new(HashMap::new()),
                modules: Mutex::new(HashMap::new()),
                cache: Arc::new(Cache::default()),
                params: Mutex::new(HashMap::new()),
                functions: Mutex::new(HashMap::new()),
                flag: Mutex::new(flag),
                sync_each: std::env::var("GATHER_CUDA_SYNC").is_ok_and(|v| v == "1"),
                exact_alloc: std::env::var("GATHER_CUDA_EXACT_ALLOC").is_ok_and(|v| v == "1"),
                profile: std::env::var("GATHER_CUDA_PROFILE")
                    .is_ok_and(|v| v == "1")
                    .then(|| Mutex::new((std::time::Instant::now(), HashMap::new()))),
            }),
        };
        map.insert(ordinal, gpu.clone());
        Ok(gpu)
    }

    /// Whether a GPU can be used here (the driver is present and sees at least one GPU).
    ///
    /// ```
    /// let _ = gather_cuda::Cuda::is_available();
    /// ```
    pub fn is_available() -> bool {
        Cuda::new(0).is_ok()
    }

    /// The GPU's name, as the driver gives it.
    ///
    /// ```no_run
    /// assert!(gather_cuda::Cuda::new(0)?.name()?.contains("NVIDIA"));
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn name(&self) -> Result<String> {
        Ok(self.inner.ctx.name()?)
    }

    /// Waits until every queued GPU operation has finished.
    ///
    /// ```no_run
    /// gather_cuda::Cuda::new(0)?.synchronize()?;
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn synchronize(&self) -> Result<()> {
        Ok(self.inner.stream.synchronize()?)
    }

    /// Waits until every queued operation on this GPU's context has finished, on every stream:
    /// other libraries' too, where they share the primary context (PyTorch, CuPy, JAX).
    ///
    /// ```no_run
    /// gather_cuda::Cuda::new(0)?.synchronize_all()?;
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn synchronize_all(&self) -> Result<()> {
        Ok(self.inner.ctx.synchronize()?)
    }

    /// Free and total device memory in bytes.
    ///
    /// ```no_run
    /// let (free, total) = gather_cuda::Cuda::new(0)?.memory()?;
    /// assert!(free <= total);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn memory(&self) -> Result<(usize, usize)> {
        Ok(self.inner.ctx.mem_get_info()?)
    }

    /// Runs `f` between two CUDA events on the GPU's stream and returns its result with the GPU
    /// time between them, in seconds (the queue is drained first, so nothing earlier counts).
    ///
    /// ```no_run
    /// let gpu = gather_cuda::Cuda::new(0)?;
    /// let ((), s) = gpu.timed(|| Ok(()))?;
    /// assert!(s >= 0.0);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn timed<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<(R, f64)> {
        let s = &self.inner.stream;
        s.synchronize()?;
        let start = s.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        let r = f()?;
        let end = s.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        end.synchronize()?;
        Ok((r, start.elapsed_ms(&end)? as f64 / 1e3))
    }

    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.inner.stream
    }

    /// The kernel `name` of `source`, compiling the source on first use.
    pub(crate) fn function(&self, source: Source, name: &'static str) -> Result<CudaFunction> {
        if let Some(f) = self.inner.functions.lock().unwrap().get(name) {
            return Ok(f.clone());
        }
        let module = {
            let mut mods = self.inner.modules.lock().unwrap();
            match mods.get(&source) {
                Some(m) => m.clone(),
                None => {
                    let m = self.load(source)?;
                    mods.insert(source, m.clone());
                    m
                }
            }
        };
        let f = module
            .load_function(name)
            .map_err(|e| Error::device(format!("kernel {name}: {e}")))?;
        self.inner.functions.lock().unwrap().insert(name, f.clone());
        Ok(f)
    }

    /// `source`'s module: its PTX from the cache of earlier processes (`ptx_cache`) or compiled
    /// now, loaded by the driver (a cached file that the driver rejects is compiled afresh and
    /// replaced).
    fn load(&self, source: Source) -> Result<Arc<CudaModule>> {
        let arch = &self.inner.arch;
        let text = source.text();
        let options = nvrtc_options();
        let (ptx, cached) = crate::ptx_cache::Compile {
            source,
            text: &text,
            arch,
            version: nvrtc_version()?,
            options: &options,
        }
        .load_or(|| compile(source, arch))?;
        let (ptx, m) = match (self.inner.ctx.load_module(ptx.clone()), cached) {
            (Ok(m), _) => (ptx, m),
            (Err(_), Some(path)) => {
                let ptx = compile(source, arch)?;
                let m = self.inner.ctx.load_module(ptx.clone())?;
                crate::ptx_cache::replace(&path, &ptx.to_src());
                (ptx, m)
            }
            (Err(e), None) => return Err(e.into()),
        };
        self.inner
            .params
            .lock()
            .unwrap()
            .extend(param_counts(&ptx.to_src()));
        Ok(m)
    }

    /// `bytes` of device memory, uninitialised (every op writes all of its output): a cached
    /// buffer of the size class if one is free, else a new one (after freeing the cache if the
    /// device is out of memory).
    pub(crate) fn alloc(&self, bytes: usize) -> Result<Buffer> {
        let class = if self.inner.exact_alloc {
            bytes.max(1)
        } else {
            crate::memory::size_class(bytes)
        };
        let cache = &self.inner.cache;
        let slice = match cache.take(class) {
            Some(s) => s,
            None => {
                // SAFETY: the buffer is written in full by the op that asked for it before
                // anything reads it (or, for scratch space, only the part written is read).
                let fresh = |_| unsafe { self.inner.stream.alloc::<u8>(class) };
                fresh(())
                    .or_else(|_| {
                        cache.clear();
                        self.inner.stream.synchronize()?;
                        fresh(())
                    })
                    .map_err(|e| self.out_of_memory(bytes, e))?
            }
        };
        self.mark("alloc");
        let base = self.ptr(&slice);
        Ok(Buffer::new(slice, class, base, cache.clone()))
    }

    /// The error of a failed allocation, as the CPU library's (an op's error with a hint): the
    /// sizes, what the device has free once this crate's cache is freed, and where a GPU's
    /// memory usually is when it is not free (other libraries' pools).
    #[cold]
    fn out_of_memory(&self, bytes: usize, e: impl std::fmt::Display) -> Error {
        let free = match self.memory() {
            Ok((free, total)) => format!(", with {} free of {}", size(free), size(total)),
            Err(_) => String::new(),
        };
        Error::Op(
            gather::Error::new(
                gather::ErrorKind::InvalidArgument,
                format!(
                    "could not allocate {bytes} bytes ({}) of device memory on cuda:{}{free}: {e}",
                    size(bytes),
                    self.ordinal()
                ),
            )
            .with_hint(
                "the memory this library had cached was freed first; another library may hold the \
                 rest: JAX takes 75% of a GPU when it starts (set \
                 XLA_PYTHON_CLIENT_PREALLOCATE=false or XLA_PYTHON_CLIENT_MEM_FRACTION before \
                 importing jax), PyTorch and CuPy keep freed memory in their pools \
                 (`torch.cuda.empty_cache()`, `cupy.get_default_memory_pool().free_all_blocks()`); \
                 else work on smaller pieces (e.g. slices along the first axis)",
            ),
        )
    }

    /// Frees the device memory that this crate keeps for reuse (like
    /// `torch.cuda.empty_cache()`); the number of buffers freed.
    ///
    /// ```no_run
    /// let gpu = gather_cuda::Cuda::new(0)?;
    /// gpu.empty_cache()?;
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn empty_cache(&self) -> Result<usize> {
        let n = self.inner.cache.clear();
        self.inner.stream.synchronize()?;
        Ok(n)
    }

    /// The device address of a buffer.
    pub(crate) fn ptr<T>(&self, s: &CudaSlice<T>) -> u64 {
        let (p, _sync) = s.device_ptr(&self.inner.stream);
        p
    }

    /// Runs `f` with the bad-index flag's address (it holds `u64::MAX` between calls), then
    /// returns the smallest flagged position (after waiting for the GPU), or `None`.
    pub(crate) fn with_flag(&self, f: impl FnOnce(u64) -> Result<()>) -> Result<Option<u64>> {
        let mut f = Some(f);
        self.with_flag_dyn(&mut |ptr| f.take().map_or(Ok(()), |f| f(ptr)))
    }

    /// [`Cuda::with_flag`]'s body, compiled once rather than at each of its fifty callers.
    #[inline(never)]
    fn with_flag_dyn(&self, f: &mut dyn FnMut(u64) -> Result<()>) -> Result<Option<u64>> {
        let flag = self.inner.flag.lock().unwrap_or_else(|p| p.into_inner());
        let ptr = self.ptr(&flag.dev);
        let launched = f(ptr);
        // Read (and so reset) the flag even when a launch failed after others had run, so that
        // what they flagged is not reported by the next call.
        let flagged = self.read_flag(&flag, ptr);
        launched?;
        flagged
    }

    /// The flag at `ptr` once the GPU has run what is queued (`None` for `u64::MAX`), and the
    /// flag reset. Not generic and never inlined: `with_flag` is compiled once per caller.
    #[inline(never)]
    fn read_flag(&self, flag: &Flag, ptr: u64) -> Result<Option<u64>> {
        let stream = &self.inner.stream;
        if flag.mapped {
            stream.synchronize()?;
            // SAFETY: the word is the Flag's; the kernels that may have set it have finished.
            let marked = unsafe { flag.word.read_volatile() } != 0;
            self.mark("flag wait");
            if !marked {
                return Ok(None);
            }
        }
        // SAFETY: copies the 8 bytes of the live flag into the pinned host word (owned by the
        // Flag, used by no one else while the lock is held), in stream order; the synchronize
        // below waits for the copy before the word is read, and the word is cleared after.
        let got = unsafe {
            let word = std::slice::from_raw_parts_mut(flag.word, 1);
            cudarc::driver::result::memcpy_dtoh_async(word, ptr, stream.cu_stream())?;
            stream.synchronize()?;
            let got = flag.word.read_volatile();
            flag.word.write_volatile(0);
            got
        };
        self.mark("flag read-back");
        if got == u64::MAX {
            return Ok(None);
        }
        // SAFETY: sets the first 8 bytes of the live flag back to 0xff (u64::MAX), in stream
        // order; its second word, the mapped word's address, stays.
        unsafe { cudarc::driver::result::memset_d8_async(ptr, 0xff, 8, stream.cu_stream()) }?;
        Ok(Some(got))
    }

    /// Sets the `bytes` bytes at device address `addr` (of a live buffer of the caller's) to
    /// `byte`, in stream order (`0xff` makes every i64 `-1`).
    pub(crate) fn memset(&self, addr: u64, byte: u8, bytes: usize) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the caller owns the `bytes` bytes at `addr`; the write is queued on this
        // stream, before every later kernel that reads them.
        unsafe {
            cudarc::driver::result::memset_d8_async(
                addr,
                byte,
                bytes,
                self.inner.stream.cu_stream(),
            )
        }?;
        Ok(())
    }

    /// Copies `bytes` bytes from device address `src` to `dst` (both in live buffers of the
    /// caller's, not overlapping), in stream order.
    pub(crate) fn copy_bytes(&self, dst: u64, src: u64, bytes: usize) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the caller owns both ranges of `bytes` bytes; the copy is queued on this
        // stream, after the kernels that write `src` and before those that read `dst`.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                dst,
                src,
                bytes,
                self.inner.stream.cu_stream(),
            )
        }?;
        self.mark("copy (driver)");
        Ok(())
    }

    /// The `n` bytes at device address `addr` (of a live buffer), after everything queued before
    /// them on the stream.
    pub(crate) fn read_bytes(&self, addr: u64, n: usize) -> Result<Vec<u8>> {
        let stream = &self.inner.stream;
        let mut out = vec![0u8; n];
        if n > 0 {
            // SAFETY: copies n bytes from `addr`, inside a live buffer of the caller's, into the
            // vector of n bytes, in stream order; the synchronize waits for the copy before the
            // vector is read.
            unsafe {
                cudarc::driver::result::memcpy_dtoh_async(&mut out, addr, stream.cu_stream())?;
            }
        }
        stream.synchronize()?;
        Ok(out)
    }

    /// The GPU's number (its CUDA ordinal).
    ///
    /// ```no_run
    /// assert_eq!(gather_cuda::Cuda::new(0)?.ordinal(), 0);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn ordinal(&self) -> usize {
        self.inner.ctx.ordinal()
    }

    /// The CUDA stream every op of this GPU runs on (a `CUstream`, as an address): what a
    /// consumer passes to a DLPack producer's `__dlpack__(stream=...)`, so that the producer
    /// orders its pending work before ours.
    ///
    /// ```no_run
    /// let gpu = gather_cuda::Cuda::new(0)?;
    /// assert_ne!(gpu.stream_handle(), 0);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn stream_handle(&self) -> u64 {
        self.inner.stream.cu_stream() as u64
    }

    /// Makes `stream` (a `CUstream` of this GPU's context, or the sentinels `1` for the legacy
    /// default stream and `2` for the per-thread default stream) wait for everything queued on
    /// this GPU's stream so far, without blocking the host: how a DLPack producer hands a result
    /// to a consumer's stream.
    ///
    /// # Safety
    ///
    /// `stream` must be a live stream of this GPU's (primary) context, or one of the sentinels.
    ///
    /// ```no_run
    /// let gpu = gather_cuda::Cuda::new(0)?;
    /// // SAFETY: 1 is CUDA's legacy default stream.
    /// unsafe { gpu.order_before(1)? };
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub unsafe fn order_before(&self, stream: u64) -> Result<()> {
        let ours = self.inner.stream.cu_stream() as u64;
        // SAFETY: both are live streams of this context (the caller vouches for `stream`).
        unsafe { self.link(ours, stream) }
    }

    /// Makes this GPU's stream wait for everything queued on `stream` so far (a `CUstream` of
    /// this GPU's context, or the sentinels `1` and `2`), without blocking the host: how a DLPack
    /// consumer orders its work after a producer's stream.
    ///
    /// # Safety
    ///
    /// `stream` must be a live stream of this GPU's (primary) context, or one of the sentinels.
    ///
    /// ```no_run
    /// let gpu = gather_cuda::Cuda::new(0)?;
    /// // SAFETY: 2 is CUDA's per-thread default stream.
    /// unsafe { gpu.wait_for(2)? };
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub unsafe fn wait_for(&self, stream: u64) -> Result<()> {
        let ours = self.inner.stream.cu_stream() as u64;
        // SAFETY: both are live streams of this context (the caller vouches for `stream`).
        unsafe { self.link(stream, ours) }
    }

    /// `later` waits for the work queued on `earlier` so far (an event recorded on `earlier`).
    ///
    /// # Safety
    ///
    /// Both must be live streams of this context, or the sentinels `1` and `2`.
    unsafe fn link(&self, earlier: u64, later: u64) -> Result<()> {
        use cudarc::driver::sys;
        if earlier == later {
            return Ok(());
        }
        self.inner.ctx.bind_to_thread()?;
        // SAFETY: a fresh event, recorded on `earlier` and waited on by `later` (live streams,
        // the caller's contract); destroying an event that a stream still waits on is allowed
        // (the driver releases it when the wait completes).
        unsafe {
            let mut ev: sys::CUevent = std::ptr::null_mut();
            sys::cuEventCreate(&mut ev, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
                .result()?;
            let r = sys::cuEventRecord(ev, earlier as sys::CUstream)
                .result()
                .and_then(|()| sys::cuStreamWaitEvent(later as sys::CUstream, ev, 0).result());
            sys::cuEventDestroy_v2(ev).result()?;
            r?;
        }
        Ok(())
    }

    /// The u32 at device address `addr`, after everything queued before it on the stream (for
    /// the counts that size an output).
    pub(crate) fn read_u32(&self, addr: u64) -> Result<u32> {
        let stream = &self.inner.stream;
        let mut word = [0u32; 1];
        // SAFETY: copies 4 bytes from `addr`, a u32 of a live buffer of the caller's, into the
        // local word, in stream order; the synchronize waits for the copy before it is read.
        unsafe {
            cudarc::driver::result::memcpy_dtoh_async(&mut word, addr, stream.cu_stream())?;
        }
        stream.synchronize()?;
        self.mark("count read-back");
        Ok(word[0])
    }

    /// With `GATHER_CUDA_PROFILE=1`: waits for the GPU and books the time since the last mark
    /// under `what` (launch, run and any host work between).
    pub(crate) fn mark(&self, what: &str) {
        let Some(p) = &self.inner.profile else { return };
        let _ = self.inner.stream.synchronize();
        let mut p = p.lock().unwrap();
        let now = std::time::Instant::now();
        let dt = now.duration_since(p.0).as_secs_f64();
        p.0 = now;
        let e = p.1.entry(what.to_string()).or_insert((0.0, 0));
        e.0 += dt;
        e.1 += 1;
    }

    /// With `GATHER_CUDA_PROFILE=1`: the seconds and counts booked per kernel (and per
    /// allocation and flag read-back) since the last call, which clears them. For measuring
    /// this crate; empty without the variable.
    #[doc(hidden)]
    pub fn take_profile(&self) -> Vec<(String, f64, u64)> {
        let Some(p) = &self.inner.profile else {
            return Vec::new();
        };
        let mut p = p.lock().unwrap();
        p.0 = std::time::Instant::now();
        let mut v: Vec<_> = p.1.drain().map(|(k, (s, n))| (k, s, n)).collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        v
    }

    /// Refuses a launch of `name` with `given` arguments when the kernel takes another number.
    pub(crate) fn check_arity(&self, name: &str, given: usize) -> Result<()> {
        match self.inner.params.lock().unwrap().get(name) {
            Some(&n) if n != given => Err(Error::device(format!(
                "kernel {name} takes {n} arguments, the launch gives {given} (a bug of gather-cuda)"
            ))),
            _ => Ok(()),
        }
    }

    /// Launches `f` on the stream with the addresses of its arguments, checked in number.
    ///
    /// # Safety
    /// `params` are the addresses of plain values of the kernel's parameter types, in order,
    /// live until the call returns; the buffers they name are live and large enough.
    #[inline(never)]
    pub(crate) unsafe fn launch_raw(
        &self,
        f: &CudaFunction,
        name: &str,
        cfg: cudarc::driver::LaunchConfig,
        params: &mut [*mut std::ffi::c_void],
    ) -> Result<()> {
        self.check_arity(name, params.len())?;
        let stream = &self.inner.stream;
        let launched = stream.context().bind_to_thread().and_then(|()| {
            // SAFETY: the caller's contract; the function and the stream are this context's.
            unsafe {
                cudarc::driver::result::launch_kernel(
                    f.cu_function(),
                    cfg.grid_dim,
                    cfg.block_dim,
                    cfg.shared_mem_bytes,
                    stream.cu_stream(),
                    params,
                )
            }
        });
        launched.map_err(|e| Error::device(format!("launching {name}: {e}")))?;
        self.mark(name);
        // GATHER_CUDA_SYNC=1: the error of the kernel's run, named after the kernel.
        if self.inner.sync_each {
            stream
                .synchronize()
                .map_err(|e| Error::device(format!("running {name}: {e}")))?;
        }
        Ok(())
    }

    /// A grid of `per_block`-thread blocks covering `n` items, at most a few waves deep (the
    /// kernels loop over the rest).
    pub(crate) fn grid(&self, n: usize, per_block: u32) -> LaunchConfig {
        self.grid_batched(n, per_block, 1)
    }

    /// A grid for kernels whose threads take `batch` items a grid-stride apart, reading them
    /// together: `n / batch` threads, but never fewer than fill every multiprocessor (1024
    /// threads each) while `n` allows, as many reads in flight matter more than their grouping.
    pub(crate) fn grid_batched(&self, n: usize, per_block: u32, batch: usize) -> LaunchConfig {
        let blocks = grid_blocks(n, per_block as usize, batch, self.inner.sms);
        LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (per_block, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// The number of multiprocessors.
    pub(crate) fn sms(&self) -> usize {
        self.inner.sms
    }

    /// The dynamic shared memory a block may have (its kernel allowed by [`Cuda::allow_shared`]).
    pub(crate) fn shared_optin(&self) -> usize {
        self.inner.shared_optin
    }

    /// Lets kernel `name` launch with `bytes` of dynamic shared memory: past 48 KB the driver
    /// wants the kernel's attribute raised first (once per kernel and size).
    pub(crate) fn allow_shared(
        &self,
        f: &CudaFunction,
        name: &'static str,
        bytes: usize,
    ) -> Result<()> {
        if bytes <= 48 << 10 {
            return Ok(());
        }
        let mut allowed = self.inner.shared_allowed.lock().unwrap();
        if allowed.get(name).is_some_and(|&b| b >= bytes) {
            return Ok(());
        }
        f.set_attribute(
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as i32,
        )
        .map_err(|e| Error::device(format!("kernel {name}: {bytes} bytes of shared memory: {e}")))?;
        allowed.insert(name, bytes);
        Ok(())
    }
}

/// The blocks of [`Cuda::grid_batched`] on `sms` multiprocessors.
fn grid_blocks(n: usize, per_block: usize, batch: usize, sms: usize) -> u32 {
    let full = sms * 1024 / per_block;
    n.div_ceil(per_block * batch)
        .max(n.div_ceil(per_block).min(full))
        .clamp(1, sms * 32) as u32
}

/// Launches kernel `$f` (from `Cuda::function`) on `$dev`'s stream with config `$cfg` and the
/// arguments after it, in the kernel's order, each a reference to a plain value.
/// The arguments' addresses go to one launch function that is compiled once: cudarc's builder
/// inlines its whole launch at every call site.
macro_rules! launch {
    ($dev:expr, $f:expr, $name:expr, $cfg:expr, $($a:expr),+ $(,)?) => {{
        let dev: &$crate::device::Cuda = $dev;
        // SAFETY: the op launching the kernel owns every buffer it names (live allocations of
        // the sizes the kernel reads and writes, checked by the op), and the arguments match the
        // kernel's parameters in order and size (their number is checked); taken in the call's
        // own expression, even temporaries among them live until the launch returns.
        unsafe { dev.launch_raw($f, $name, $cfg, &mut [$($crate::device::param($a)),+]) }
    }};
}

/// A kernel argument's address, for [`Cuda::launch_raw`]: only plain values (`DeviceRepr`).
#[inline(always)]
pub(crate) fn param<T: cudarc::driver::DeviceRepr>(a: &T) -> *mut std::ffi::c_void {
    a as *const T as *mut std::ffi::c_void
}
pub(crate) use launch;

/// `bytes` for a reader: in GiB, MiB or KiB with one decimal, or in bytes.
fn size(bytes: usize) -> String {
    let units = [(1usize << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    match units.iter().find(|(unit, _)| bytes >= *unit) {
        Some((unit, name)) => format!("{:.1} {name}", bytes as f64 / *unit as f64),
        None => format!("{bytes} bytes"),
    }
}

#[cfg(test)]
mod tests {
    /// The A/B's `GATHER_CUDA_X_HINT=last` compiles: the same kernels, their reads of x with
    /// an L2 cache-policy operand.
    #[test]
    fn the_evict_last_experiment_compiles_the_same_kernels() {
        use super::{Source, compile_with, options_with, param_counts};
        let Some(plain) = super::compiled_entries(Source::Gather) else {
            return;
        };
        let ptx = compile_with(Source::Gather, "compute_90", options_with(true))
            .expect("the kernels compile with the hint")
            .to_src();
        assert_eq!(param_counts(&ptx), plain);
        // Two kernels a width and index type (64- and 32-bit offsets), each with its reads.
        assert!(ptx.matches("ld.global.L2::cache_hint").count() >= 32);
    }

    /// With `GATHER_PTXAS` (a ptxas, as PyPI's `nvidia-cuda-nvcc` has one; `.ci/run` sets it),
    /// the PTX of every source, and of the evict-last experiment, assembles for sm_90 as the
    /// driver assembles it on an H100 or H200. NVRTC passes inline PTX through unchecked, so a
    /// bad instruction would otherwise first fail on a GPU. No kernel may spill registers to
    /// local memory: in these memory-bound loops a spill is a slowdown to explain first.
    #[test]
    fn every_kernel_assembles_for_sm_90_without_spills() {
        use super::{Source, compile_with, options_with};
        let Ok(ptxas) = std::env::var("GATHER_PTXAS") else {
            return;
        };
        let mut jobs: Vec<(String, Source, bool)> = Source::ALL
            .iter()
            .map(|&s| (format!("{s:?}"), s, false))
            .collect();
        jobs.push(("Gather (evict-last)".into(), Source::Gather, true));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
        let dir = std::env::temp_dir();
        let reports: Vec<(String, String)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    scope.spawn(|| {
                        let mut done = Vec::new();
                        loop {
                            let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some((name, source, hint)) = jobs.get(k) else {
                                return done;
                            };
                            let ptx = compile_with(*source, "compute_90", options_with(*hint))
                                .unwrap_or_else(|e| panic!("{name}: {e}"))
                                .to_src();
                            let stem = dir.join(format!("gather-ptxas-{}-{k}", std::process::id()));
                            let (input, output) =
                                (stem.with_extension("ptx"), stem.with_extension("cubin"));
                            std::fs::write(&input, ptx).unwrap();
                            let run = std::process::Command::new(&ptxas)
                                .args(["-arch=sm_90", "-v", "-o"])
                                .args([&output, &input])
                                .output()
                                .unwrap_or_else(|e| panic!("{ptxas}: {e}"));
                            let _ = (std::fs::remove_file(&input), std::fs::remove_file(&output));
                            let text = String::from_utf8_lossy(&run.stderr).to_string()
                                + &String::from_utf8_lossy(&run.stdout);
                            assert!(
                                run.status.success(),
                                "ptxas refused the {name} kernels:\n{text}"
                            );
                            done.push((name.clone(), text));
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        assert_eq!(reports.len(), jobs.len());
        let mut spills = Vec::new();
        for (name, text) in &reports {
            let mut entry = "";
            for line in text.lines() {
                if let Some(rest) = line.split("entry function '").nth(1) {
                    entry = rest.split('\'').next().unwrap_or(rest);
                } else if line.contains("spill stores")
                    && !line.contains(" 0 bytes spill stores, 0 bytes spill loads")
                {
                    spills.push(format!("{name} {entry}: {}", line.trim()));
                }
            }
            assert!(
                text.contains("entry function"),
                "{name}: no kernels in ptxas's report:\n{text}"
            );
        }
        assert!(
            spills.is_empty(),
            "kernels that spill:\n{}",
            spills.join("\n")
        );
    }

    #[test]
    fn ptx_entries_give_their_parameter_counts() {
        let ptx = ".visible .entry a(\n\t.param .u64 a_param_0,\n\t.param .u32 a_param_1\n)\n{\n}\n.visible .entry b()\n{\n}\n";
        let n = super::param_counts(ptx);
        assert_eq!((n["a"], n["b"]), (2, 0));
    }

    /// Batched grids give each thread `batch` items, but never fewer blocks than fill the
    /// multiprocessors (4 blocks of 256 each on 132) while there are items for them, and never
    /// more than 32 per multiprocessor.
    #[test]
    fn batched_grids_fill_the_gpu_before_they_batch() {
        use super::grid_blocks;
        // W10: 1M positions, 4 a thread.
        assert_eq!(grid_blocks(1_000_000, 256, 4, 132), 977);
        // W1: 500K rows, batching would leave 489 blocks, fewer than the 528 that fill the GPU.
        assert_eq!(grid_blocks(500_000, 256, 4, 132), 528);
        // W3: 100K threads fill less than the GPU; batching them would idle more of it.
        assert_eq!(grid_blocks(100_352, 256, 4, 132), 392);
        // W9: 16M positions, capped at 32 blocks per multiprocessor.
        assert_eq!(grid_blocks(1 << 24, 256, 4, 132), 4224);
        assert_eq!(grid_blocks(0, 256, 4, 132), 1);
        // Unbatched: one thread per item up to the cap.
        assert_eq!(grid_blocks(1000, 256, 1, 132), 4);
    }
}
