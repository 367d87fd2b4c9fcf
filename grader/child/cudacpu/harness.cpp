// harness.cpp: the executable the CUDA-on-CPU layer links a student's kernel file into (grader/cudacpu.py builds
// it, grader/child/cudacpu_binding.py runs it once per call). Why an executable and not a library in the worker:
// AddressSanitizer must be the first library of its process, which a Python with torch loaded is not; here it is,
// every buffer is its own allocation of exactly its size (a read one element past x or a store one past y is
// reported), and a crash or a hang costs this process, not the worker.
//
// stdin:  int64 header[6] = {x_elems, y_elems, rows, out_cols, x_row_stride, dtype}, then x's bytes.
// argv:   the launch orders to run, each "0" (forward), "1" (reverse) or "2:SEED" (a permutation).
// stdout: int64 reply[5] = {status, code, first differing element, order index, kernel launches of the first
//         order}, then y's bytes (the first
//         order's), then x's bytes as the kernel left them. status 0: ran every order (code: the entry's return
//         value), 1: two orders wrote different outputs (a race), 2: the library has no such entry.
// stderr: "cudacpu-buffers x=ADDR+BYTES y=ADDR+BYTES" before the calls (so that a sanitizer report's address can be
//         named), then whatever the sanitizers report.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <unistd.h>

#include "cuda_cpu.h"

extern "C" int CUDACPU_ENTRY(const void*, void*, int64_t, int64_t, int64_t, int, cudaStream_t) __attribute__((weak));

static bool read_all(void* p, size_t n) { return fread(p, 1, n, stdin) == n; }
static FILE* reply_out = nullptr;  // the reply's own stream: the kernel's printf goes to stderr (see main)
static void write_all(const void* p, size_t n) { fwrite(p, 1, n, reply_out); }

int main(int argc, char** argv) {
    // A kernel's (or launcher's) printf must not corrupt the reply: stdout becomes stderr, the reply keeps the pipe.
    reply_out = fdopen(dup(1), "wb");
    dup2(2, 1);
    int64_t h[6];
    if (!read_all(h, sizeof h) || h[0] < 0 || h[1] < 0) return 3;
    const size_t item = h[5] == 0 ? 4 : 2;
    const size_t xb = (size_t)h[0] * item, yb = (size_t)h[1] * item;
    // Exact sizes (at least one byte, so that an empty buffer is still a distinct allocation ASan watches).
    char* x = static_cast<char*>(malloc(xb ? xb : 1));
    if (!read_all(x, xb)) return 3;
    std::vector<char*> ys;
    int64_t reply[5] = {0, 0, -1, -1, 0};
    if (!CUDACPU_ENTRY) {
        reply[0] = 2;
        write_all(reply, sizeof reply);
        return 0;
    }
    for (int k = 1; k < argc; ++k) {
        char* y = static_cast<char*>(malloc(yb ? yb : 1));
        memset(y, 0xff, yb ? yb : 1);  // the poison: all-ones bytes, a NaN no arithmetic produces
        fprintf(stderr, "cudacpu-buffers x=%p+%zu y=%p+%zu\n", (void*)x, xb, (void*)y, yb);
        fflush(stderr);
        cudacpu::order = atoi(argv[k]);
        const char* colon = strchr(argv[k], ':');
        cudacpu::seed = colon ? strtoull(colon + 1, nullptr, 10) : 1;
        cudacpu::last_error = cudaSuccess;
        cudacpu::launches = 0;
        const int code = CUDACPU_ENTRY(x, y, h[2], h[3], h[4], (int)h[5], nullptr);
        ys.push_back(y);
        if (k == 1) reply[4] = cudacpu::launches;
        if (code != 0) {
            reply[1] = code;
            break;
        }
        if (k > 1 && memcmp(ys[0], y, yb) != 0) {
            size_t i = 0;
            while (memcmp(ys[0] + i * item, y + i * item, item) == 0) ++i;
            reply[0] = 1;
            reply[2] = (int64_t)i;
            reply[3] = k - 1;
            break;
        }
    }
    write_all(reply, sizeof reply);
    if (!ys.empty()) write_all(ys[0], yb);
    write_all(x, xb);
    fflush(reply_out);
    return 0;
}
