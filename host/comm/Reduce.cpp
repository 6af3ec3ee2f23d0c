#include "comm/Reduce.hpp"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <type_traits>

#include "comm/CommInternal.hpp"

namespace rh::comm::detail {
namespace {

// Arithmetic type of a stored type: float for the 16-bit floats, the
// unsigned type for signed integers (wrap-around sums without UB).
template <typename T>
struct Compute {
  using type = T;
};
template <>
struct Compute<c10::Half> {
  using type = float;
};
template <>
struct Compute<c10::BFloat16> {
  using type = float;
};

template <typename T>
void sum(void* out_, const void* a_, const void* b_, size_t n) {
  auto* out = static_cast<T*>(out_);
  const auto* a = static_cast<const T*>(a_);
  const auto* b = static_cast<const T*>(b_);
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    for (size_t i = 0; i < n; ++i)
      out[i] = static_cast<T>(static_cast<U>(static_cast<U>(a[i]) + static_cast<U>(b[i])));
  } else {
    using C = typename Compute<T>::type;
    for (size_t i = 0; i < n; ++i)
      out[i] = static_cast<T>(static_cast<C>(a[i]) + static_cast<C>(b[i]));
  }
}

// NaN-propagating for floats (like torch.maximum / minimum).
template <typename T, bool IsMax>
void extremum(void* out_, const void* a_, const void* b_, size_t n) {
  auto* out = static_cast<T*>(out_);
  const auto* a = static_cast<const T*>(a_);
  const auto* b = static_cast<const T*>(b_);
  using C = typename Compute<T>::type;
  for (size_t i = 0; i < n; ++i) {
    C x = static_cast<C>(a[i]);
    C y = static_cast<C>(b[i]);
    bool take_x;
    if constexpr (std::is_floating_point_v<C>)
      take_x = (x != x) || (IsMax ? x > y : x < y);
    else
      take_x = IsMax ? x > y : x < y;
    out[i] = take_x ? a[i] : b[i];
  }
}

template <typename T>
ReduceFn pick(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return &sum<T>;
    case ReduceOp::Max:
      return &extremum<T, true>;
    case ReduceOp::Min:
      return &extremum<T, false>;
  }
  return nullptr;
}

template <typename T>
void divide(void* data_, size_t n, int divisor) {
  auto* data = static_cast<T*>(data_);
  using C = typename Compute<T>::type;
  const C d = static_cast<C>(divisor);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<T>(static_cast<C>(data[i]) / d);
}

}  // namespace

ReduceFn reduce_function(DLDataType t, ReduceOp op, const char* what) {
  element_size(t, what);  // throws for unsupported dtypes
  if (op == ReduceOp::Avg && is_integer(t))
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                          std::string(what) + ": op avg is not defined for integer dtype " +
                              dtype_name(t) + " (use sum and divide)");
  if (is_bool(t) && op == ReduceOp::Sum)
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                          std::string(what) +
                              ": op sum is not defined for bool (use max for "
                              "'any', min for 'all')");
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 16) return pick<c10::Half>(op);
      if (t.bits == 32) return pick<float>(op);
      return pick<double>(op);
    case kDLBfloat:
      return pick<c10::BFloat16>(op);
    case kDLInt:
      if (t.bits == 8) return pick<int8_t>(op);
      if (t.bits == 16) return pick<int16_t>(op);
      if (t.bits == 32) return pick<int32_t>(op);
      return pick<int64_t>(op);
    default:  // uint8, bool
      return pick<uint8_t>(op);
  }
}

void divide_in_place(void* data, size_t n, DLDataType t, int divisor) {
  if (t.code == kDLBfloat) return divide<c10::BFloat16>(data, n, divisor);
  if (t.code != kDLFloat) return;
  if (t.bits == 16) return divide<c10::Half>(data, n, divisor);
  if (t.bits == 32) return divide<float>(data, n, divisor);
  return divide<double>(data, n, divisor);
}

}  // namespace rh::comm::detail
