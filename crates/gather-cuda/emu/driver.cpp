// A CPU emulator of the part of the CUDA driver API that gather-cuda uses through cudarc, so
// that the GPU tests and `gather conformance --device cuda` run on machines without a GPU (CI).
// Device memory is host memory; every stream operation runs when it is queued; a launch runs
// the kernel compiled as C++ (build.py), block after block (last first, or as GATHER_EMU_ORDER
// says), each block's threads as fibers that switch at __syncthreads and at warp exchanges. It
// checks what a GPU would not forgive: a warp exchange or barrier that not every live thread
// reaches aborts with the kernel's name.
// Timings mean nothing here; the results do.
#include "emu.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace emu {

Thread* cur;
dim3 block_idx, block_dim, grid_dim;

std::vector<std::pair<std::string, std::vector<Kernel>>>& registry() {
    static std::vector<std::pair<std::string, std::vector<Kernel>>> r;
    return r;
}
Register::Register(const char* source, std::vector<Kernel> kernels) {
    registry().push_back({source, std::move(kernels)});
}

enum { RUNNABLE, AT_BLOCK, AT_WARP, DONE };

}  // namespace emu

// Saves the callee-saved registers on the current stack, stores its pointer in *save and
// continues on the stack `to` (whose top holds the registers to restore and where to return).
extern "C" void emu_switch(void** save, void* to);
asm(R"(
    .pushsection .text
    .globl emu_switch
    .hidden emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
    .popsection
)");

