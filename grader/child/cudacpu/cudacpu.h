// cudacpu.h: the grader's CUDA-on-CPU layer. A student's .cu compiles as host C++ with this header forced in
// first (-include cudacpu.h); grader/cuda/cudacpu_source.py turns `kernel<<<grid, block, shm, stream>>>(args)` into
// `(cudacpu::configure(cudacpu::Config(grid, block, shm, stream)) ? (void)0 : cudacpu::launch_configured(<kernel as
// a generic lambda>, args))`, nvcc's order of evaluation; `launch_configured` calls `cudacpu::launch(cfg, kernel,
// args)`, which runs every
// block and every thread of the grid one after the other, in the order the harness asks for (forward, reverse, or
// a seeded permutation): two orders that give different outputs show a race.
//
// What it cannot run faithfully is not defined here (__syncthreads, warp shuffles, atomics, dynamic shared memory,
// cooperative groups): grader/cuda/cudacpu.py finds those in the preprocessed source and reports "needs a GPU", and one
// it missed fails to compile or link, which is reported the same way.
#pragma once
// nvcc defines __CUDACC__ 1 too. The layer defines no macro of its own that outlives this header: every helper below
// is #undef'd at its end, and grader/cuda/cudacpu.py undefines the command line's (CUDACPU_ENTRY, CUDACPU_SCAN, the
// signature's CUDACPU_INPUTS/OUTPUTS/SCALARS) before the student's first line, so that no #ifdef can tell this build
// from nvcc's (grader/cuda/cudacpu_program.py, one_program).
#define __CUDACC__ 1

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#define __global__
// __device__ and __constant__ variables are device memory: on a GPU, host code that reads or writes one reaches a
// host copy of its own (nvcc warns: "a __device__ variable cannot be directly read in a host function"), never what
// a kernel reads or wrote. g++ puts each such variable in .noinit (no initializer) or .persistent (one), attributes
// that apply to variables only (g++ ignores them on a function, a lambda or a const variable, which stays readable
// from the host as its copy on a GPU is); the harness's link gathers those sections into pages of their own
// (grader/cuda/cudacpu.py, DEVICE_VARIABLES_SCRIPT) that host code cannot touch between launches (device_memory.h).
// Elsewhere (clang, no ELF) the qualifiers are empty and the variables ordinary host memory.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && defined(__ELF__)
#define __device__ __attribute__((noinit, persistent))
#define __constant__ __attribute__((noinit, persistent))
#else
#define __device__
#define __constant__
#endif
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __grid_constant__
// A block's threads run one after another, so a static local is one block's shared memory. Without
// __syncthreads (which marks the source "needs a GPU") threads that share it race, and the orders show that.
#ifndef CUDACPU_SCAN  // the scan for what needs a GPU (grader/cuda/cudacpu.py) sees __shared__ as written
#define __shared__ static
#endif

// ---- the execution model ------------------------------------------------------------------------------------
struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim{1, 1, 1};
inline thread_local dim3 gridDim{1, 1, 1};
namespace cudacpu {
inline int launch_depth = 0;  // launches running (a kernel may launch another): 0 in host code
}
// AddressSanitizer calls __asan_on_error as it starts a report: say which block and thread of the grid was running,
// so that the message can name them (grader/child/cudacpu_binding.py reads this line); nothing in host code, outside
// any launch, where no thread of a grid runs. Weak: every unit that includes this header defines it, and the linker
// keeps one.
extern "C" __attribute__((weak)) void __asan_on_error() {
    if (cudacpu::launch_depth > 0)
        fprintf(stderr, "cudacpu-thread block=(%u,%u,%u) thread=(%u,%u,%u)\n", blockIdx.x, blockIdx.y, blockIdx.z,
                threadIdx.x, threadIdx.y, threadIdx.z);
}
constexpr int warpSize = 32;

