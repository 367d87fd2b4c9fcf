// Staff CUDA solution for GeGLU: y[r, c] = gelu(a[r, c]) * b[r, c] (gelu: the tanh approximation, Gemma's), x[r, :] = [a | b] split in halves.
// Same contract as assignment/geglu/geglu_cuda.cu: plain CUDA C++, called through ctypes as
//
//   int geglu_cuda_forward(const void* x, void* y, int64_t rows, int64_t h, int64_t x_row_stride, int dtype,
//                           cudaStream_t stream);
//
//   x: rows x (2h), row stride x_row_stride elements (>= 2h), last dimension contiguous; y: rows x h, contiguous;
//   dtype: 0 = float32, 1 = float16, 2 = bfloat16.
//
// Design (GLU's staff kernel, reference/glu/solution_cuda.cu, cut to its measured essentials): two reads and one
// write per output element and a handful of flops, so memory-bound.
//   * 16-byte accesses (4 floats or 8 halves per thread per load/store) when h and the row stride are multiples
//     of the vector and the pointers are 16-byte aligned; one element per access otherwise.
//   * A flat grid over output units (16-byte vectors or elements). Unit u is in row u / width: with 32-bit offsets
//     (every tensor below 2^31 elements) that division is a multiply-high and a shift by a magic number computed
//     once on the host (FastDiv, the method compilers use for a literal divisor); 64-bit division otherwise.
//   * x read through the read-only path (__ldg), y stored streaming (__stcs: written once, never re-read).
//   * Math in fp32, rounded once on store, without the cancellation of 1 + tanh(u) near tanh(u) = -1:
//     gelu(a) * b = 0.5 a (1 + tanh(u)) b = a * b / (1 + e^(-2u)), u = sqrt(2/pi) (a + 0.044715 a^3);
//     a = -inf gives -inf / inf = NaN as PyTorch's formula does, a = -100 gives -0, a = +inf gives inf * b.

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#define GATED_OK 0
#define GATED_ERR_DTYPE (-1)
#define GATED_ERR_NOT_IMPLEMENTED (-2)
#define GATED_ERR_ARGS (-3)
#define GATED_THREADS 256

