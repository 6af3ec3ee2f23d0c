// Reads the model files (model.safetensors) two conformance jobs left and
// compares them: numerically (equivalence) or byte for byte (exact resume).
// With rh_formats' header reader and POSIX reads: no LibTorch.
#pragma once

#include <filesystem>
#include <string>

namespace rh::cli::conformance {

struct ModelDifference {
  // max over tensors of max|a - ref| / max|ref| (max|a - ref| where the
  // reference tensor is all zeros).
  double max_relative = 0;
  std::string worst_tensor;  // where max_relative was found
  size_t tensors = 0;        // how many were compared
};

// Compares every tensor of `file` with the same-named one of `reference`.
// Throws std::runtime_error naming both files and the tensor when the two
// do not hold the same tensor names, dtypes and shapes, or a file is
// unreadable. F32, F64 and BF16 tensors are compared by value; other
// dtypes byte for byte (any difference counts as infinitely far).
// `across_dtypes`: F32, F64 and BF16 tensors of different dtypes are
// compared by value too (parity: strategies that store other dtypes).
ModelDifference compare_models(const std::filesystem::path& file,
                               const std::filesystem::path& reference, bool across_dtypes = false);

// True when both files hold the same bytes; throws when one is unreadable.
bool same_bytes(const std::filesystem::path& a, const std::filesystem::path& b);

}  // namespace rh::cli::conformance
