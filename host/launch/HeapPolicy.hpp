// How this process's heap treats large blocks (glibc malloc): the job's
// env_cfg.heap.
//
// glibc's default serves a block above its mmap threshold with a mapping of
// its own, returned to the kernel on free, but raises the threshold to the
// size of each such block freed (up to 32 MiB): a training step's tensors
// soon all come from the heap, where a freed block stays resident and is
// reused only by an allocation that fits in it. The heap then holds the
// step's peak plus the holes between long-lived blocks (the optimizer's
// state made at the first step, gradients, a strategy's buffers) that the
// next step's tensors do not fit: on issue 39's gpt (25.5 M parameters,
// batch 8 x 128 tokens, one process) 917 MiB resident for 595 MiB of
// tensors at most, where mapping every block of 1 MiB or more gave 772.
//
//   release (default): blocks of 1 MiB or more are mappings of their own,
//     returned on free; resident memory follows what the tensors hold. Each
//     step faults its large tensors' pages in again: 0-6% of that gpt's step
//     time on the development VM (docs/build.md, "The heap").
//   keep: blocks up to 1 GiB come from the heap and up to 1 GiB of its free
//     top is kept (as PyTorch's caching allocators and jemalloc keep freed
//     memory): no page faults for them (the checkpoint benchmark's MLP, 54.6
//     M parameters, stepped in 1.21 s against 1.92-2.27 s under glibc's
//     default), at the cost of the holes.
#pragma once

#include <string>

namespace rh::launch {

enum class HeapMode { kRelease, kKeep };

// keep: the mmap and trim thresholds asked of glibc.
inline constexpr long kHeapKeepBytes = 1L << 30;
// release: the mmap threshold (a block this large or larger is mapped), and
// the free heap top kept (small blocks only now).
inline constexpr long kHeapReleaseFromBytes = 1L << 20;
inline constexpr long kHeapReleaseTrimBytes = 32L << 20;

// Whether the runner sets the thresholds: not when the user set any glibc
// malloc tunable (GLIBC_TUNABLES=glibc.malloc.*), which then wins; to keep
// glibc's defaults, one that changes nothing: glibc.malloc.perturb=0.
bool heap_policy_wanted(const char* glibc_tunables);

// env_cfg.heap's value ("release", "keep"; validated by the job schema).
HeapMode heap_mode(const std::string& value);

// Applies the thresholds when wanted: once, after LibTorch has initialised
// (cli/main.cpp says why) and before anything large is allocated.
// Returns what it did, for the debug log: "" when it left glibc alone.
std::string apply_heap_policy(HeapMode mode = HeapMode::kRelease);

}  // namespace rh::launch
