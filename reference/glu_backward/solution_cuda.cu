// Staff CUDA solution for GLU backward: given x = [a | b] (rows x 2h) and dy (rows x h), write dx = [da | db]:
//
//     da = dy * s,   db = dy * a * s * (1 - s),   s = sigmoid(b)
//
// The entry's signature follows the spec's inputs (x, then dy; grader/child/cuda_abi.py):
//
//   int glu_backward_cuda(const void* x, const void* dy, void* dx, int64_t rows, int64_t out_cols,
//                         int64_t x_row_stride, int64_t dy_row_stride, int dtype, cudaStream_t stream);
//
// out_cols = 2h (dx has x's shape, contiguous); dtype 0 = float32, 1 = float16, 2 = bfloat16.
//
// Design: a flat grid over the rows * h half-row positions; position (r, c) reads a, b and dy once and writes da
// and db. 16-byte accesses (4 floats / 8 halves) when h and both row strides are multiples of the vector and every
// pointer is 16-byte aligned, one element otherwise; (r, c) by a 64-bit division only when an offset passes 2^31.
// Math in fp32 with 1 - s computed without cancellation (e = e^-|b|: s = 1/(1+e), 1 - s = e/(1+e) for b >= 0, the
// other way round for b < 0), rounded once on store.

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <type_traits>

#define GLUB_OK 0
#define GLUB_ERR_DTYPE (-1)
#define GLUB_ERR_NOT_IMPLEMENTED (-2)
#define GLUB_ERR_ARGS (-3)
#define GLUB_THREADS 256

namespace {

__device__ __forceinline__ void bwd1(float a, float b, float g, float& da, float& db) {
    const float e = expf(-fabsf(b));  // libdevice's accurate exp (~1 ulp); e^-|b| in (0, 1] never overflows
    const float r = 1.0f / (1.0f + e);
    const float s = b >= 0.0f ? r : e * r;
    const float t = b >= 0.0f ? e * r : r;
    da = g * s;
    db = da * a * t;
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// kElems consecutive elements of one row per unit (a 16-byte vector, or 1).
template <typename T, int kElems, typename Idx>
__global__ void __launch_bounds__(GLUB_THREADS)
glu_bwd(const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ dx, Idx n_units, Idx width, Idx h,
        Idx xs, Idx ys) {
    using Vec = typename std::conditional<kElems == 1, T, uint4>::type;
    for (Idx u = (Idx)blockIdx.x * GLUB_THREADS + threadIdx.x; u < n_units; u += (Idx)gridDim.x * GLUB_THREADS) {
        const Idx r = u / width;
        const Idx c = (u - r * width) * kElems;
        const Vec va = __ldg(reinterpret_cast<const Vec*>(x + r * xs + c));
        const Vec vb = __ldg(reinterpret_cast<const Vec*>(x + r * xs + h + c));
        const Vec vg = __ldg(reinterpret_cast<const Vec*>(dy + r * ys + c));
        T a[kElems], b[kElems], g[kElems], da[kElems], db[kElems];
        *reinterpret_cast<Vec*>(a) = va;
        *reinterpret_cast<Vec*>(b) = vb;
        *reinterpret_cast<Vec*>(g) = vg;
#pragma unroll
        for (int k = 0; k < kElems; ++k) {
            float fa, fb;
            bwd1(to_float(a[k]), to_float(b[k]), to_float(g[k]), fa, fb);
            da[k] = from_float<T>(fa);
            db[k] = from_float<T>(fb);
        }
        T* out = dx + r * (2 * h) + c;
        __stcs(reinterpret_cast<Vec*>(out), *reinterpret_cast<const Vec*>(da));
        __stcs(reinterpret_cast<Vec*>(out + h), *reinterpret_cast<const Vec*>(db));
    }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <typename T, int kElems>
void launch_path(const T* x, const T* dy, T* dx, int64_t rows, int64_t h, int64_t xs, int64_t ys,
                 cudaStream_t stream) {
    const int64_t width = h / kElems, n_units = rows * width;
    int64_t blocks = (n_units + GLUB_THREADS - 1) / GLUB_THREADS;
    if (blocks > 2147483647) blocks = 2147483647;
    const bool fits32 = (rows - 1) * xs + 2 * h < (1ll << 31) && rows * 2 * h < (1ll << 31) &&
                        n_units + blocks * GLUB_THREADS < (1ll << 31);
    if (fits32) {
        glu_bwd<T, kElems, uint32_t><<<(int)blocks, GLUB_THREADS, 0, stream>>>(
            x, dy, dx, (uint32_t)n_units, (uint32_t)width, (uint32_t)h, (uint32_t)xs, (uint32_t)ys);
    } else {
        glu_bwd<T, kElems, int64_t><<<(int)blocks, GLUB_THREADS, 0, stream>>>(x, dy, dx, n_units, width, h, xs, ys);
    }
}

template <typename T>
void launch(const void* xv, const void* dyv, void* dxv, int64_t rows, int64_t h, int64_t xs, int64_t ys,
            cudaStream_t stream) {
    const T* x = static_cast<const T*>(xv);
    const T* dy = static_cast<const T*>(dyv);
    T* dx = static_cast<T*>(dxv);
    constexpr int E = 16 / sizeof(T);
    if (h % E == 0 && xs % E == 0 && ys % E == 0 && aligned16(x) && aligned16(dy) && aligned16(dx)) {
        launch_path<T, E>(x, dy, dx, rows, h, xs, ys, stream);
    } else {
        launch_path<T, 1>(x, dy, dx, rows, h, xs, ys, stream);
    }
}

}  // namespace

extern "C" int glu_backward_cuda(const void* x, const void* dy, void* dx, int64_t rows, int64_t out_cols,
                                 int64_t x_row_stride, int64_t dy_row_stride, int dtype, cudaStream_t stream) {
    if (rows < 0 || out_cols < 0 || out_cols % 2 || x_row_stride < out_cols || dy_row_stride < out_cols / 2)
        return GLUB_ERR_ARGS;
    if (dtype < 0 || dtype > 2) return GLUB_ERR_DTYPE;
    const int64_t h = out_cols / 2;
    if (rows == 0 || h == 0) return GLUB_OK;
    if (x == nullptr || dy == nullptr || dx == nullptr) return GLUB_ERR_ARGS;
    if (rows > INT64_MAX / x_row_stride) return GLUB_ERR_ARGS;
    switch (dtype) {
        case 0: launch<float>(x, dy, dx, rows, h, x_row_stride, dy_row_stride, stream); break;
        case 1: launch<__half>(x, dy, dx, rows, h, x_row_stride, dy_row_stride, stream); break;
        default: launch<__nv_bfloat16>(x, dy, dx, rows, h, x_row_stride, dy_row_stride, stream); break;
    }
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? GLUB_OK : (int)err;
}
