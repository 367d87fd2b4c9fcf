// protocol.h: the request both harnesses read (harness.cpp, the CPU layer's; gpu_harness.cu, the compute-sanitizer
// pass's) and the entry point they call, whose signature follows the problem's spec (grader/child/cuda_abi.py):
//
//     int entry(const void* in0, ..., void* out0, ..., int64_t s0, ..., int dtype, cudaStream_t stream)
//
// with CUDACPU_INPUTS input pointers, CUDACPU_OUTPUTS output pointers and CUDACPU_SCALARS int64 shape arguments
// (rows, out_cols, then each input's row stride). The build passes the three counts with -D to the harness's
// translation unit only (the student's file never sees them: grader/cuda/cudacpu.py undefines them before its first line,
// and the sanitizer build compiles the student's file apart).
//
// stdin, all little-endian int64:
//     head[5]    = {MAGIC, inputs, outputs, scalars, dtype}   (the counts must equal the build's: else exit 3)
//     buf[n][2]  = {elements, dtype} for each input, then each output (n = inputs + outputs)
//     scalar[s]  = the entry's int64 arguments, in order
//     then each input's bytes, in order (exactly elements * item size of each).
// dtype: 0 float32, 1 float16, 2 bfloat16 (grader/child/cuda_binding.DTYPE_CODES).
// Included after cudacpu.h (CPU) or cuda_runtime.h (GPU), which give cudaStream_t. Staff code, host only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <utility>

#ifndef CUDACPU_INPUTS
#define CUDACPU_INPUTS 1
#endif
#ifndef CUDACPU_OUTPUTS
#define CUDACPU_OUTPUTS 1
#endif
#ifndef CUDACPU_SCALARS
#define CUDACPU_SCALARS (CUDACPU_INPUTS + 2)
#endif

namespace cudacpu_protocol {

constexpr int64_t MAGIC = 0x31555043'41445543;  // "CUDACPU1" as little-endian bytes
constexpr int N_IN = CUDACPU_INPUTS;
constexpr int N_OUT = CUDACPU_OUTPUTS;
constexpr int N_SCALARS = CUDACPU_SCALARS;
constexpr int N_BUF = N_IN + N_OUT;
static_assert(N_IN >= 1 && N_OUT >= 1 && N_SCALARS >= 0 && N_BUF <= 16, "the spec's signature is out of range");
// No buffer the grader sends is near this (the largest CPU-sized case is a few MB); it bounds size arithmetic.
constexpr int64_t MAX_ELEMS = int64_t(1) << 36;

inline size_t item_size(int64_t dtype) { return dtype == 0 ? 4 : 2; }

struct Request {
    int dtype = 0;
    int64_t elems[N_BUF] = {};
    size_t bytes[N_BUF] = {};
    int64_t scalars[N_SCALARS > 0 ? N_SCALARS : 1] = {};
};

inline bool read_exact(FILE* in, void* p, size_t n) { return n == 0 || fread(p, 1, n, in) == n; }

// The request's header (not the inputs' bytes). False on any mismatch with this build, or a bad count or dtype.
inline bool read_request(FILE* in, Request& r) {
    int64_t head[5];
    if (!read_exact(in, head, sizeof head)) return false;
    if (head[0] != MAGIC || head[1] != N_IN || head[2] != N_OUT || head[3] != N_SCALARS) return false;
    if (head[4] < 0 || head[4] > 2) return false;
    r.dtype = (int)head[4];
    for (int i = 0; i < N_BUF; ++i) {
        int64_t b[2];
        if (!read_exact(in, b, sizeof b) || b[0] < 0 || b[0] > MAX_ELEMS || b[1] < 0 || b[1] > 2) return false;
        r.elems[i] = b[0];
        r.bytes[i] = (size_t)b[0] * item_size(b[1]);
    }
    return read_exact(in, r.scalars, sizeof(int64_t) * N_SCALARS);
}

// The entry point's type and a call of it, built from the three counts (pack expansions over index sequences).
template <size_t>
using In = const void*;
template <size_t>
using Out = void*;
template <size_t>
using Scalar = int64_t;
template <class I, class O, class S>
struct Sig;
template <size_t... I, size_t... O, size_t... S>
struct Sig<std::index_sequence<I...>, std::index_sequence<O...>, std::index_sequence<S...>> {
    using type = int(In<I>..., Out<O>..., Scalar<S>..., int, cudaStream_t);
    static int call(type* f, char* const* ins, char* const* outs, const int64_t* scalars, int dtype) {
        return f(ins[I]..., outs[O]..., scalars[S]..., dtype, nullptr);
    }
};
using Entry = Sig<std::make_index_sequence<N_IN>, std::make_index_sequence<N_OUT>, std::make_index_sequence<N_SCALARS>>;

// The reply's fixed part: {status, code, first differing element, order index, kernel launches of the first order,
// which output differed}. status 0: ran every order (code: the entry's return value), 1: two orders wrote different
// outputs (a race), 2: the executable has no such entry.
constexpr int REPLY = 6;

}  // namespace cudacpu_protocol