namespace emu {

static void* sched_sp;
static const Kernel* kernel;
static void** params;
static std::mutex launching;
static const size_t STACK = 256 << 10;

[[noreturn]] static void fiber_main() {
    kernel->run(params);
    cur->state = DONE;
    emu_switch(&cur->sp, sched_sp);
    __builtin_unreachable();
}

static void to_scheduler() { emu_switch(&cur->sp, sched_sp); }

void syncthreads() {
    cur->state = AT_BLOCK;
    to_scheduler();
}

uint64_t warp_op(int op, uint64_t value, int arg) {
    cur->op = op;
    cur->value = value;
    cur->arg = arg;
    cur->state = AT_WARP;
    to_scheduler();
    return cur->result;
}

static char* stack_of(size_t i) {
    static std::vector<char*> stacks;
    while (stacks.size() <= i) {
        void* p = mmap(nullptr, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (p == MAP_FAILED) {
            std::fprintf(stderr, "cuda emulator: no memory for thread stacks\n");
            std::abort();
        }
        stacks.push_back(static_cast<char*>(p));
    }
    return stacks[i];
}

[[noreturn]] static void stuck(const char* why) {
    std::fprintf(stderr,
                 "cuda emulator: kernel %s, block (%u,%u,%u): %s (a GPU would hang or be undefined)\n",
                 kernel->name, block_idx.x, block_idx.y, block_idx.z, why);
    std::abort();
}

// Releases warp w if every live lane waits at the same exchange; whether it did.
static bool release_warp(std::vector<Thread>& th, size_t w) {
    const size_t lo = w * 32, hi = std::min(th.size(), lo + 32);
    int op = -1;
    for (size_t i = lo; i < hi; ++i) {
        if (th[i].state == DONE) continue;
        if (th[i].state != AT_WARP) return false;
        if (op >= 0 && th[i].op != op) stuck("lanes of one warp wait at different warp exchanges");
        op = th[i].op;
    }
    if (op < 0) return false;
    auto live = [&](long l) { return l >= 0 && l < 32 && lo + l < hi && th[lo + l].state == AT_WARP; };
    for (size_t i = lo; i < hi; ++i) {
        Thread& t = th[i];
        if (t.state != AT_WARP) continue;
        const long l = (long)(i - lo);
        long src = l;
        switch (op) {
            case W_SHFL_IDX: src = t.arg & 31; break;
            case W_SHFL_UP: src = l - t.arg; break;
            case W_SHFL_DOWN: src = l + t.arg; break;
            case W_SHFL_XOR: src = l ^ t.arg; break;
            default: break;
        }
        if (op == W_MATCH_ANY || op == W_BALLOT) {
            uint64_t mask = 0;
            for (long k = 0; k < 32; ++k) {
                if (!live(k)) continue;
                const uint64_t v = th[lo + k].value;
                if (op == W_MATCH_ANY ? v == t.value : v != 0) mask |= 1ull << k;
            }
            t.result = mask;
        } else {
            t.result = live(src) ? th[lo + src].value : t.value;
        }
    }
    for (size_t i = lo; i < hi; ++i)
        if (th[i].state == AT_WARP) th[i].state = RUNNABLE;
    return true;
}

// The order in which blocks run, and threads run between exchanges: last first by default (an
// order a GPU may well take, and the opposite of the index order that code relying on an order
// would assume); GATHER_EMU_ORDER=forward runs them in index order, and =shuffle:<seed> in a
// seeded random order, so that a result that depends on the order fails one of the runs.
static std::vector<size_t> order(size_t n) {
    static const std::string how = getenv("GATHER_EMU_ORDER") ? getenv("GATHER_EMU_ORDER") : "";
    static std::mt19937_64 rng(how.rfind("shuffle:", 0) == 0 ? std::stoull(how.substr(8)) : 0);
    std::vector<size_t> v(n);
    std::iota(v.begin(), v.end(), 0);
    if (how.rfind("shuffle", 0) == 0)
        std::shuffle(v.begin(), v.end(), rng);
    else if (how != "forward")
        std::reverse(v.begin(), v.end());
    return v;
}

static void run_block(std::vector<Thread>& th) {
    size_t i = 0;
    for (unsigned z = 0; z < block_dim.z; ++z)
        for (unsigned y = 0; y < block_dim.y; ++y)
            for (unsigned x = 0; x < block_dim.x; ++x, ++i) {
                Thread& t = th[i];
                t = Thread();
                t.tid = dim3{x, y, z};
                t.lane = (int)(i & 31);
                t.warp = (int)(i >> 5);
                // The registers emu_switch pops (zeros), then fiber_main as the return address,
                // 16-byte aligned so that fiber_main starts as if called.
                uint64_t* sp = reinterpret_cast<uint64_t*>(stack_of(i) + STACK);
                *--sp = 0;
                *--sp = reinterpret_cast<uint64_t>(&fiber_main);
                for (int r = 0; r < 6; ++r) *--sp = 0;
                t.sp = sp;
                t.state = RUNNABLE;
            }
    const std::vector<size_t> threads = order(th.size());
    for (;;) {
        for (size_t k : threads) {
            Thread& t = th[k];
            if (t.state != RUNNABLE) continue;
            cur = &t;
            emu_switch(&sched_sp, t.sp);
        }
        size_t done = 0, at_block = 0;
        for (const Thread& t : th) {
            done += t.state == DONE;
            at_block += t.state == AT_BLOCK;
        }
        if (done == th.size()) return;
        bool released = false;
        for (size_t w = 0; w * 32 < th.size(); ++w) released |= release_warp(th, w);
        if (!released && at_block + done == th.size()) {
            for (Thread& t : th)
                if (t.state == AT_BLOCK) t.state = RUNNABLE;
            released = true;
        }
        if (!released) stuck("some threads wait at __syncthreads and others at a warp exchange");
    }
}

static std::vector<unsigned char> shared_bytes;
void* dynamic_shared() { return shared_bytes.empty() ? nullptr : shared_bytes.data(); }

static void launch(const Kernel* k, dim3 grid, dim3 block, unsigned shared, void** args) {
    std::lock_guard<std::mutex> g(launching);
    // Exactly the bytes asked for, a heap block of its own: under AddressSanitizer a read or
    // write past them is reported.
    std::vector<unsigned char>(shared).swap(shared_bytes);
    kernel = k;
    params = args;
    grid_dim = grid;
    block_dim = block;
    std::vector<Thread> th((size_t)block.x * block.y * block.z);
    for (size_t b : order((size_t)grid.x * grid.y * grid.z)) {
        block_idx = dim3{(unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                         (unsigned)(b / grid.x / grid.y)};
        std::fill(shared_bytes.begin(), shared_bytes.end(), 0xA5);
        run_block(th);
    }
}

}  // namespace emu

// ---- the driver API ----
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_SUPPORTED = 801,
};

namespace {

std::mutex lock;
std::map<uintptr_t, size_t>& allocations() {
    static std::map<uintptr_t, size_t> a;
    return a;
}
size_t allocated = 0;
const size_t TOTAL = 80ull << 30;
char context_token, pool_token;

struct Event {
    std::chrono::steady_clock::time_point at;
};

struct Module {
    const std::vector<emu::Kernel>* kernels;
};

CUresult alloc(CUdeviceptr* p, size_t n) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
#ifdef EMU_ASAN
    const size_t rounded = n ? n : 1;  // exact, so that AddressSanitizer sees the buffer's end
#else
    const size_t rounded = (n + 255) / 256 * 256;
#endif
    if (rounded > TOTAL - allocated) return CUDA_ERROR_OUT_OF_MEMORY;
    void* m = nullptr;
    if (posix_memalign(&m, 256, rounded) != 0) m = nullptr;
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    // Fresh device memory holds whatever was there: a pattern, so that reading what no kernel
    // wrote shows.
    std::memset(m, 0xa5, rounded);
    std::lock_guard<std::mutex> g(lock);
    allocations()[(uintptr_t)m] = rounded;
    allocated += rounded;
    *p = (CUdeviceptr)(uintptr_t)m;
    return CUDA_SUCCESS;
}

CUresult release(CUdeviceptr p) {
    if (!p) return CUDA_SUCCESS;
    std::lock_guard<std::mutex> g(lock);
    auto it = allocations().find((uintptr_t)p);
    if (it == allocations().end()) return CUDA_ERROR_INVALID_VALUE;
    allocated -= it->second;
    allocations().erase(it);
    std::free((void*)(uintptr_t)p);
    return CUDA_SUCCESS;
}

std::vector<std::string> entries(const char* ptx) {
    std::vector<std::string> out;
    const std::string s(ptx);
    size_t at = 0;
    while ((at = s.find(".entry ", at)) != std::string::npos) {
        at += 7;
        size_t end = s.find_first_of("( \n", at);
        out.push_back(s.substr(at, end - at));
    }
    return out;
}

}  // namespace

