// A strategy's `tensor_parallel:` keys and the 2-D mesh they make (ABI
// 1.11, rh_TensorParallelPlanArgs): groups of `size` consecutive ranks
// compute one model, split by the plan (tensor parallel, inside a node when
// size divides its ranks); the ranks at the same place of every group hold
// the same slices and form the data-parallel group, over which the strategy
// reduces its gradients.
//
//   tensor_parallel:
//     size: 2                          # ranks per tensor-parallel group; 1 (default): none
//     plan:                            # module pattern: style, first match wins; absent:
//       "layers.*.attention.wq": colwise   # torchtitan's Llama plan (kLlamaPlan)
//     sequence_parallel: false         # true: the norms too ("*norm": sequence, first)
//
// Header-only; plugins only (the SDK's C++ helpers).
#pragma once

#include <fnmatch.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rh/cpp/config.hpp"
#include "rh/cpp/error.hpp"
#include "rh/rh_strategy.h"

namespace rh::strategies {

// torchtitan's parallelize_llama: the embedding and the output split by
// vocabulary, attention by heads, the feed-forward by hidden features.
inline const std::vector<std::pair<std::string, rh_TensorParallelStyle>>& llama_plan() {
  static const std::vector<std::pair<std::string, rh_TensorParallelStyle>> plan = {
      {"tok_embeddings", RH_TP_VOCAB},
      {"layers.*.attention.wq", RH_TP_COLWISE},
      {"layers.*.attention.wk", RH_TP_COLWISE},
      {"layers.*.attention.wv", RH_TP_COLWISE},
      {"layers.*.attention.wo", RH_TP_ROWWISE},
      {"layers.*.feed_forward.w1", RH_TP_COLWISE},
      {"layers.*.feed_forward.w3", RH_TP_COLWISE},
      {"layers.*.feed_forward.w2", RH_TP_ROWWISE},
      {"output", RH_TP_VOCAB},
  };
  return plan;
}

class TensorParallelMesh {
 public:
  TensorParallelMesh() = default;
  TensorParallelMesh(const TensorParallelMesh&) = delete;  // rules_ views patterns_
  TensorParallelMesh& operator=(const TensorParallelMesh&) = delete;

  // Reads cfg's `tensor_parallel` (absent: size 1).
  void read(const rh::Config& cfg) {
    const rh::Config tp = cfg.child("tensor_parallel");
    if (!tp.present()) return;
    size_ = static_cast<int32_t>(tp.get<int64_t>("size", 1));
    if (size_ < 1) tp.child("size").throw_error("must be >= 1, got " + std::to_string(size_));
    // torchtitan's SequenceParallel for every norm (llama's attention_norm,
    // ffn_norm and norm), ahead of the plan's rules.
    if (tp.get<bool>("sequence_parallel", false)) add("*norm", RH_TP_SEQUENCE);
    const rh::Config plan = tp.child("plan");
    if (!plan.present()) {
      for (const auto& [pattern, style] : llama_plan()) add(pattern, style);
      return;
    }
    if (plan.kind() != RH_CONFIG_MAP)
      plan.throw_error(
          "must be a map of module pattern: colwise | rowwise | vocab | sequence | replicate");
    for (size_t i = 0; i < plan.size(); ++i) {
      const std::string name = plan.at(i).as<std::string>();
      rh_TensorParallelStyle style;
      if (name == "colwise")
        style = RH_TP_COLWISE;
      else if (name == "rowwise")
        style = RH_TP_ROWWISE;
      else if (name == "vocab")
        style = RH_TP_VOCAB;
      else if (name == "replicate")
        style = RH_TP_REPLICATE;
      else if (name == "sequence")
        style = RH_TP_SEQUENCE;
      else
        plan.at(i).throw_error("'" + name +
                               "' is no style: colwise, rowwise, vocab, sequence or replicate");
      add(plan.key_at(i), style);
    }
  }

  int32_t size() const { return size_; }

  // The style the plan gives parameter `name` ("layers.0.attention.wq.weight":
  // its module is the name without its last part), as the host matches it.
  rh_TensorParallelStyle style_of_param(const std::string& name) const {
    const std::string module = name.substr(0, name.rfind('.'));
    for (size_t i = 0; i < patterns_.size(); ++i)
      if (fnmatch(patterns_[i].c_str(), module.c_str(), 0) == 0) return styles_[i];
    return RH_TP_REPLICATE;
  }

