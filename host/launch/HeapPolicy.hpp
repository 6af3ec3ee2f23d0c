// How this process's heap treats large blocks (glibc malloc).
//
// By default glibc serves every block above its mmap threshold (at most
// 32 MiB, adapting upward) with a fresh mmap and returns it to the kernel
// on free, and it trims the heap's free top likewise. A training step
// allocates and frees tensors of tens of MiB every iteration, so each one
// comes back as pages the kernel must fault in and zero again: in the
// 437 MB checkpoint benchmark's MLP, page faults under OpenBLAS's memset
// were 13% of all samples, and that churn of fresh pages also halved the
// speed of the checkpoint writes that shared the machine with it. Keeping
// large blocks in the heap (as PyTorch's caching allocators and jemalloc
// do) makes the freed memory the next iteration's.
#pragma once

#include <string>

namespace rh::launch {

// The mmap and trim thresholds this process asks of glibc: blocks up to
// 1 GiB come from the heap, and up to 1 GiB of free heap top is kept.
inline constexpr long kHeapKeepBytes = 1L << 30;

// Whether the runner sets the thresholds: not when the user set any glibc
// malloc tunable (GLIBC_TUNABLES=glibc.malloc.*), which then wins; to keep
// glibc's defaults, one that changes nothing: glibc.malloc.perturb=0.
bool heap_policy_wanted(const char* glibc_tunables);

// Applies the thresholds when wanted: once, after LibTorch has initialised
// (cli/main.cpp says why) and before anything large is allocated.
// Returns what it did, for the debug log: "" when it left glibc alone.
std::string apply_heap_policy();

}  // namespace rh::launch
