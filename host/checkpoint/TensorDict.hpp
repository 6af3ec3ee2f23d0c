// at::Tensor <-> rh_StateDict entries (host-owned CPU copies), and loading a
// dict into a model's tensors with a report of what did not match.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "model/Model.hpp"

struct rh_StateDict;

namespace rh::checkpoint {

// Stores a CPU, contiguous copy of `tensor` under `key`.
void put_tensor(rh_StateDict& dict, const std::string& key, const at::Tensor& tensor);
// The same without a copy when `tensor` is a contiguous CPU tensor: the entry
// lends its memory (and keeps it alive). Only for a save that ends before the
// tensor changes or its storage is freed (not for parameters a strategy
// gathered for the call).
void put_tensor_view(rh_StateDict& dict, const std::string& key, const at::Tensor& tensor);
void put_text(rh_StateDict& dict, const std::string& key, const std::string& text);
// A view of the entry's data (valid while the dict is); throws HostError
// (RH_ERROR_NOT_FOUND) naming the key when absent.
at::Tensor get_tensor(const rh_StateDict& dict, const std::string& key);
// The entry as a tensor that takes its memory over, without a copy (the
// entry is removed; memory the dict only borrows is copied instead). For
// state a resume keeps, e.g. the optimizer's.
at::Tensor take_tensor(rh_StateDict& dict, const std::string& key);
std::string get_text(const rh_StateDict& dict, const std::string& key);
// Registers every CPU, contiguous tensor of `targets` as the Destination of
// its name (after `prefix`): a checkpoint-IO plugin with
// StateDict_AllocTensor reads a tensor of the same dtype and shape straight
// into it, and load_into then copies nothing. Only for a load whose tensors
// all go there (not check_into's question).
void place_into(rh_StateDict& dict, const std::string& prefix,
                const std::vector<model::NamedTensor>& targets);
bool has(const rh_StateDict& dict, const std::string& key);

// Which dtype differences a load converts (a dtype is never converted
// silently: every conversion is listed in LoadReport::converted).
enum class DtypeRule {
  kExact,   // none: another dtype is a mismatch
  kNarrow,  // a floating tensor into a narrower floating one (float32 -> bfloat16 /
            // float16, float64 -> float32): what a strategy's working dtype is of
            // its float32 values
  kAny,     // any floating dtype into any other (resume_dtype: convert)
};

struct LoadReport {
  std::vector<std::string> missing;     // in the model, not in the dict
  std::vector<std::string> unexpected;  // in the dict, not in the model
  // "name: checkpoint [2, 3] vs model [3, 2]", "name: checkpoint dtype Half vs model Float"
  std::vector<std::string> mismatched;
  // Loaded with a cast (DtypeRule): "name: Float -> BFloat16".
  std::vector<std::string> converted;
  bool ok() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  std::string str() const;  // one line per problem, at most 10 of each
};

// Copies every dict entry whose key (after `prefix`) names one of `targets`
// into it (no_grad). An entry of another shape, or of a dtype `rule` does
// not convert, is not copied but reported in `mismatched`; a converted one
// is listed in `converted`. Entries under other prefixes are ignored.
LoadReport load_into(const rh_StateDict& dict, const std::string& prefix,
                     const std::vector<model::NamedTensor>& targets,
                     DtypeRule rule = DtypeRule::kExact);
// What load_into would report, copying nothing.
LoadReport check_into(const rh_StateDict& dict, const std::string& prefix,
                      const std::vector<model::NamedTensor>& targets,
                      DtypeRule rule = DtypeRule::kExact);

}  // namespace rh::checkpoint