// ---- the runtime API, as much of it as a launcher needs ------------------------------------------------------
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoDevice = 100,
    cudaErrorLaunchOutOfResources = 701,
};
typedef cudaError_t cudaError;
enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxGridDimX = 5,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrMaxThreadsPerMultiProcessor = 39,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
};
struct cudaDeviceProp {
    char name[256];
    int multiProcessorCount, maxThreadsPerBlock, maxThreadsPerMultiProcessor, warpSize, major, minor;
    int maxGridSize[3], maxThreadsDim[3], regsPerBlock;
    size_t sharedMemPerBlock, totalGlobalMem;
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

namespace cudacpu {
// A GPU like the course's (an H100/H200: 132 SMs), so that a launcher sizing its grid by SM count picks a grid of
// the same shape as there.
constexpr int kSMs = 132;
inline thread_local cudaError_t last_error = cudaSuccess;
inline int order = 0;  // 0 forward, 1 reverse, 2 a permutation from `seed` (set by the harness)
inline unsigned long long seed = 1;
inline long long launches = 0;  // kernel launches that ran (the harness reports them: a call must launch one)
// Device memory (the entry point's buffers, the __device__ variables) is closed to host code while the entry point
// runs, and opened to a launch's kernel code: the harness sets this (device_memory.h), the launch calls it with true
// as it begins and false as it ends. Null (nothing protected) where nothing set it.
inline void (*device_access)(bool open) = nullptr;  // device memory closes when the outermost launch ends
struct LaunchAccess {
    LaunchAccess() {
        if (launch_depth++ == 0 && device_access) device_access(true);
    }
    ~LaunchAccess() {
        if (--launch_depth == 0 && device_access) device_access(false);
    }
    LaunchAccess(const LaunchAccess&) = delete;
    LaunchAccess& operator=(const LaunchAccess&) = delete;
};
}  // namespace cudacpu

inline cudaError_t cudaGetLastError() {
    cudaError_t e = cudacpu::last_error;
    cudacpu::last_error = cudaSuccess;
    return e;
}
inline cudaError_t cudaPeekAtLastError() { return cudacpu::last_error; }
inline const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        default: return "unknown error";
    }
}
inline const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        default: return "cudaErrorUnknown";
    }
}
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
    switch (a) {
        case cudaDevAttrMaxThreadsPerBlock: *v = 1024; break;
        case cudaDevAttrMaxGridDimX: *v = 2147483647; break;
        case cudaDevAttrMaxSharedMemoryPerBlock: *v = 49152; break;
        case cudaDevAttrWarpSize: *v = 32; break;
        case cudaDevAttrMultiProcessorCount: *v = cudacpu::kSMs; break;
        case cudaDevAttrMaxThreadsPerMultiProcessor: *v = 2048; break;
        case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
        case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
        default: return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
    memset(p, 0, sizeof *p);
    strcpy(p->name, "CUDA-on-CPU (grader)");
    p->multiProcessorCount = cudacpu::kSMs;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsPerMultiProcessor = 2048;
    p->warpSize = 32;
    p->major = 9;
    p->minor = 0;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->regsPerBlock = 65536;
    p->sharedMemPerBlock = 49152;
    p->totalGlobalMem = (size_t)141 << 30;
    return cudaSuccess;
}
template <class F>
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, F, int block, size_t) {
    *n = block > 0 ? std::max(1, std::min(32, 2048 / block)) : 0;
    return cudaSuccess;
}
template <class F>
inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaSuccess; }

