// The reductions per element type, shared by the scatter and fiber kernels.

// ---- the reductions, per element type ----
// Acc: the accumulator; ld/st convert; the ops follow the CPU library's Element (wrapping
// integers, NaN-propagating max/min that keep the first of equal values, floor-divided integer
// means, f16/bf16 in f32 rounded once, bool sum as or and product as and).
template <typename T> struct Num;
#define INT_NUM(T, A)                                                                           \
    template <> struct Num<T> {                                                                 \
        typedef A Acc;                                                                          \
        static __device__ Acc ld(T v) { return (Acc)v; }                                        \
        static __device__ T st(Acc a) { return (T)a; }                                          \
        static __device__ Acc add(Acc a, Acc b) { return (Acc)((u64)a + (u64)b); }              \
        static __device__ Acc mul(Acc a, Acc b) { return (Acc)((u64)a * (u64)b); }              \
        static __device__ Acc mx(Acc c, Acc n) { return c < n ? n : c; }                        \
        static __device__ Acc mn(Acc c, Acc n) { return n < c ? n : c; }                        \
        static __device__ Acc mean(Acc a, i64 cnt) {                                            \
            T t = (T)a;                                                                         \
            if (cnt < 1) cnt = 1;                                                               \
            if ((T)-1 > (T)0) return (Acc)((u64)t / (u64)cnt);                                  \
            i64 s = (i64)t, q = s / cnt;                                                        \
            if ((s % cnt != 0) && (s < 0)) q -= 1;                                              \
            return (Acc)q;                                                                      \
        }                                                                                       \
    };
INT_NUM(u8, u64) INT_NUM(i8, i64) INT_NUM(i16, i64) INT_NUM(u16, u64) INT_NUM(i32, i64)
INT_NUM(u32, u64) INT_NUM(i64, i64) INT_NUM(u64, u64)

#define FLOAT_NUM(NAME, T, A, LD, ST)                                                           \
    struct NAME {                                                                               \
        typedef T Store;                                                                        \
        typedef A Acc;                                                                          \
        static __device__ Acc ld(T v) { return LD(v); }                                         \
        static __device__ T st(Acc a) { return ST(a); }                                         \
        static __device__ Acc add(Acc a, Acc b) { return a + b; }                               \
        static __device__ Acc mul(Acc a, Acc b) { return a * b; }                               \
        static __device__ Acc mx(Acc c, Acc n) { return (n != n) | (c < n) ? n : c; }           \
        static __device__ Acc mn(Acc c, Acc n) { return (n != n) | (n < c) ? n : c; }           \
        static __device__ Acc mean(Acc a, i64 cnt) { return a / (Acc)(cnt < 1 ? 1 : cnt); }     \
    };
#define ID(x) (x)
FLOAT_NUM(NumF32, float, float, ID, ID)
FLOAT_NUM(NumF64, double, double, ID, ID)
FLOAT_NUM(NumF16, u16, float, h2f, f2h)
FLOAT_NUM(NumBF16, u16, float, bf2f, f2bf)
template <> struct Num<float> : NumF32 {};
template <> struct Num<double> : NumF64 {};

struct NumBool {
    typedef bool Acc;
    static __device__ Acc ld(u8 v) { return v != 0; }
    static __device__ u8 st(Acc a) { return a ? 1 : 0; }
    static __device__ Acc add(Acc a, Acc b) { return a | b; }
    static __device__ Acc mul(Acc a, Acc b) { return a & b; }
    static __device__ Acc mx(Acc c, Acc n) { return c | n; }
    static __device__ Acc mn(Acc c, Acc n) { return c & n; }
    static __device__ Acc mean(Acc a, i64) { return a; }
};

enum { R_SUM = 0, R_PROD = 1, R_MEAN = 2, R_AMAX = 3, R_AMIN = 4, R_SET = 5 };

template <typename N>
__device__ __forceinline__ typename N::Acc combine(int reduce, typename N::Acc acc,
                                                   typename N::Acc v) {
    switch (reduce) {
        case R_SUM: case R_MEAN: return N::add(acc, v);
        case R_PROD: return N::mul(acc, v);
        case R_AMAX: return N::mx(acc, v);
        default: return N::mn(acc, v);
    }
}

