// How many bytes this process's CPU tensors hold: live, and the most at once
// since a mark. It is what splits an iteration's memory into parameters,
// gradients, optimizer state and activations (the memory/* metrics), and
// what an activation estimate is checked against: resident memory (RSS)
// also counts freed blocks the heap keeps, libraries and buffers that are
// not tensors, so it cannot tell one part from another.
//
// LibTorch allocates every CPU tensor through its CPU allocator; counting
// wraps that allocator (c10::SetCPUAllocator), so a tensor made before the
// wrap (or by `from_blob`, or on a GPU) is not counted. Each count is one
// atomic addition per allocation and per free.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace rh::lifecycle {

// Wraps LibTorch's CPU allocator, once per process; later calls do nothing.
// Returns false (and counts nothing) when the allocator in place is not one
// whose blocks can be wrapped (not LibTorch's default: a user's own).
bool count_cpu_tensor_memory();
bool counting_cpu_tensor_memory();

// Bytes held by counted CPU tensors now.
int64_t cpu_tensor_bytes();
// The most held at once since the last mark_cpu_tensor_peak() (or the wrap).
int64_t cpu_tensor_peak_bytes();
// Starts a new peak at the bytes held now.
void mark_cpu_tensor_peak();

// Bytes held by tensors on `device` now: the counted CPU tensors, or the
// CUDA caching allocator's allocated bytes; -1 when not known (CPU tensors
// not counted, or another device).
int64_t tensor_bytes(c10::Device device);

}  // namespace rh::lifecycle
