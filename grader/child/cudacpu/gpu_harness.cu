// gpu_harness.cu: the compute-sanitizer pass's executable (grader/correctness/sanitizer.py builds it with nvcc beside the
// student's file; grader/child/cudacpu_binding.py runs it under compute-sanitizer once per call). The same stdin /
// stdout protocol as harness.cpp (protocol.h: any number of inputs and outputs, the entry's signature from the spec),
// with every buffer in device memory allocated with cudaMalloc at exactly its size, so memcheck reports an access
// one element past any of them. The launch order is the GPU's own: argv is ignored, and one run is made.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "protocol.h"

using cudacpu_protocol::Entry;
using cudacpu_protocol::N_BUF;
using cudacpu_protocol::N_IN;
using cudacpu_protocol::N_OUT;

extern "C" Entry::type CUDACPU_ENTRY;

int main() {
    // Device printf is flushed to stdout at the sync: it goes to stderr, the reply keeps the pipe.
    FILE* reply_out = fdopen(dup(1), "wb");
    dup2(2, 1);
    cudacpu_protocol::Request r;
    if (!cudacpu_protocol::read_request(stdin, r)) return 3;
    char* host[N_BUF];
    char* dev[N_BUF];
    for (int i = 0; i < N_BUF; ++i) {
        host[i] = static_cast<char*>(malloc(r.bytes[i] ? r.bytes[i] : 1));
        if (i < N_IN && !cudacpu_protocol::read_exact(stdin, host[i], r.bytes[i])) return 3;
        void* d = nullptr;
        if (cudaMalloc(&d, r.bytes[i] ? r.bytes[i] : 1) != cudaSuccess) return 4;
        dev[i] = static_cast<char*>(d);
        if (i < N_IN)
            cudaMemcpy(dev[i], host[i], r.bytes[i], cudaMemcpyHostToDevice);
        else
            cudaMemset(dev[i], 0xff, r.bytes[i] ? r.bytes[i] : 1);  // the poison
    }
    int64_t reply[cudacpu_protocol::REPLY] = {0, 0, -1, -1, -1, -1};  // launches: not counted here (the kernel check)
    reply[1] = Entry::call(CUDACPU_ENTRY, dev, dev + N_IN, r.scalars, r.dtype);
    const cudaError_t sync = cudaDeviceSynchronize();
    if (reply[1] == 0 && sync != cudaSuccess) reply[1] = (int64_t)sync;
    for (int i = 0; i < N_BUF; ++i) cudaMemcpy(host[i], dev[i], r.bytes[i], cudaMemcpyDeviceToHost);
    fwrite(reply, sizeof reply, 1, reply_out);
    for (int j = N_IN; j < N_BUF; ++j) fwrite(host[j], 1, r.bytes[j], reply_out);
    for (int i = 0; i < N_IN; ++i) fwrite(host[i], 1, r.bytes[i], reply_out);
    fflush(reply_out);
    return 0;
}
