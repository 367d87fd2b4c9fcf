// A kernel whose launch tells nvcc's build from the CPU layer's by evaluation order (found by a red-team pass): nvcc
// evaluates the configuration (grid = 0) before the arguments that set the grid, so every call fails with
// cudaErrorInvalidConfiguration. The layer once evaluated the arguments first (g++ passes function arguments right
// to left), launched the right grid, and earned every CPU-layer point. It must fail every case there too.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#define GLU_OK 0
#define GLU_ERR_DTYPE (-1)
#define GLU_ERR_NOT_IMPLEMENTED (-2)
#define GLU_ERR_ARGS (-3)

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T>
__global__ void glu_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t h, int64_t s) {
    const int64_t n = rows * h;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / h, c = i % h;
        const float a = to_float(x[r * s + c]), b = to_float(x[r * s + h + c]);
        y[i] = from_float<T>(a / (1.0f + expf(-b)));
    }
}

template <typename T>
void launch_glu(const void* x, void* y, int64_t rows, int64_t h, int64_t s, cudaStream_t stream) {
    const int threads = 256;
    int64_t blocks = (rows * h + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    int grid = 0;
    glu_kernel<T><<<grid, threads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), rows, h,
                                                (grid = (int)blocks, s));
}

extern "C" int glu_cuda_forward(const void* x, void* y, int64_t rows, int64_t h, int64_t x_row_stride, int dtype,
                                cudaStream_t stream) {
    if (rows < 0 || h < 0 || x_row_stride < 2 * h) return GLU_ERR_ARGS;
    if (dtype < 0 || dtype > 2) return GLU_ERR_DTYPE;
    if (rows == 0 || h == 0) return GLU_OK;
    switch (dtype) {
        case 0: launch_glu<float>(x, y, rows, h, x_row_stride, stream); break;
        case 1: launch_glu<__half>(x, y, rows, h, x_row_stride, stream); break;
        case 2: launch_glu<__nv_bfloat16>(x, y, rows, h, x_row_stride, stream); break;
    }
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? GLU_OK : (int)err;
}
