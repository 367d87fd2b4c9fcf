#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

// Broken: the launcher sets a __device__ variable from host code. On a GPU the host writes its own copy of it (nvcc
// warns, #20092-D), so the kernel reads 0 and every output is 0: wrong values. The CPU layer once ran it in its one
// address space, where the kernel read 1 and every case passed; now the variable is closed to host code between
// launches (grader/child/cudacpu/device_memory.h), and every case with an element fails at line 26, "host code wrote
// the device variable `g_scale`". The empty cases return before the write: they pass on both machines.
__device__ float g_scale;

template <typename T>
__global__ void glu_kernel(const T* x, T* y, int64_t rows, int64_t h, int64_t stride) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * h) return;
    const int64_t r = i / h, c = i % h;
    const float a = (float)x[r * stride + c], b = (float)x[r * stride + h + c];
    y[i] = (T)(g_scale * a / (1.0f + expf(-b)));
}

extern "C" int glu_cuda_forward(const void* x, void* y, int64_t rows, int64_t h, int64_t x_row_stride, int dtype,
                                cudaStream_t stream) {
    if (rows < 0 || h < 0 || x_row_stride < 2 * h) return -3;
    if (rows == 0 || h == 0) return 0;
    g_scale = 1.0f;
    const int64_t n = rows * h;
    const int threads = 256;
    const unsigned blocks = (unsigned)((n + threads - 1) / threads);
    if (dtype == 0)
        glu_kernel<float><<<blocks, threads, 0, stream>>>((const float*)x, (float*)y, rows, h, x_row_stride);
    else if (dtype == 1)
        glu_kernel<__half><<<blocks, threads, 0, stream>>>((const __half*)x, (__half*)y, rows, h, x_row_stride);
    else
        glu_kernel<__nv_bfloat16><<<blocks, threads, 0, stream>>>((const __nv_bfloat16*)x, (__nv_bfloat16*)y, rows, h,
                                                                   x_row_stride);
    return (int)cudaGetLastError();
}
