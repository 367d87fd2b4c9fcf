// harness.cpp: the executable the CUDA-on-CPU layer links a student's kernel file into (grader/cuda/cudacpu.py builds
// it, grader/child/cudacpu_binding.py runs it once per call). Why an executable and not a library in the worker:
// AddressSanitizer must be the first library of its process, which a Python with torch loaded is not; here it is,
// every buffer (each input, each output) is its own allocation of exactly its size (a read one element past an
// input or a store one past an output is reported), and a crash or a hang costs this process, not the worker.
//
// stdin:  the request of protocol.h (the counts and sizes of every buffer, the entry's shape arguments), then the
//         inputs' bytes. The entry's signature follows the spec's inputs (protocol.h, grader/child/cuda_abi.py).
// argv:   the launch orders to run, each "0" (forward), "1" (reverse) or "2:SEED" (a permutation).
// stdout: int64 reply[6] (protocol.h: status, code, first differing element, order index, kernel launches of the
//         first order, which output differed), then each output's bytes (the first order's), then each input's
//         bytes as the kernel left them.
// stderr: "cudacpu-buffers in0=ADDR+BYTES ... out0=ADDR+BYTES ..." before each call (so that a sanitizer report's
//         address can be named by the binding, which knows the spec's names), then whatever the sanitizers report,
//         and "cudacpu-host-access ..." where host code touched device memory (device_memory.h).
// Every buffer is device memory (device_memory.h): the entry point's host code cannot read or write it, its kernels
// can, as on a GPU.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <unistd.h>

#include "cudacpu.h"
#include "device_memory.h"
#include "protocol.h"

using cudacpu_protocol::Entry;
using cudacpu_protocol::N_BUF;
using cudacpu_protocol::N_IN;
using cudacpu_protocol::N_OUT;

extern "C" Entry::type CUDACPU_ENTRY __attribute__((weak));

static FILE* reply_out = nullptr;  // the reply's own stream: the kernel's printf goes to stderr (see main)
static void write_all(const void* p, size_t n) { fwrite(p, 1, n, reply_out); }

// Exact sizes (at least one byte, so that an empty buffer is still a distinct allocation ASan watches), each in
// pages of its own between guard bands ASan watches (device_memory.h). Exit 4 when one cannot be mapped.
static char* alloc(size_t n, const char* kind, int index) {
    char* p = cudacpu_device::alloc(n, kind, index);
    if (!p) exit(4);
    return p;
}

int main(int argc, char** argv) {
    // A kernel's (or launcher's) printf must not corrupt the reply: stdout becomes stderr, the reply keeps the pipe.
    reply_out = fdopen(dup(1), "wb");
    dup2(2, 1);
    cudacpu_device::install();
    cudacpu::device_access = cudacpu_device::access;
    cudacpu_protocol::Request r;
    if (!cudacpu_protocol::read_request(stdin, r)) return 3;
    char* ins[N_IN];
    for (int i = 0; i < N_IN; ++i) {
        ins[i] = alloc(r.bytes[i], "in", i);
        if (!cudacpu_protocol::read_exact(stdin, ins[i], r.bytes[i])) return 3;
    }
    const size_t* out_bytes = r.bytes + N_IN;
    std::vector<std::vector<char*>> runs;  // each order's outputs
    int64_t reply[cudacpu_protocol::REPLY] = {0, 0, -1, -1, 0, -1};
    if (!CUDACPU_ENTRY) {
        reply[0] = 2;
        write_all(reply, sizeof reply);
        return 0;
    }
    for (int k = 1; k < argc; ++k) {
        std::vector<char*> outs(N_OUT);
        for (int j = 0; j < N_OUT; ++j) {
            outs[j] = alloc(out_bytes[j], "out", j);
            memset(outs[j], 0xff, out_bytes[j] ? out_bytes[j] : 1);  // the poison: all-ones bytes, a NaN no arithmetic produces
        }
        fprintf(stderr, "cudacpu-buffers");
        for (int i = 0; i < N_BUF; ++i) {
            const bool in = i < N_IN;
            fprintf(stderr, " %s%d=%p+%zu", in ? "in" : "out", in ? i : i - N_IN, (void*)(in ? ins[i] : outs[i - N_IN]),
                    r.bytes[i]);
        }
        fprintf(stderr, "\n");
        fflush(stderr);
        cudacpu::order = atoi(argv[k]);
        const char* colon = strchr(argv[k], ':');
        cudacpu::seed = colon ? strtoull(colon + 1, nullptr, 10) : 1;
        cudacpu::last_error = cudaSuccess;
        cudacpu::launches = 0;
        // Host code of the entry point cannot touch device memory from here; its launches open it to their kernels.
        if (!cudacpu_device::guard()) return 5;
        const int code = Entry::call(CUDACPU_ENTRY, ins, outs.data(), r.scalars, r.dtype);
        if (!cudacpu_device::unguard()) return 5;
        runs.push_back(outs);
        if (k == 1) reply[4] = cudacpu::launches;
        if (code != 0) {
            reply[1] = code;
            break;
        }
        bool differs = false;
        for (int j = 0; k > 1 && j < N_OUT && !differs; ++j) {
            if (memcmp(runs[0][j], outs[j], out_bytes[j]) == 0) continue;
            const size_t item = out_bytes[j] / (size_t)r.elems[N_IN + j];
            size_t e = 0;
            while (memcmp(runs[0][j] + e * item, outs[j] + e * item, item) == 0) ++e;
            reply[0] = 1;
            reply[2] = (int64_t)e;
            reply[3] = k - 1;
            reply[5] = j;
            differs = true;
        }
        if (differs) break;
    }
    write_all(reply, sizeof reply);
    for (int j = 0; j < N_OUT && !runs.empty(); ++j) write_all(runs[0][j], out_bytes[j]);
    for (int i = 0; i < N_IN; ++i) write_all(ins[i], r.bytes[i]);
    fflush(reply_out);
    return 0;
}
