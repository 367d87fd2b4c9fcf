#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
__device__ __forceinline__ float glu1(float a, float b) { return a * (1.0f / (1.0f + __expf(-b))); }

// Correct: one thread per output element, a grid that covers them once.
template <typename T>
__global__ void glu_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t h, int64_t stride) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * h) return;
    const int64_t r = i / h, c = i % h;
    y[i] = from_float<T>(glu1(to_float(x[r * stride + c]), to_float(x[r * stride + h + c])));
}

template <typename T>
void launch_glu(const void* x, void* y, int64_t rows, int64_t h, int64_t stride, cudaStream_t stream) {
    const int threads = 128;
    const int64_t n = rows * h;
    const int blocks = (int)((n + threads - 1) / threads);
    glu_kernel<T><<<blocks, threads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), rows, h, stride);
}

extern "C" int glu_cuda_forward(const void* x, void* y, int64_t rows, int64_t h, int64_t x_row_stride, int dtype,
                                cudaStream_t stream) {
    if (rows < 0 || h < 0 || x_row_stride < 2 * h) return -3;
    if (dtype < 0 || dtype > 2) return -1;
    if (rows == 0 || h == 0) return 0;
    switch (dtype) {
        case 0: launch_glu<float>(x, y, rows, h, x_row_stride, stream); break;
        case 1: launch_glu<__half>(x, y, rows, h, x_row_stride, stream); break;
        case 2: launch_glu<__nv_bfloat16>(x, y, rows, h, x_row_stride, stream); break;
    }
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? 0 : (int)err;
}