#define API extern "C" __attribute__((visibility("default"))) CUresult

// EMU_TRACE=1 prints each driver entry point the program calls on stderr, a line "CU name" each
// (a call made inside another is not repeated), for emu/calls.py. Every API function starts
// with TRACE.
struct Trace {
    static thread_local int depth;
    explicit Trace(const char* name) {
        static const bool on = getenv("EMU_TRACE") != nullptr;
        if (depth++ == 0 && on) fprintf(stderr, "CU %s\n", name);
    }
    ~Trace() { --depth; }
};
thread_local int Trace::depth = 0;
#define TRACE Trace trace_(__func__)

API cuInit(unsigned) { TRACE; return CUDA_SUCCESS; }
API cuDriverGetVersion(int* v) {
    TRACE;
    *v = 13000;
    return CUDA_SUCCESS;
}
API cuDeviceGetCount(int* n) {
    TRACE;
    *n = 1;
    return CUDA_SUCCESS;
}
API cuDeviceGet(CUdevice* d, int ordinal) {
    TRACE;
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}
API cuDeviceGetName(char* name, int len, CUdevice) {
    TRACE;
    std::snprintf(name, (size_t)len, "CPU emulator of a CUDA GPU (gather-cuda tests)");
    return CUDA_SUCCESS;
}
API cuDeviceGetUuid(void* uuid, CUdevice) {
    TRACE;
    std::memset(uuid, 0, 16);
    return CUDA_SUCCESS;
}
API cuDeviceGetUuid_v2(void* uuid, CUdevice d) { TRACE; return cuDeviceGetUuid(uuid, d); }
API cuDeviceTotalMem_v2(size_t* bytes, CUdevice) {
    TRACE;
    *bytes = TOTAL;
    return CUDA_SUCCESS;
}
API cuDeviceGetAttribute(int* v, int attribute, CUdevice) {
    TRACE;
    switch (attribute) {
        case 1: *v = 1024; break;    // max threads per block
        case 2: *v = 1024; break;    // max block dim x
        case 5: *v = 2147483647; break;  // max grid dim x
        case 8: *v = 49152; break;   // shared memory per block
        case 97: *v = 232448; break; // shared memory per block, opted in (Hopper's)
        case 10: *v = 32; break;     // warp size
        case 16:  // multiprocessors: few, so that small tests already take the grid-stride loops
            *v = getenv("GATHER_EMU_SMS") ? atoi(getenv("GATHER_EMU_SMS")) : 4;
            break;
        case 75: *v = 9; break;      // compute capability
        case 76: *v = 0; break;
        case 115: *v = 1; break;     // memory pools
        default: *v = 0;
    }
    return CUDA_SUCCESS;
}
API cuDevicePrimaryCtxRetain(void** ctx, CUdevice) {
    TRACE;
    *ctx = &context_token;
    return CUDA_SUCCESS;
}
API cuDevicePrimaryCtxRelease_v2(CUdevice) { TRACE; return CUDA_SUCCESS; }
API cuDevicePrimaryCtxRelease(CUdevice) { TRACE; return CUDA_SUCCESS; }
API cuCtxSetCurrent(void*) { TRACE; return CUDA_SUCCESS; }
API cuCtxGetCurrent(void** ctx) {
    TRACE;
    *ctx = &context_token;
    return CUDA_SUCCESS;
}
API cuCtxPushCurrent_v2(void*) { TRACE; return CUDA_SUCCESS; }
API cuCtxPopCurrent_v2(void** ctx) {
    TRACE;
    if (ctx) *ctx = &context_token;
    return CUDA_SUCCESS;
}
API cuCtxGetDevice(CUdevice* d) {
    TRACE;
    *d = 0;
    return CUDA_SUCCESS;
}
API cuCtxSynchronize() { TRACE; return CUDA_SUCCESS; }
API cuCtxSetFlags(unsigned) { TRACE; return CUDA_SUCCESS; }
API cuCtxGetStreamPriorityRange(int* least, int* greatest) {
    TRACE;
    if (least) *least = 0;
    if (greatest) *greatest = 0;
    return CUDA_SUCCESS;
}
API cuDeviceGetDefaultMemPool(void** pool, CUdevice) {
    TRACE;
    *pool = &pool_token;
    return CUDA_SUCCESS;
}
API cuMemPoolSetAttribute(void*, int, void*) { TRACE; return CUDA_SUCCESS; }
API cuMemPoolTrimTo(void*, size_t) { TRACE; return CUDA_SUCCESS; }

