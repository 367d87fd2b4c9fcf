// device_memory.h: the CPU layer's "device memory", which host code cannot touch (included by harness.cpp only).
//
// On a GPU, x and y (the pointers the entry point gets) and every __device__ / __constant__ variable live in device
// memory: host code that dereferences x crashes (a segfault), and host code that reads or writes a __device__
// variable reaches a separate host copy (nvcc warns, #20091/#20092), never what a kernel reads or wrote. The layer
// runs everything in one address space, so such host code used to work here: a file doing GLU in its launcher,
// through x and y, beside one empty kernel, earned every CPU point. Now:
//   - every buffer the harness hands the entry point is mmap'd pages of its own, with a guard band before and after
//     it that AddressSanitizer sees as poisoned (so a kernel's access just past a buffer is still reported, as
//     when the buffers were malloc'd), and the __device__ / __constant__ variables are gathered by the link into
//     pages of their own (cudacpu.h's qualifiers, grader/cuda/cudacpu.py's link script);
//   - while the entry point runs, all of them are PROT_NONE, except during a launch of the layer (cudacpu.h's
//     LaunchAccess opens them through `cudacpu::device_access` and closes them again): only kernel code can reach
//     them, as on a GPU; pointer arithmetic on them in host code is fine, a dereference faults;
//   - the fault (SIGSEGV, or SIGBUS on macOS) comes here first: an address in device memory while it is closed
//     prints one line, "cudacpu-host-access <read|write|access> <in0|out0|...|device-variable>+OFFSET of BYTES",
//     which grader/child/cudacpu_binding.py turns into the case's message, and then the fault goes on to the
//     handler that was there before (AddressSanitizer's, whose report gives the student's file and line; without
//     it, the default action). Any other fault goes on to that handler untouched.
// Without mmap (Windows), the buffers are plain malloc'd memory and nothing is protected.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__unix__) || defined(__APPLE__)
#define CUDACPU_PROTECT 1
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__linux__) && defined(__x86_64__)
#include <ucontext.h>
#endif
#endif

// AddressSanitizer's interface, when its runtime is linked (weak: null in a build without it).
extern "C" void __asan_poison_memory_region(void const volatile*, size_t) __attribute__((weak));
extern "C" void __asan_unpoison_memory_region(void const volatile*, size_t) __attribute__((weak));
extern "C" void __asan_describe_address(void*) __attribute__((weak));
// The pages of the __device__ / __constant__ variables, as cudacpu.py's link script lays them out (weak: null when the
// link had no such script, as with clang or off Linux, where those variables stay ordinary host memory).
extern "C" char cudacpu_device_begin[] __attribute__((weak));
extern "C" char cudacpu_device_end[] __attribute__((weak));

namespace cudacpu_device {

struct Region {
    char* base;    // the mapping: guard band, buffer, guard band
    size_t len;
    char* buf;     // what the entry point gets
    size_t bytes;  // its size (at least one byte: an empty buffer is still an allocation of its own)
    char label[8];  // "in0", "out0", ...: the harness's names, which the binding turns into the spec's
};
constexpr int kMaxRegions = 128;  // inputs once, outputs once per launch order: 16 + 16 * 3 at most
inline Region regions[kMaxRegions];
inline int count = 0;
inline bool guarded = false;  // the entry point is running: device memory is closed to host code...
inline bool launching = false;  // ...except while one of its launches runs
inline size_t page = 4096;

#ifdef CUDACPU_PROTECT
inline struct sigaction previous[2];  // SIGSEGV's and SIGBUS's handlers before ours (AddressSanitizer's)

inline bool set_protection(int prot) {
    for (int i = 0; i < count; ++i)
        if (mprotect(regions[i].base, regions[i].len, prot) != 0) return false;
    if (cudacpu_device_begin && cudacpu_device_end > cudacpu_device_begin &&
        (reinterpret_cast<uintptr_t>(cudacpu_device_begin) % page) == 0)
        return mprotect(cudacpu_device_begin, (size_t)(cudacpu_device_end - cudacpu_device_begin), prot) == 0;
    return true;
}

// cudacpu.h's launch calls this (through cudacpu::device_access) as a launch begins (true) and ends (false).
inline void access(bool open) {
    launching = open;
    if (guarded && !set_protection(open ? PROT_READ | PROT_WRITE : PROT_NONE)) {
        static const char msg[] = "cudacpu: mprotect of device memory failed\n";
        (void)!write(2, msg, sizeof msg - 1);
        _exit(3);
    }
}

// Async-signal-safe formatting: the handler runs in a process whose host code just faulted.
inline char* put(char* p, const char* s) {
    while (*s) *p++ = *s++;
    return p;
}
inline char* put_num(char* p, long long v) {
    if (v < 0) {
        *p++ = '-';
        v = -v;
    }
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < 24);
    while (n) *p++ = tmp[--n];
    return p;
}

