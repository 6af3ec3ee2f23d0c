// Element-wise reductions of the CPU backend (gloo): out[i] = a[i] (op) b[i].
// Compiled with -O3 in their own translation unit so the loops vectorise.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>

#include "comm/Communicator.hpp"

namespace rh::comm::detail {

// `out` may equal `a` or `b`; the ranges must not partially overlap.
using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t n);

// The function reducing `dtype` with `op` (Avg reduces as Sum: divide after).
// Throws HostError(INVALID_ARGUMENT) for an unsupported dtype or Avg on integers;
// `what` names the collective in that message.
ReduceFn reduce_function(DLDataType dtype, ReduceOp op, const char* what);

// data[i] /= divisor, for the floating-point dtypes (Avg).
void divide_in_place(void* data, size_t n, DLDataType dtype, int divisor);

}  // namespace rh::comm::detail
