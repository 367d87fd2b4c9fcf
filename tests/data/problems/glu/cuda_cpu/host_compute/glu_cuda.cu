#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

// Broken: the work is done on the host, in the entry point, with no kernel at all. On the CPU layer x and y are
// host memory, so the values would be right there; on a GPU this dereferences device pointers on the host.
extern "C" int glu_cuda_forward(const void* x, void* y, int64_t rows, int64_t h, int64_t x_row_stride, int dtype,
                                cudaStream_t stream) {
    if (rows < 0 || h < 0 || x_row_stride < 2 * h) return -3;
    if (dtype != 0) return 0;  // float16 / bfloat16: nothing computed at all
    const float* xf = static_cast<const float*>(x);
    float* yf = static_cast<float*>(y);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < h; ++c) {
            const float a = xf[r * x_row_stride + c], b = xf[r * x_row_stride + h + c];
            yf[r * h + c] = a / (1.0f + expf(-b));
        }
    return 0;
}
