// The lecture's naive GeLU CUDA kernel (CS336 lecture 6, gelu.cu), kept as it was taught: one element per thread,
// 1024 threads per block, tanh from libm and double-precision literals (0.5, 1.0, ... promote the expression to
// fp64). A staff-only row of `nox -s bench -- --problem gelu --staff` (spec.yaml: naive_cuda), so the lecture's
// table is reproduced; the only additions are what the grader's ABI needs: padded rows (one division per element,
// none for packed rows) and the fp16/bf16 dtypes (converted to float on load).

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

template <typename T>
__global__ void gelu_kernel(const T* in, T* out, int64_t num_elements, int64_t cols, int64_t stride) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < num_elements) {
        // Packed rows (every timed case) read in[i], as the lecture's kernel does; the 64-bit division that a padded
        // row needs is taken only then (it costs as much as the rest of the kernel).
        const float x = to_float(in[stride == cols ? i : (i / cols) * stride + i % cols]);
        out[i] = from_float<T>(0.5 * x * (1.0 + tanh(0.79788456 * (x + 0.044715 * x * x * x))));
    }
}

extern "C" int gelu_cuda_forward(const void* x, void* y, int64_t rows, int64_t cols, int64_t x_row_stride,
                                 int dtype, cudaStream_t stream) {
    if (rows < 0 || cols < 0 || x_row_stride < cols) return -3;
    if (dtype < 0 || dtype > 2) return -1;
    const int64_t n = rows * cols;
    if (n == 0) return 0;
    const int threads = 1024;
    const int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 2147483647) return -3;
    switch (dtype) {
        case 0: gelu_kernel<<<blocks, threads, 0, stream>>>((const float*)x, (float*)y, n, cols, x_row_stride); break;
        case 1: gelu_kernel<<<blocks, threads, 0, stream>>>((const __half*)x, (__half*)y, n, cols, x_row_stride); break;
        default:
            gelu_kernel<<<blocks, threads, 0, stream>>>((const __nv_bfloat16*)x, (__nv_bfloat16*)y, n, cols, x_row_stride);
    }
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? 0 : (int)err;
}