API cuStreamCreate(void** s, unsigned) {
    TRACE;
    *s = new char;
    return CUDA_SUCCESS;
}
API cuStreamCreateWithPriority(void** s, unsigned f, int) { TRACE; return cuStreamCreate(s, f); }
API cuStreamDestroy_v2(void* s) {
    TRACE;
    delete static_cast<char*>(s);
    return CUDA_SUCCESS;
}
API cuStreamSynchronize(void*) { TRACE; return CUDA_SUCCESS; }
API cuCtxSetLimit(int, size_t) { TRACE; return CUDA_SUCCESS; }
API cuStreamQuery(void*) { TRACE; return CUDA_SUCCESS; }
API cuStreamWaitEvent(void*, void*, unsigned) { TRACE; return CUDA_SUCCESS; }

API cuEventCreate(void** e, unsigned) {
    TRACE;
    *e = new Event{std::chrono::steady_clock::now()};
    return CUDA_SUCCESS;
}
API cuEventRecord(void* e, void*) {
    TRACE;
    static_cast<Event*>(e)->at = std::chrono::steady_clock::now();
    return CUDA_SUCCESS;
}
API cuEventSynchronize(void*) { TRACE; return CUDA_SUCCESS; }
API cuEventQuery(void*) { TRACE; return CUDA_SUCCESS; }
API cuEventElapsedTime(float* ms, void* a, void* b) {
    TRACE;
    const auto d = static_cast<Event*>(b)->at - static_cast<Event*>(a)->at;
    *ms = std::chrono::duration<float, std::milli>(d).count();
    return CUDA_SUCCESS;
}
API cuEventElapsedTime_v2(float* ms, void* a, void* b) { TRACE; return cuEventElapsedTime(ms, a, b); }
API cuEventDestroy_v2(void* e) {
    TRACE;
    delete static_cast<Event*>(e);
    return CUDA_SUCCESS;
}