// ---- launches -------------------------------------------------------------------------------------------------
namespace cudacpu {
struct Config {
    dim3 grid, block;
    Config() = default;
    Config(dim3 g, dim3 b, size_t = 0, cudaStream_t = nullptr) : grid(g), block(b) {}
};

// The i-th of n in the current order: identity, reversed, or i -> (a*i + c) mod n with a coprime to n (a
// permutation of 0..n-1 that needs no memory, however large the grid).
struct Order {
    unsigned long long n, a = 1, c = 0;
    int kind;
    Order(unsigned long long count, int k, unsigned long long s) : n(count), kind(k) {
        if (kind == 2 && n > 1) {
            unsigned long long x = s * 6364136223846793005ULL + 1442695040888963407ULL;
            a = (x >> 17) % n | 1;
            auto gcd = [](unsigned long long p, unsigned long long q) {
                while (q) { unsigned long long t = p % q; p = q; q = t; }
                return p;
            };
            while (gcd(a, n) != 1) a += 2;
            c = (x >> 7) % n;
        }
    }
    unsigned long long operator[](unsigned long long i) const {
        if (kind == 1) return n - 1 - i;
        if (kind == 2 && n > 1) return (unsigned long long)(((unsigned __int128)a * i + c) % n);
        return i;
    }
};

template <class K, class... A>
void launch(const Config& cfg, K&& kernel, A&&... args) {
    const dim3 g = cfg.grid, b = cfg.block;
    const unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    // The GPU's launch limits: such a launch does not run, and cudaGetLastError() says why.
    if (g.x == 0 || g.y == 0 || g.z == 0 || threads == 0 || threads > 1024 || b.z > 64 || g.y > 65535 ||
        g.z > 65535 || g.x > 2147483647u) {
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    ++launches;
    const LaunchAccess open;  // the kernel's code may touch device memory until the launch returns (or throws)
    const unsigned long long blocks = (unsigned long long)g.x * g.y * g.z;
    const Order bo(blocks, order, seed), to(threads, order, seed * 31 + 7);
    gridDim = g;
    blockDim = b;
    for (unsigned long long i = 0; i < blocks; ++i) {
        const unsigned long long k = bo[i];
        blockIdx = uint3{(unsigned)(k % g.x), (unsigned)(k / g.x % g.y), (unsigned)(k / g.x / g.y)};
        for (unsigned long long j = 0; j < threads; ++j) {
            const unsigned long long t = to[j];
            threadIdx = uint3{(unsigned)(t % b.x), (unsigned)(t / b.x % b.y), (unsigned)(t / b.x / b.y)};
            kernel(args...);  // the arguments are copied into every thread, as the GPU's are by value
        }
    }
}

// nvcc sequences `k<<<cfg>>>(args)` as `(__cudaPushCallConfiguration(cfg) ? (void)0 : k(args))`: the configuration
// is evaluated before the arguments, and popped by the launch. The rewrite does the same (a launch whose arguments
// change what its configuration reads sees the configuration as it was, as on the GPU). A stack, as nvcc's: an
// argument may call a function that launches a kernel of its own.
inline Config pushed_configs[64] = {};
inline int pushed = 0;
inline bool configure(const Config& cfg) {
    if (pushed < 64) pushed_configs[pushed] = cfg;
    ++pushed;
    return false;
}
template <class K, class... A>
void launch_configured(K&& kernel, A&&... args) {
    --pushed;
    if (pushed >= 64) {  // deeper than any real launcher nests: refused as the GPU refuses a bad launch
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    launch(pushed_configs[pushed], kernel, args...);
}
}  // namespace cudacpu

// ---- vector types -------------------------------------------------------------------------------------------
// The copy constructor and assignment read and write the members one by one: a whole-struct copy through a
// misaligned pointer (`*reinterpret_cast<const float4*>(p)`) is then a member access UBSan checks with clang too
// (g++ already checks the reference binding).
#define CUDACPU_VEC2(T, N, AL)                                                            \
    struct alignas(AL) N##2 {                                                             \
        T x, y;                                                                           \
        N##2() = default;                                                                 \
        constexpr N##2(T a, T b = 0) : x(a), y(b) {}                                    \
        N##2(const N##2& o) : x(o.x), y(o.y) {}                                           \
        N##2& operator=(const N##2& o) { x = o.x; y = o.y; return *this; }               \
    };                                                                                    \
    inline N##2 make_##N##2(T x, T y) { return N##2(x, y); }
#define CUDACPU_VEC4(T, N, AL)                                                            \
    struct alignas(AL) N##4 {                                                             \
        T x, y, z, w;                                                                     \
        N##4() = default;                                                                 \
        constexpr N##4(T a, T b = 0, T c = 0, T d = 0) : x(a), y(b), z(c), w(d) {}  \
        N##4(const N##4& o) : x(o.x), y(o.y), z(o.z), w(o.w) {}                           \
        N##4& operator=(const N##4& o) { x = o.x; y = o.y; z = o.z; w = o.w; return *this; } \
    };                                                                                    \
    inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4(x, y, z, w); }
#define CUDACPU_VEC3(T, N) \
    struct N##3 { T x, y, z; }; \
    inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
CUDACPU_VEC2(float, float, 8)
CUDACPU_VEC3(float, float)
CUDACPU_VEC4(float, float, 16)
CUDACPU_VEC2(double, double, 16)
CUDACPU_VEC4(double, double, 32)
CUDACPU_VEC2(int, int, 8)
CUDACPU_VEC3(int, int)
CUDACPU_VEC4(int, int, 16)
CUDACPU_VEC2(unsigned int, uint, 8)
CUDACPU_VEC4(unsigned int, uint, 16)
CUDACPU_VEC2(short, short, 4)
CUDACPU_VEC4(short, short, 8)
CUDACPU_VEC2(unsigned short, ushort, 4)
CUDACPU_VEC4(unsigned short, ushort, 8)
CUDACPU_VEC2(signed char, char, 2)
CUDACPU_VEC4(signed char, char, 4)
CUDACPU_VEC2(unsigned char, uchar, 2)
CUDACPU_VEC4(unsigned char, uchar, 4)
CUDACPU_VEC2(long long, longlong, 16)
CUDACPU_VEC2(unsigned long long, ulonglong, 16)
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }

// ---- float intrinsics -------------------------------------------------------------------------------------------
// The fast forms (__expf, __fdividef, ...) are the exact ones here: the grader's tolerances cover both.
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }  // (exp10f is a glibc extension: not on macOS)
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __tanhf(float x) { return tanhf(x); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
inline float __saturatef(float x) { return x != x ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
inline int __float_as_int(float f) { int v; memcpy(&v, &f, 4); return v; }
inline float __uint_as_float(unsigned v) { float f; memcpy(&f, &v, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned v; memcpy(&v, &f, 4); return v; }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz((unsigned)v); }
inline int __clzll(long long v) { return v == 0 ? 64 : __builtin_clzll((unsigned long long)v); }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline int __ffsll(long long v) { return __builtin_ffsll(v); }
// CUDA's min/max: overloads for mixed arithmetic types, in the global namespace.
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> min(A a, B b) { return b < a ? b : a; }
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> max(A a, B b) { return a < b ? b : a; }

// Cache-hinted loads and stores: plain ones on a CPU.
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stwb(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }

// ---- __half and __nv_bfloat16: storage types with round-to-nearest-even conversions ---------------------------
// Arithmetic on them goes through float (the implicit conversions), which rounds once, as __hadd and friends do.
namespace cudacpu {
inline unsigned short float_to_half_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return (unsigned short)(sign | (x > 0x7f800000u ? 0x7e00u | ((x >> 13) & 0x3ffu) : 0x7c00u));
    if (x >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // >= 65520 rounds to infinity
    if (x < 0x38800000u) {  // below 2^-14: a subnormal half (or zero), m * 2^-24, m rounded to nearest even
        float v;
        memcpy(&v, &x, 4);
        return (unsigned short)(sign | (uint32_t)rintf(v * 16777216.0f));
    }
    uint32_t base = (((x >> 23) - 112u) << 10) | ((x >> 13) & 0x3ffu);
    const uint32_t rest = x & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (base & 1u))) ++base;  // a carry into the exponent is right
    return (unsigned short)(sign | base);
}
inline float half_bits_to_float(unsigned short h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t x;
    if (e == 0x1f) {
        x = sign | 0x7f800000u | (m << 13);
    } else if (e == 0) {
        const float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    } else {
        x = sign | ((e + 112u) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}
inline unsigned short float_to_bf16_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);  // NaN stays (quiet) NaN
    return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float bf16_bits_to_float(unsigned short b) {
    const uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
}  // namespace cudacpu

struct __half_raw {
    unsigned short x;
};
struct __nv_bfloat16_raw {
    unsigned short x;
};
struct alignas(2) __half {
    unsigned short __x;
    __half() = default;
    __half(__half_raw r) : __x(r.x) {}
    __half(float f) : __x(cudacpu::float_to_half_bits(f)) {}
    __half(double d) : __x(cudacpu::float_to_half_bits((float)d)) {}
    __half(int i) : __x(cudacpu::float_to_half_bits((float)i)) {}
    operator float() const { return cudacpu::half_bits_to_float(__x); }
    operator __half_raw() const { return __half_raw{__x}; }
};
struct alignas(2) __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(__nv_bfloat16_raw r) : __x(r.x) {}
    __nv_bfloat16(float f) : __x(cudacpu::float_to_bf16_bits(f)) {}
    __nv_bfloat16(double d) : __x(cudacpu::float_to_bf16_bits((float)d)) {}
    __nv_bfloat16(int i) : __x(cudacpu::float_to_bf16_bits((float)i)) {}
    operator float() const { return cudacpu::bf16_bits_to_float(__x); }
    operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
};
typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;
#define CUDACPU_PAIR(N, T)                                           \
    struct alignas(4) N {                                            \
        T x, y;                                                      \
        N() = default;                                               \
        constexpr N(T a, T b) : x(a), y(b) {}                        \
        N(const N& o) : x(o.x), y(o.y) {}                            \
        N& operator=(const N& o) { x = o.x; y = o.y; return *this; } \
    };
CUDACPU_PAIR(__half2, __half)
CUDACPU_PAIR(__nv_bfloat162, __nv_bfloat16)
typedef __half2 half2;
typedef __nv_bfloat162 nv_bfloat162;

inline float __half2float(__half h) { return (float)h; }
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __double2half(double d) { return __half((float)d); }
inline __half __int2half_rn(int i) { return __half((float)i); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline short __half_as_short(__half h) { return (short)h.__x; }
inline __half __ushort_as_half(unsigned short v) { return __half(__half_raw{v}); }
inline __half __short_as_half(short v) { return __half(__half_raw{(unsigned short)v}); }
inline float __bfloat162float(__nv_bfloat16 b) { return (float)b; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16((float)d); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline short __bfloat16_as_short(__nv_bfloat16 b) { return (short)b.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short v) { return __nv_bfloat16(__nv_bfloat16_raw{v}); }
inline __nv_bfloat16 __short_as_bfloat16(short v) { return __nv_bfloat16(__nv_bfloat16_raw{(unsigned short)v}); }

inline __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
inline __half2 __half2half2(__half a) { return __half2{a, a}; }
inline __half2 __float2half2_rn(float f) { return __half2{__half(f), __half(f)}; }
inline __half2 __floats2half2_rn(float a, float b) { return __half2{__half(a), __half(b)}; }
inline __half2 __float22half2_rn(float2 v) { return __half2{__half(v.x), __half(v.y)}; }
inline float2 __half22float2(__half2 v) { return float2{(float)v.x, (float)v.y}; }
inline float __low2float(__half2 v) { return (float)v.x; }
inline float __high2float(__half2 v) { return (float)v.y; }
inline __half __low2half(__half2 v) { return v.x; }
inline __half __high2half(__half2 v) { return v.y; }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162{a, b}; }
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162{a, a}; }
inline __nv_bfloat162 __float2bfloat162_rn(float f) { return __nv_bfloat162{__nv_bfloat16(f), __nv_bfloat16(f)}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return __nv_bfloat162{__nv_bfloat16(a), __nv_bfloat16(b)};
}
inline __nv_bfloat162 __float22bfloat162_rn(float2 v) { return __nv_bfloat162{__nv_bfloat16(v.x), __nv_bfloat16(v.y)}; }
inline float2 __bfloat1622float2(__nv_bfloat162 v) { return float2{(float)v.x, (float)v.y}; }
inline float __low2float(__nv_bfloat162 v) { return (float)v.x; }
inline float __high2float(__nv_bfloat162 v) { return (float)v.y; }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 v) { return v.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 v) { return v.y; }

