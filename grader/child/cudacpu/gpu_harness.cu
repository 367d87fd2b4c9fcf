// gpu_harness.cu: the compute-sanitizer pass's executable (grader/cudacpu.py builds it with nvcc beside the
// student's file; grader/child/cudacpu_binding.py runs it under compute-sanitizer once per call). The same stdin /
// stdout protocol as harness.cpp, with x and y in device memory allocated with cudaMalloc at exactly their sizes,
// so memcheck reports an access one element past either. The launch order is the GPU's own: argv is ignored.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

extern "C" int CUDACPU_ENTRY(const void*, void*, int64_t, int64_t, int64_t, int, cudaStream_t);

static bool read_all(void* p, size_t n) { return fread(p, 1, n, stdin) == n; }

int main() {
    // Device printf is flushed to stdout at the sync: it goes to stderr, the reply keeps the pipe.
    FILE* reply_out = fdopen(dup(1), "wb");
    dup2(2, 1);
    int64_t h[6];
    if (!read_all(h, sizeof h) || h[0] < 0 || h[1] < 0) return 3;
    const size_t item = h[5] == 0 ? 4 : 2;
    const size_t xb = (size_t)h[0] * item, yb = (size_t)h[1] * item;
    char* hx = static_cast<char*>(malloc(xb + yb + 1));
    if (!read_all(hx, xb)) return 3;
    void *x = nullptr, *y = nullptr;
    if (cudaMalloc(&x, xb ? xb : 1) != cudaSuccess || cudaMalloc(&y, yb ? yb : 1) != cudaSuccess) return 4;
    cudaMemcpy(x, hx, xb, cudaMemcpyHostToDevice);
    cudaMemset(y, 0xff, yb ? yb : 1);  // the poison
    int64_t reply[5] = {0, 0, -1, -1, -1};  // launches: not counted here (the GPU's kernel check does that)
    reply[1] = CUDACPU_ENTRY(x, y, h[2], h[3], h[4], (int)h[5], nullptr);
    const cudaError_t sync = cudaDeviceSynchronize();
    if (reply[1] == 0 && sync != cudaSuccess) reply[1] = (int64_t)sync;
    char* hy = hx + xb;
    cudaMemcpy(hy, y, yb, cudaMemcpyDeviceToHost);
    cudaMemcpy(hx, x, xb, cudaMemcpyDeviceToHost);
    fwrite(reply, sizeof reply, 1, reply_out);
    fwrite(hy, 1, yb, reply_out);
    fwrite(hx, 1, xb, reply_out);
    fflush(reply_out);
    return 0;
}