API cuMemAlloc_v2(CUdeviceptr* p, size_t n) { TRACE; return alloc(p, n); }
API cuMemAllocAsync(CUdeviceptr* p, size_t n, void*) { TRACE; return alloc(p, n); }
API cuMemFree_v2(CUdeviceptr p) { TRACE; return release(p); }
API cuMemFreeAsync(CUdeviceptr p, void*) { TRACE; return release(p); }
API cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
    TRACE;
    std::lock_guard<std::mutex> g(lock);
    *free_bytes = TOTAL - allocated;
    *total = TOTAL;
    return CUDA_SUCCESS;
}
API cuMemAllocHost_v2(void** p, size_t n) {
    TRACE;
    *p = std::malloc(n ? n : 1);
    return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
API cuMemHostAlloc(void** p, size_t n, unsigned) { TRACE; return cuMemAllocHost_v2(p, n); }
API cuMemHostGetDevicePointer_v2(CUdeviceptr* d, void* p, unsigned) {
    TRACE;
    // GATHER_EMU_NO_MAP=1: a driver that cannot map host memory (the library falls back).
    if (getenv("GATHER_EMU_NO_MAP")) return CUDA_ERROR_NOT_SUPPORTED;
    *d = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
API cuMemFreeHost(void* p) {
    TRACE;
    std::free(p);
    return CUDA_SUCCESS;
}
// GATHER_EMU_RUN=N runs the first N launches; after them, launches and the stream's copies
// and fills within device memory are skipped, so that the timed calls after a checked first
// call measure the host side alone (`gather bench --device cuda` on W1-W4, W10, W11).
static bool skipping(bool launch) {
    static const long run = getenv("GATHER_EMU_RUN") ? atol(getenv("GATHER_EMU_RUN")) : -1;
    static long launched = 0;
    if (run < 0 || launched < run) {
        launched += launch;
        return false;
    }
    return true;
}

API cuMemcpyHtoD_v2(CUdeviceptr d, const void* h, size_t n) {
    TRACE;
    std::memcpy((void*)(uintptr_t)d, h, n);
    return CUDA_SUCCESS;
}
API cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* h, size_t n, void*) { TRACE; return cuMemcpyHtoD_v2(d, h, n); }
API cuMemcpyDtoH_v2(void* h, CUdeviceptr d, size_t n) {
    TRACE;
    std::memcpy(h, (const void*)(uintptr_t)d, n);
    return CUDA_SUCCESS;
}
API cuMemcpyDtoHAsync_v2(void* h, CUdeviceptr d, size_t n, void*) { TRACE; return cuMemcpyDtoH_v2(h, d, n); }
API cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) {
    TRACE;
    std::memmove((void*)(uintptr_t)d, (const void*)(uintptr_t)s, n);
    return CUDA_SUCCESS;
}
API cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void*) {
    TRACE;
    return skipping(false) ? CUDA_SUCCESS : cuMemcpyDtoD_v2(d, s, n);
}
API cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
    TRACE;
    std::memset((void*)(uintptr_t)d, v, n);
    return CUDA_SUCCESS;
}
API cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void*) {
    TRACE;
    return skipping(false) ? CUDA_SUCCESS : cuMemsetD8_v2(d, v, n);
}
API cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, void*) {
    TRACE;
    if (skipping(false)) return CUDA_SUCCESS;
    auto* p = (unsigned short*)(uintptr_t)d;
    for (size_t i = 0; i < n; ++i) p[i] = v;
    return CUDA_SUCCESS;
}
API cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, void*) {
    TRACE;
    if (skipping(false)) return CUDA_SUCCESS;
    auto* p = (unsigned*)(uintptr_t)d;
    for (size_t i = 0; i < n; ++i) p[i] = v;
    return CUDA_SUCCESS;
}