// The scalar arithmetic intrinsics, for both 16-bit types: computed in float, rounded once.
#define CUDACPU_H_ARITH(T)                                                            \
    inline T __hadd(T a, T b) { return T((float)a + (float)b); }                      \
    inline T __hsub(T a, T b) { return T((float)a - (float)b); }                      \
    inline T __hmul(T a, T b) { return T((float)a * (float)b); }                      \
    inline T __hdiv(T a, T b) { return T((float)a / (float)b); }                      \
    inline T __hfma(T a, T b, T c) { return T(fmaf((float)a, (float)b, (float)c)); }  \
    inline T __hneg(T a) { return T(-(float)a); }                                     \
    inline T __habs(T a) { return T(fabsf((float)a)); }                               \
    inline T __hmax(T a, T b) { return T(fmaxf((float)a, (float)b)); }                \
    inline T __hmin(T a, T b) { return T(fminf((float)a, (float)b)); }                \
    inline bool __hisnan(T a) { return std::isnan((float)a); }                        \
    inline int __hisinf(T a) { float f = a; return std::isinf(f) ? (f < 0 ? -1 : 1) : 0; } \
    inline T hexp(T a) { return T(expf((float)a)); }                                  \
    inline T hrcp(T a) { return T(1.0f / (float)a); }
CUDACPU_H_ARITH(__half)
CUDACPU_H_ARITH(__nv_bfloat16)
#define CUDACPU_H2_ARITH(T2, T)                                                                \
    inline T2 __hadd2(T2 a, T2 b) { return T2{__hadd(a.x, b.x), __hadd(a.y, b.y)}; }           \
    inline T2 __hsub2(T2 a, T2 b) { return T2{__hsub(a.x, b.x), __hsub(a.y, b.y)}; }           \
    inline T2 __hmul2(T2 a, T2 b) { return T2{__hmul(a.x, b.x), __hmul(a.y, b.y)}; }           \
    inline T2 __h2div(T2 a, T2 b) { return T2{__hdiv(a.x, b.x), __hdiv(a.y, b.y)}; }           \
    inline T2 __hfma2(T2 a, T2 b, T2 c) { return T2{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; } \
    inline T2 __hneg2(T2 a) { return T2{__hneg(a.x), __hneg(a.y)}; }                           \
    inline T2 h2exp(T2 a) { return T2{hexp(a.x), hexp(a.y)}; }
CUDACPU_H2_ARITH(__half2, __half)
CUDACPU_H2_ARITH(__nv_bfloat162, __nv_bfloat16)

// Gone before the student's code (see the top).
#undef CUDACPU_VEC2
#undef CUDACPU_VEC3
#undef CUDACPU_VEC4
#undef CUDACPU_PAIR
#undef CUDACPU_H_ARITH
#undef CUDACPU_H2_ARITH
