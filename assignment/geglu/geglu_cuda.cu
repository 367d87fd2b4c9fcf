// Part 2: GeGLU as a CUDA kernel.  Read assignment/geglu/README.md, section "Part 2: the CUDA kernel", first.
//
//     y[r, c] = gelu(a[r, c]) * b[r, c],   x[r, :] = [a | b], each h wide, gelu the tanh approximation:
//     gelu(a) = 0.5 a (1 + tanh(u)) = a / (1 + e^(-2u)),   u = sqrt(2/pi) (a + 0.044715 a^3)
//
// The grader builds this file with nvcc and calls geglu_cuda_forward through ctypes: keep its name, extern "C"
// and signature. Return codes: 0 ok, -1 bad dtype, -2 not implemented (this stub), -3 bad arguments, > 0 a
// cudaError_t from the launch. GLU's stub (assignment/glu/glu_cuda.cu) explains every step at length; this one is
// the same with another activation.

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#define GATED_OK 0
#define GATED_ERR_DTYPE (-1)
#define GATED_ERR_NOT_IMPLEMENTED (-2)
#define GATED_ERR_ARGS (-3)

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// TODO 1: the kernel. x: rows x (2h), row r at x + r * x_row_stride; y: rows x h contiguous.
// Grid-stride over i = 0 .. rows*h - 1 in int64_t; r = i / h, c = i % h; a = x[r * x_row_stride + c],
// b = x[r * x_row_stride + h + c]; y[i] = from_float<T>(a * b / (1.0f + __expf(-2.0f * u))) with a, b as float.
template <typename T>
__global__ void geglu_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t h,
                              int64_t x_row_stride) {
    // TODO 1: your code here.
}

template <typename T>
void launch_geglu(const void* x, void* y, int64_t rows, int64_t h, int64_t x_row_stride, cudaStream_t stream) {
    const int threads = 256;
    int blocks = 1;  // TODO 2: enough blocks to cover rows*h outputs once (round up), in [1, 2^31 - 1].
    geglu_kernel<T><<<blocks, threads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), rows, h,
                                                     x_row_stride);
}

extern "C" int geglu_cuda_forward(const void* x, void* y, int64_t rows, int64_t h, int64_t x_row_stride, int dtype,
                                   cudaStream_t stream) {
    if (rows < 0 || h < 0 || x_row_stride < 2 * h) return GATED_ERR_ARGS;
    if (dtype < 0 || dtype > 2) return GATED_ERR_DTYPE;

    // TODO 3: delete the next line once TODO 1 and TODO 2 are done.
    return GATED_ERR_NOT_IMPLEMENTED;  // <<< DELETE THIS LINE <<<

    if (rows == 0 || h == 0) return GATED_OK;
    switch (dtype) {
        case 0: launch_geglu<float>(x, y, rows, h, x_row_stride, stream); break;
        case 1: launch_geglu<__half>(x, y, rows, h, x_row_stride, stream); break;
        case 2: launch_geglu<__nv_bfloat16>(x, y, rows, h, x_row_stride, stream); break;
    }
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? GATED_OK : (int)err;
}