inline void on_fault(int sig, siginfo_t* info, void* context) {
    const int which = sig == SIGSEGV ? 0 : 1;
    char* a = static_cast<char*>(info->si_addr);
    const Region* hit = nullptr;
    for (int i = 0; i < count && !hit; ++i)
        if (a >= regions[i].base && a < regions[i].base + regions[i].len) hit = &regions[i];
    const bool variable = !hit && cudacpu_device_begin && a >= cudacpu_device_begin && a < cudacpu_device_end;
    if (guarded && !launching && (hit || variable)) {
        const char* how = "access";
#if defined(__linux__) && defined(__x86_64__)
        // The page fault's error code: bit 1 is set for a write.
        how = (static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2) ? "write" : "read";
#else
        (void)context;
#endif
        char line[160];
        char* p = put(put(put(line, "cudacpu-host-access "), how), " ");
        if (hit) {
            p = put_num(put(put(p, hit->label), "+"), (long long)(a - hit->buf));
            p = put_num(put(p, " of "), (long long)hit->bytes);
        } else {
            p = put_num(put(p, "device-variable+"), (long long)(a - cudacpu_device_begin));
        }
        *p++ = '\n';
        (void)!write(2, line, (size_t)(p - line));
        // AddressSanitizer names the variable (its name and where it is defined): the layer's build registers
        // the device variables' sections with it (grader/cuda/cudacpu.py, -fsanitize-sections).
        // It reads the variable's bytes (to show a string's text): readable for that moment only.
        const size_t span = (size_t)(cudacpu_device_end - cudacpu_device_begin);
        if (variable && __asan_describe_address && mprotect(cudacpu_device_begin, span, PROT_READ) == 0) {
            __asan_describe_address(a);
            mprotect(cudacpu_device_begin, span, PROT_NONE);
        }
    }
    // Whoever was there before takes the fault: this returns, the access runs again and faults again, now into
    // AddressSanitizer's handler (its report: the stack, with the student's file and line) or the default action.
    sigaction(sig, &previous[which], nullptr);
}

inline void install() {
    const long ps = sysconf(_SC_PAGESIZE);
    if (ps > 0) page = (size_t)ps;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;  // AddressSanitizer's alternate stack, if it set one up
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous[0]);
    sigaction(SIGBUS, &sa, &previous[1]);
}

// A buffer of `bytes` (at least 1) at the start of pages of its own, with a poisoned guard band of at least a page
// before and after it; null when it cannot be mapped.
inline char* alloc(size_t bytes, const char* kind, int index) {
    if (count == kMaxRegions) return nullptr;
    bytes = bytes ? bytes : 1;
    if (bytes > SIZE_MAX / 2) return nullptr;
    const size_t body = (bytes + page - 1) / page * page;
    const size_t len = page + body + page;
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    Region& r = regions[count];
    r.base = static_cast<char*>(m);
    r.len = len;
    r.buf = r.base + page;
    r.bytes = bytes;
    char* p = put(r.label, kind);
    *put_num(p, index) = '\0';
    if (__asan_poison_memory_region) {
        __asan_poison_memory_region(r.base, page);
        __asan_poison_memory_region(r.buf + bytes, len - page - bytes);
    }
    ++count;
    return r.buf;
}
#else
inline void access(bool) {}
inline void install() {}
inline char* alloc(size_t bytes, const char*, int) { return static_cast<char*>(malloc(bytes ? bytes : 1)); }
inline bool set_protection(int) { return true; }
#endif

// The entry point is about to run: its host code may not touch device memory (launches open it again).
inline bool guard() {
#ifdef CUDACPU_PROTECT
    guarded = true;
    launching = false;
    return set_protection(PROT_NONE);
#else
    return true;
#endif
}

// The entry point returned: the harness reads the outputs back.
inline bool unguard() {
#ifdef CUDACPU_PROTECT
    guarded = false;
    return set_protection(PROT_READ | PROT_WRITE);
#else
    return true;
#endif
}

}  // namespace cudacpu_device
