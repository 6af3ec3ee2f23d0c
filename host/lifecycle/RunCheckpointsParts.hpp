// What RunCheckpoints' files (RunCheckpoints.cpp, RunCheckpointsSave.cpp,
// RunCheckpointsLoad.cpp) share: the names of a checkpoint's files and
// entries, and the small conversions between the optimizer's view of a
// parameter and a shard record. Internal to host/lifecycle.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "abi/StateDict.hpp"
#include "checkpoint/CheckpointIndex.hpp"
#include "model/Model.hpp"

namespace rh::optim {
struct OptimParam;
}  // namespace rh::optim

namespace rh::lifecycle::ckpt {

// Sharded checkpoints: the optimizer tensor's own value beside its state.
constexpr const char* kShardValueSuffix = ".param";
// AmpOptimWrapper's loss scaler in state.safetensors.
constexpr const char* kAmpScale = "amp.scale";
constexpr const char* kAmpGrowthTracker = "amp.growth_tracker";

// "optimizer.rank<r>" (sharded) or "optimizer".
std::string optimizer_stem(int rank, bool sharded);
std::vector<int64_t> shape_of(at::IntArrayRef shape);
// "1, 3" for the ranks that passed true.
std::string ranks_of(const std::vector<bool>& flags);
// One shard this rank writes: entry `key` of the file `file` (already in
// `dict`), elements [offset, offset + its numel) of logical tensor `tensor`;
// its checksum comes once the file is written (checkpoint::fill_checksums).
checkpoint::ShardRecord shard_record(const std::string& tensor, std::vector<int64_t> shape,
                                     const std::string& file, const rh_StateDict& dict,
                                     const std::string& key, int64_t offset);
// The parameter an optimizer state entry "<param>.<field>" belongs to.
const optim::OptimParam* state_owner(const std::map<std::string, const optim::OptimParam*>& params,
                                     const std::string& key);
// The whole parameter's shape (a shard's full_shape).
std::vector<int64_t> full_shape(const optim::OptimParam& p);
// The model's parameters by unit, as UnitParams takes them: entry u for
// unit u (its own parameters that are not tied), the last for unit -1 (the
// tied ones).
std::vector<std::vector<model::NamedTensor>> params_by_unit(model::Model& model);

}  // namespace rh::lifecycle::ckpt