  // Collective over `world` (every rank calls it): the groups of the mesh,
  // each made on every rank as Comm_NewGroup asks. Returns this rank's
  // data-parallel group (the world itself without tensor parallelism).
  rh_Comm* make_groups(const rh_HostApi* host, rh_Comm* world, const std::string& who) {
    if (size_ == 1) return world;
    const int32_t n = world == nullptr ? 1 : host->Comm_Size(world);
    if (n % size_ != 0)
      throw rh::Exception(RH_ERROR_INVALID_CONFIG,
                          who + ": tensor_parallel.size " + std::to_string(size_) +
                              " does not divide the " + std::to_string(n) + " ranks");
    for (int32_t g = 0; g < n / size_; ++g) {  // tensor parallel: consecutive ranks
      std::vector<int32_t> ranks;
      for (int32_t t = 0; t < size_; ++t) ranks.push_back(g * size_ + t);
      rh_Comm* group = nullptr;
      rh::check(host, host->Comm_NewGroup(world, ranks.data(), ranks.size(), &group));
      if (group != nullptr) tp_group_ = group;
    }
    rh_Comm* data = nullptr;
    for (int32_t t = 0; t < size_; ++t) {  // data parallel: the same place in every group
      std::vector<int32_t> ranks;
      for (int32_t g = 0; g < n / size_; ++g) ranks.push_back(g * size_ + t);
      rh_Comm* group = nullptr;
      rh::check(host, host->Comm_NewGroup(world, ranks.data(), ranks.size(), &group));
      if (group != nullptr) data = group;
    }
    return data;
  }

  // --estimate-memory (ABI 1.9) under the plan: what one data-parallel
  // replica's strategy sees. Each rank keeps 1/size of every parameter the
  // plan splits (the host runs it: step 1 has checked that it can), whole
  // the others, in a data-parallel group of world / size ranks; `blocks`
  // holds the parameters the returned args point to.
  rh_MemoryEstimateArgs replica_of(const rh_MemoryEstimateArgs& args,
                                   std::vector<rh_ParamSize>& blocks,
                                   const std::string& who) const {
    const int32_t n = size_;
    if (args.world_size % n != 0)
      throw rh::Exception(RH_ERROR_INVALID_CONFIG, who + ": tensor_parallel.size " +
                                                       std::to_string(n) + " does not divide the " +
                                                       std::to_string(args.world_size) + " ranks");
    blocks.assign(args.params, args.params + args.num_params);
    for (rh_ParamSize& p : blocks) {
      const rh_TensorParallelStyle style = style_of_param(std::string(p.name.data, p.name.size));
      if (style == RH_TP_REPLICATE || style == RH_TP_SEQUENCE) continue;  // whole
      p.numel /= n;
      if (style != RH_TP_ROWWISE) p.rows /= n;  // colwise and vocab split the rows
    }
    rh_MemoryEstimateArgs replica = args;
    replica.params = blocks.data();
    replica.world_size = args.world_size / n;
    replica.rank = args.rank / n;
    // As fsdp's SetupEnv: a replica's ranks on a node (at least 1).
    if (RH_STRUCT_HAS(&args, rh_MemoryEstimateArgs, local_world_size))
      replica.local_world_size = std::max<int32_t>(1, args.local_world_size / n);
    return replica;
  }

  // TensorParallelPlan's answer.
  void fill(rh_TensorParallelPlanArgs& args) const {
    args.size = size_;
    if (size_ == 1) return;
    args.group = tp_group_;
    args.rules = rules_.data();
    args.num_rules = rules_.size();
  }

 private:
  void add(const std::string& pattern, rh_TensorParallelStyle style) {
    patterns_.push_back(pattern);
    styles_.push_back(style);
    rules_.clear();  // the views point into patterns_, which may have moved
    for (size_t i = 0; i < patterns_.size(); ++i)
      rules_.push_back({RH_TENSOR_PARALLEL_RULE_STRUCT_SIZE,
                        styles_[i],
                        {patterns_[i].data(), patterns_[i].size()}});
  }

  int32_t size_ = 1;
  std::vector<std::string> patterns_;
  std::vector<rh_TensorParallelStyle> styles_;
  std::vector<rh_TensorParallelRule> rules_;
  rh_Comm* tp_group_ = nullptr;
};

}  // namespace rh::strategies
