// What the kernel sources need to compile as plain C++ for the CPU emulator of the CUDA driver
// (see build.py): the thread indices of the running thread, block barriers and warp exchanges
// that switch between the threads of a block, and the atomics and bit casts the kernels use.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace emu {

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

// One CUDA thread, run as a fiber on its own stack.
struct Thread {
    void* sp = nullptr;
    dim3 tid;
    int lane = 0, warp = 0;
    int state = 0;  // see driver.cpp
    int op = 0, arg = 0;
    uint64_t value = 0, result = 0;
};

// The running thread and its block. Launches are serialised (one at a time in the process), so
// these and the blocks' shared memory are plain globals.
extern Thread* cur;
extern dim3 block_idx, block_dim, grid_dim;

// A kernel as build.py registers it: its name and a call of it with the launch's parameters.
struct Kernel {
    const char* name;
    void (*run)(void** params);
};
// The kernels of one source (device.rs's `Source`), registered when the library loads.
struct Register {
    Register(const char* source, std::vector<Kernel> kernels);
};

void syncthreads();
// The launch's dynamic shared memory (`DYNAMIC_SHARED` in common.cuh): its bytes as the launch
// asked, filled with 0xA5 before each block, so that a read of what the block did not write
// shows.
void* dynamic_shared();
// A warp-wide exchange: every live lane of the warp posts `value` (and `arg`), and each gets
// its result once all have posted.
uint64_t warp_op(int op, uint64_t value, int arg);
enum { W_SHFL_IDX, W_SHFL_UP, W_SHFL_DOWN, W_SHFL_XOR, W_MATCH_ANY, W_BALLOT };

template <typename T> inline uint64_t bits_of(T v) {
    uint64_t b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
}
template <typename T> inline T from_bits(uint64_t b) {
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
}
template <typename T, typename U> inline T cast_bits(U u) {
    static_assert(sizeof(T) == sizeof(U), "same size");
    T t;
    std::memcpy(&t, &u, sizeof(T));
    return t;
}

}  // namespace emu

#define threadIdx (emu::cur->tid)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __restrict__
#define __align__(n) __attribute__((aligned(n)))
// Blocks run one after another, so one static array is each block's own shared memory.
#define __shared__ static
#define __syncthreads() emu::syncthreads()

// ---- atomics (launches run one at a time, but the host may touch memory meanwhile) ----
template <typename T> inline T atomicAdd(T* p, T v) {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
template <typename T> inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
template <typename T> inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }
template <typename T> inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
template <typename T> inline T atomicCAS(T* p, T cmp, T v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}
template <typename T, typename F> inline T emu_atomic_update(T* p, F f) {
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(p, &old, f(old), false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
template <typename T> inline T atomicMin(T* p, T v) {
    return emu_atomic_update(p, [v](T o) { return v < o ? v : o; });
}
template <typename T> inline T atomicMax(T* p, T v) {
    return emu_atomic_update(p, [v](T o) { return v > o ? v : o; });
}
inline float atomicAdd(float* p, float v) {
    uint32_t* q = reinterpret_cast<uint32_t*>(p);
    uint32_t old = emu_atomic_update(q, [v](uint32_t o) {
        return emu::cast_bits<uint32_t>(emu::cast_bits<float>(o) + v);
    });
    return emu::cast_bits<float>(old);
}
inline double atomicAdd(double* p, double v) {
    uint64_t* q = reinterpret_cast<uint64_t*>(p);
    uint64_t old = emu_atomic_update(q, [v](uint64_t o) {
        return emu::cast_bits<uint64_t>(emu::cast_bits<double>(o) + v);
    });
    return emu::cast_bits<double>(old);
}

// ---- cache hints (plain accesses on the CPU) ----
template <typename T> inline T __ldcs(const T* p) { return *p; }
template <typename T> inline void __stcs(T* p, T v) { *p = v; }

// ---- bit casts and counts ----
inline float __int_as_float(int v) { return emu::cast_bits<float>(v); }
inline int __float_as_int(float v) { return emu::cast_bits<int>(v); }
inline float __uint_as_float(unsigned v) { return emu::cast_bits<float>(v); }
inline unsigned __float_as_uint(float v) { return emu::cast_bits<unsigned>(v); }
inline double __longlong_as_double(long long v) { return emu::cast_bits<double>(v); }
inline long long __double_as_longlong(double v) { return emu::cast_bits<long long>(v); }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(unsigned v) { return v ? __builtin_clz(v) : 32; }
inline int __clzll(unsigned long long v) { return v ? __builtin_clzll(v) : 64; }
inline int __ffs(unsigned v) { return __builtin_ffs((int)v); }

// CUDA's min/max overloads for the types the kernels take them of.
#define EMU_MINMAX(T)                                \
    inline T min(T a, T b) { return b < a ? b : a; } \
    inline T max(T a, T b) { return a < b ? b : a; }
EMU_MINMAX(int)
EMU_MINMAX(unsigned)
EMU_MINMAX(long long)
EMU_MINMAX(unsigned long long)
#undef EMU_MINMAX
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// ---- warp exchanges (every kernel passes the full mask) ----
template <typename T> inline T __shfl_sync(unsigned, T v, int src) {
    return emu::from_bits<T>(emu::warp_op(emu::W_SHFL_IDX, emu::bits_of(v), src));
}
template <typename T> inline T __shfl_up_sync(unsigned, T v, unsigned d) {
    return emu::from_bits<T>(emu::warp_op(emu::W_SHFL_UP, emu::bits_of(v), (int)d));
}
template <typename T> inline T __shfl_down_sync(unsigned, T v, unsigned d) {
    return emu::from_bits<T>(emu::warp_op(emu::W_SHFL_DOWN, emu::bits_of(v), (int)d));
}
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int m) {
    return emu::from_bits<T>(emu::warp_op(emu::W_SHFL_XOR, emu::bits_of(v), m));
}
template <typename T> inline unsigned __match_any_sync(unsigned, T v) {
    return (unsigned)emu::warp_op(emu::W_MATCH_ANY, emu::bits_of(v), 0);
}
inline unsigned __ballot_sync(unsigned, int pred) {
    return (unsigned)emu::warp_op(emu::W_BALLOT, pred != 0, 0);
}
inline void __syncwarp(unsigned = 0xffffffffu) { emu::warp_op(emu::W_BALLOT, 0, 0); }
