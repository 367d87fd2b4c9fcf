#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

// Broken: the work is done on the host, in the entry point, through the device pointers x and y, beside one empty
// kernel launch (so that a kernel did run). On a GPU the first host read of x is a segfault. The CPU layer once ran
// it in its one address space and gave it every CPU point; now x and y are closed to host code between launches
// (grader/child/cudacpu/device_memory.h), and every case with an element fails in load(), "host code read device
// memory".
__global__ void empty_kernel() {}

static float load(const void* p, int64_t i, int dtype) {
    if (dtype == 0) return static_cast<const float*>(p)[i];
    if (dtype == 1) return __half2float(static_cast<const __half*>(p)[i]);
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

extern "C" int glu_cuda_forward(const void* x, void* y, int64_t rows, int64_t h, int64_t x_row_stride, int dtype,
                                cudaStream_t stream) {
    if (rows < 0 || h < 0 || x_row_stride < 2 * h) return -3;
    if (dtype < 0 || dtype > 2) return -1;
    empty_kernel<<<1, 1, 0, stream>>>();
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < h; ++c) {
            const float a = load(x, r * x_row_stride + c, dtype);
            const float b = load(x, r * x_row_stride + h + c, dtype);
            const float v = a / (1.0f + expf(-b));
            if (dtype == 0) static_cast<float*>(y)[r * h + c] = v;
            else if (dtype == 1) static_cast<__half*>(y)[r * h + c] = __float2half_rn(v);
            else static_cast<__nv_bfloat16*>(y)[r * h + c] = __float2bfloat16_rn(v);
        }
    return (int)cudaGetLastError();
}
