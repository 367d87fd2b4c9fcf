// Part 2: GLU as a CUDA kernel.  Read assignment/README.md, section "Part 2: the CUDA kernel", first.
//
// What to compute. The input x has `rows` rows of 2h numbers each. The left half of a row is a, the right
// half is b, and the output row is
//
//     y[r, c] = a[r, c] * sigmoid(b[r, c])       for c in 0 .. h-1,   sigmoid(t) = 1 / (1 + e^(-t))
//
// which is what torch.nn.functional.glu(x, dim=-1) returns.
//
// How the grader calls you. The grader builds this file with nvcc into a shared library and calls the
// function glu_cuda_forward (at the bottom) through ctypes, from Python. Keep its name, its extern "C" and
// its signature exactly as they are. Its return value is one of these codes:
//
//     GLU_OK                   0   success
//     GLU_ERR_DTYPE           -1   dtype is not 0, 1 or 2
//     GLU_ERR_NOT_IMPLEMENTED -2   this stub, until you remove the marked line in glu_cuda_forward
//     GLU_ERR_ARGS            -3   bad sizes or strides
//     > 0                          a cudaError_t from the kernel launch
//
// Already done for you: argument checks, the dtype dispatch (float32 / float16 / bfloat16) and the launch
// call. Your job: the kernel body (TODO 1), the grid size (TODO 2), then delete the marked line (TODO 3).

#include <cuda_runtime.h>
#include <cuda_fp16.h>   // __half
#include <cuda_bf16.h>   // __nv_bfloat16
#include <stdint.h>      // int64_t

#define GLU_OK 0
#define GLU_ERR_DTYPE (-1)
#define GLU_ERR_NOT_IMPLEMENTED (-2)
#define GLU_ERR_ARGS (-3)

// ---------------------------------------------------------------------------------------------------------
// Helpers (given): do the arithmetic in float whatever the storage type is. Half and bfloat16 have few
// mantissa bits; computing in them would round after every operation. Load -> to_float -> compute in float
// -> from_float<T> on the store rounds exactly once. Write float literals as 1.0f, not 1.0: a bare 1.0 is a
// double and drags the whole expression into (slow) double precision.
// ---------------------------------------------------------------------------------------------------------
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// ---------------------------------------------------------------------------------------------------------
// TODO 1: the kernel.
//
//   x            rows x (2h) input; row r starts at x + r * x_row_stride (x_row_stride >= 2h: rows may be
//                padded, so never assume a row starts at r * 2h). Within a row, elements are contiguous.
//   y            rows x h output, contiguous: element (r, c) is y[r * h + c].
//
// Suggested plan, one output element per thread step:
//   * Number the outputs i = 0 .. rows*h - 1 (row-major, like y's memory). Consecutive threads then touch
//     consecutive addresses, so a warp's 32 loads/stores merge into a few wide memory transactions.
//   * Use int64_t for i and for every offset. rows*h can exceed 2^31 (int overflows at ~2.1 billion
//     elements), and blockIdx.x * blockDim.x is computed in 32-bit unsigned arithmetic unless you cast one
//     side first: (int64_t)blockIdx.x * blockDim.x.
//   * Grid-stride loop: for (i = first; i < n; i += gridDim.x * blockDim.x). The kernel is then correct
//     for ANY grid size (even 1 block), and the launcher can pick the grid for speed, not for coverage.
//   * From i: r = i / h and c = i % h. Then a is x[r * x_row_stride + c] and b is h elements further on,
//     x[r * x_row_stride + h + c]; the result goes to y[i].
//   * sigmoid: 1.0f / (1.0f + __expf(-b)) is fast and safe at the extremes: for b = -inf (or b = -100,
//     where e^100 overflows float to inf) it gives 1/inf = 0, for b = +inf it gives 1/(1+0) = 1.
//     Do not rewrite it as __expf(b) / (1.0f + __expf(b)): that is inf/inf = NaN for large b.
//   * Every output must be written: the grader fills y with NaN before calling you.
//
// `__restrict__` promises the compiler that x and y do not overlap, and `const` that x is only read; that
// lets it use the read-only data path for x.
// ---------------------------------------------------------------------------------------------------------
template <typename T>
__global__ void glu_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t h,
                           int64_t x_row_stride) {
    // TODO 1: your code here. For example:
    //   const int64_t n = rows * h;
    //   for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += ...) {
    //       ... load a and b with to_float, compute in float, store with from_float<T> ...
    //   }
}

// ---------------------------------------------------------------------------------------------------------
// The launcher (given, except for the grid size).
// ---------------------------------------------------------------------------------------------------------
template <typename T>
void launch_glu(const void* x, void* y, int64_t rows, int64_t h, int64_t x_row_stride, cudaStream_t stream) {
    const int threads = 256;  // threads per block: a multiple of the warp size (32); 128-512 all work well

    // TODO 2: choose the number of blocks. With a grid-stride loop 1 block is *correct* but uses one of the
    // GPU's ~100+ streaming multiprocessors. Enough blocks to cover all rows*h outputs once is a good start
    // (round up!); keep it >= 1 and <= 2^31 - 1 (the limit for gridDim.x), and remember rows*h is int64_t.
    int blocks = 1;

    glu_kernel<T><<<blocks, threads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), rows, h,
                                                  x_row_stride);
}

// ---------------------------------------------------------------------------------------------------------
// The entry point the grader calls. dtype: 0 = float32, 1 = float16, 2 = bfloat16. `stream` is the
// PyTorch stream the grader is using; launching on it keeps your kernel ordered with the grader's work.
// ---------------------------------------------------------------------------------------------------------
extern "C" int glu_cuda_forward(const void* x, void* y, int64_t rows, int64_t h, int64_t x_row_stride, int dtype,
                                cudaStream_t stream) {
    if (rows < 0 || h < 0 || x_row_stride < 2 * h) return GLU_ERR_ARGS;
    if (dtype < 0 || dtype > 2) return GLU_ERR_DTYPE;

    // TODO 3: delete the next line once TODO 1 and TODO 2 are done. ////////////////////////////////////////
    return GLU_ERR_NOT_IMPLEMENTED;  // <<< DELETE THIS LINE <<<
    // /////////////////////////////////////////////////////////////////////////////////////////////////////

    if (rows == 0 || h == 0) return GLU_OK;  // nothing to compute; a launch with 0 blocks would be an error

    switch (dtype) {
        case 0: launch_glu<float>(x, y, rows, h, x_row_stride, stream); break;
        case 1: launch_glu<__half>(x, y, rows, h, x_row_stride, stream); break;
        case 2: launch_glu<__nv_bfloat16>(x, y, rows, h, x_row_stride, stream); break;
    }
    // A launch that could not start (bad grid size, GPU architecture not built for, ...) reports here.
    // Errors *inside* the kernel (say, an out-of-bounds read) surface later, at the grader's next sync.
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? GLU_OK : (int)err;
}