namespace {

// The activation of the gate half, in fp32.
__device__ __forceinline__ float gated1(float a, float b) {
    const float u = 0.7978845608028654f * (a + 0.044715f * a * a * a);
    return __fdividef(a * b, 1.0f + expf(-2.0f * u));
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T> __device__ __forceinline__ uint4 gated_vec(uint4 va, uint4 vb) {
    constexpr int E = 16 / sizeof(T);
    T a[E], b[E];
    *reinterpret_cast<uint4*>(a) = va;
    *reinterpret_cast<uint4*>(b) = vb;
#pragma unroll
    for (int k = 0; k < E; ++k) a[k] = from_float<T>(gated1(to_float(a[k]), to_float(b[k])));
    return *reinterpret_cast<const uint4*>(a);
}

// n / d as a multiply-high and a shift, for n, d in [0, 2^31) (CUTLASS's FastDivmod bounds); mul = 0 marks d = 1.
struct FastDiv {
    uint32_t d, mul, shr;
    __device__ __forceinline__ uint32_t div(uint32_t n) const { return mul ? (__umulhi(n, mul) >> shr) : n; }
};
FastDiv make_fastdiv(uint32_t d) {
    FastDiv f{d, 0u, 0u};
    if (d <= 1) return f;
    int l = 0;
    while ((1ull << l) < d) ++l;
    f.mul = (uint32_t)(((1ull << (31 + l)) + d - 1) / d);
    f.shr = (uint32_t)(l - 1);
    return f;
}

template <typename T, bool kVec>
__global__ void __launch_bounds__(GATED_THREADS)
gated32(const T* __restrict__ x, T* __restrict__ y, uint32_t n_units, FastDiv width, uint32_t h, uint32_t stride) {
    constexpr uint32_t E = kVec ? 16 / sizeof(T) : 1;
    const uint32_t u = blockIdx.x * GATED_THREADS + threadIdx.x;  // the host launches one unit per thread
    if (u >= n_units) return;
    const uint32_t r = width.div(u);
    const T* pa = x + (r * stride + (u - r * width.d) * E);
    if constexpr (kVec) {
        const uint4 va = __ldg(reinterpret_cast<const uint4*>(pa));
        const uint4 vb = __ldg(reinterpret_cast<const uint4*>(pa + h));
        __stcs(reinterpret_cast<uint4*>(y) + u, gated_vec<T>(va, vb));
    } else {
        y[u] = from_float<T>(gated1(to_float(__ldg(pa)), to_float(__ldg(pa + h))));
    }
}

template <typename T, bool kVec>
__global__ void __launch_bounds__(GATED_THREADS)
gated64(const T* __restrict__ x, T* __restrict__ y, int64_t n_units, int64_t width, int64_t h, int64_t stride) {
    constexpr int64_t E = kVec ? 16 / sizeof(T) : 1;
    for (int64_t u = (int64_t)blockIdx.x * GATED_THREADS + threadIdx.x; u < n_units;
         u += (int64_t)gridDim.x * GATED_THREADS) {
        const int64_t r = u / width;
        const T* pa = x + (r * stride + (u - r * width) * E);
        if constexpr (kVec) {
            const uint4 va = __ldg(reinterpret_cast<const uint4*>(pa));
            const uint4 vb = __ldg(reinterpret_cast<const uint4*>(pa + h));
            __stcs(reinterpret_cast<uint4*>(y) + u, gated_vec<T>(va, vb));
        } else {
            y[u] = from_float<T>(gated1(to_float(__ldg(pa)), to_float(__ldg(pa + h))));
        }
    }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <typename T, bool kVec>
void launch_path(const T* x, T* y, int64_t rows, int64_t h, int64_t stride, cudaStream_t stream) {
    constexpr int64_t E = kVec ? 16 / sizeof(T) : 1;
    const int64_t width = h / E, n_units = rows * width;
    const int64_t blocks = (n_units + GATED_THREADS - 1) / GATED_THREADS;
    const bool fits32 = (rows - 1) * stride + 2 * h < (1ll << 31) && blocks * GATED_THREADS < (1ll << 31);
    if (fits32) {
        gated32<T, kVec><<<(unsigned)blocks, GATED_THREADS, 0, stream>>>(
            x, y, (uint32_t)n_units, make_fastdiv((uint32_t)width), (uint32_t)h, (uint32_t)stride);
    } else {
        const int grid = blocks > 2147483647 ? 2147483647 : (int)blocks;  // the grid-stride loop covers the rest
        gated64<T, kVec><<<grid, GATED_THREADS, 0, stream>>>(x, y, n_units, width, h, stride);
    }
}

template <typename T>
void launch(const void* xv, void* yv, int64_t rows, int64_t h, int64_t stride, cudaStream_t stream) {
    const T* x = static_cast<const T*>(xv);
    T* y = static_cast<T*>(yv);
    constexpr int64_t E = 16 / sizeof(T);
    if (h % E == 0 && stride % E == 0 && aligned16(x) && aligned16(y)) {
        launch_path<T, true>(x, y, rows, h, stride, stream);
    } else {
        launch_path<T, false>(x, y, rows, h, stride, stream);
    }
}

}  // namespace

extern "C" int geglu_cuda_forward(const void* x, void* y, int64_t rows, int64_t h, int64_t x_row_stride, int dtype,
                                   cudaStream_t stream) {
    if (rows < 0 || h < 0 || h > INT64_MAX / 2 || x_row_stride < 2 * h) return GATED_ERR_ARGS;
    if (dtype < 0 || dtype > 2) return GATED_ERR_DTYPE;
    if (rows == 0 || h == 0) return GATED_OK;
    if (x == nullptr || y == nullptr) return GATED_ERR_ARGS;
    if (rows > INT64_MAX / x_row_stride) return GATED_ERR_ARGS;
    switch (dtype) {
        case 0: launch<float>(x, y, rows, h, x_row_stride, stream); break;
        case 1: launch<__half>(x, y, rows, h, x_row_stride, stream); break;
        default: launch<__nv_bfloat16>(x, y, rows, h, x_row_stride, stream); break;
    }
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? GATED_OK : (int)err;
}