API cuModuleLoadData(void** module, const void* image) {
    TRACE;
    const auto names = entries(static_cast<const char*>(image));
    for (const auto& [source, kernels] : emu::registry()) {
        if (kernels.size() != names.size()) continue;
        bool all = true;
        for (const auto& n : names) {
            bool found = false;
            for (const auto& k : kernels) found |= n == k.name;
            all &= found;
        }
        if (all) {
            *module = new Module{&kernels};
            return CUDA_SUCCESS;
        }
    }
    std::fprintf(stderr, "cuda emulator: no emulated source has this module's %zu kernels (rebuild it: emu/build.py)\n",
                 names.size());
    return CUDA_ERROR_INVALID_IMAGE;
}
API cuModuleUnload(void* module) {
    TRACE;
    delete static_cast<Module*>(module);
    return CUDA_SUCCESS;
}
API cuModuleGetFunction(void** f, void* module, const char* name) {
    TRACE;
    for (const auto& k : *static_cast<Module*>(module)->kernels) {
        if (std::strcmp(k.name, name) == 0) {
            *f = const_cast<emu::Kernel*>(&k);
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}
API cuFuncGetAttribute(int* v, int, void*) {
    TRACE;
    *v = 0;
    return CUDA_SUCCESS;
}
// The dynamic shared memory each kernel was allowed past the default 48 KB (attribute 8, as
// the driver checks it: a launch that asks for more is refused).
static std::map<const void*, int>& dynamic_limits() {
    static std::map<const void*, int> m;
    return m;
}
API cuFuncSetAttribute(void* f, int attribute, int value) {
    TRACE;
    if (attribute == 8) {
        if (value < 0 || value > 232448) return CUDA_ERROR_INVALID_VALUE;
        std::lock_guard<std::mutex> g(lock);
        dynamic_limits()[f] = value;
    }
    return CUDA_SUCCESS;
}
API cuFuncSetCacheConfig(void*, int) { TRACE; return CUDA_SUCCESS; }
API cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void*, void** args, void** extra) {
    TRACE;
    if (!f || extra || (size_t)bx * by * bz > 1024 || !gx || !gy || !gz || !bx || !by || !bz)
        return CUDA_ERROR_INVALID_VALUE;
    {
        std::lock_guard<std::mutex> g(lock);
        auto it = dynamic_limits().find(f);
        if (shared > (unsigned)(it == dynamic_limits().end() ? 49152 : it->second))
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (skipping(true)) return CUDA_SUCCESS;
    emu::launch(static_cast<const emu::Kernel*>(f), emu::dim3{gx, gy, gz}, emu::dim3{bx, by, bz}, shared, args);
    return CUDA_SUCCESS;
}

API cuGetErrorString(CUresult r, const char** s) {
    TRACE;
    *s = r == CUDA_SUCCESS ? "no error" : "an error of the CUDA emulator";
    return CUDA_SUCCESS;
}
API cuGetErrorName(CUresult r, const char** s) {
    TRACE;
    *s = r == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_EMULATOR";
    return CUDA_SUCCESS;
}
// NVRTC asks the driver for its private tables when it compiles; the emulator has none.
API cuGetExportTable(const void** table, const void*) {
    TRACE;
    *table = nullptr;
    return 801;  // CUDA_ERROR_NOT_SUPPORTED
}
