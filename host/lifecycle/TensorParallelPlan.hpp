// A strategy's tensor-parallel plan in the lifecycle (ABI 1.11,
// rh_TensorParallelPlanArgs): asked for after SetupEnv, checked against the
// world, run by the model before the strategy wraps it; the replicated
// parameters' part in the gradient norm.
#pragma once

#include <c10/core/Device.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/TensorParallel.hpp"

namespace rh::config {
class Node;
}
namespace rh::host {
class StrategyInstance;
}
namespace rh::model {
class Model;
}
namespace rh::optim {
struct OptimParam;
}

namespace rh::lifecycle {

class World;

class TensorParallelPlan {
 public:
  // Asks the strategy for its plan (none when it has no TensorParallelPlan
  // or answers size 1) and checks it against the world: the size divides
  // the world size, the group is this rank's consecutive ranks. Sets the
  // world's data-parallel layout. Throws HostError naming the strategy.
  static std::unique_ptr<TensorParallelPlan> ask(host::StrategyInstance& strategy, World& world,
                                                 const config::Node& job);
  // Step 1 (before SetupEnv; --dry-run, the launch gate): the plan the
  // strategy would answer, run on the model's shapes (`shapes`, built on
  // the meta device; null for a TorchScript model, which runs none) as rank
  // 0 of its group. A plan the model cannot run is a ConfigError at
  // model.type, said once, before anything is created; a group size that
  // does not divide the job's `world_size` ranks, at `strategy`;
  // diff_rank_seed: true (a group's ranks must draw alike).
  static void check(host::StrategyInstance& strategy, const config::Node& job, model::Model* shapes,
                    int world_size);

  int size() const { return plan_.group->size(); }
  int rank() const { return plan_.group->rank(); }
  // model.parallelize(plan); a plan the model cannot run is a ConfigError
  // at strategy.tensor_parallel, with the model's reason.
  void apply(model::Model& model);
  // The parameters the plan split (after apply), by name, and along which
  // dimension.
  const std::vector<model::TpSplit>& splits() const { return splits_; }
  bool is_split(const std::string& name) const { return split_dim(name) >= 0; }
  // The dimension parameter `name` is split along, -1 when it is whole.
  int64_t split_dim(const std::string& name) const;
  // Checkpoints hold whole tensors (one layout for every strategy):
  // `block` (this rank's, split along `dim`) made whole again from the
  // group's blocks (collective on the group).
  at::Tensor whole(const at::Tensor& block, int64_t dim) const;
  // The whole shape of a tensor of `block`'s shape split along `dim`.
  std::vector<int64_t> whole_shape(at::IntArrayRef block, int64_t dim) const;

  // A strategy's shard of a block (elements [offset, offset + numel) of the
  // flattened block, as rh_OptimParam's full_offset says) in the whole
  // tensor, for a checkpoint of one layout. Split along dim 0 it is one
  // range of the whole (after the lower ranks' blocks). Split along dim d >
  // 0, a row of the whole (its elements from dim d on) is the ranks' rows
  // side by side, so a shard of whole block rows (fsdp's row blocks, ddp's
  // whole block) lies in the range of those whole rows, with every rank's
  // columns: `rows` > 0 says so (rows x size x the block's row).
  struct WholeRange {
    int64_t offset = 0, numel = 0;
    int64_t rows = 0;
  };
  WholeRange whole_range(at::IntArrayRef block, int64_t dim, int64_t offset, int64_t numel) const;
  // Whether whole_range can place such a shard: dim 0, or whole block rows.
  static bool rows_aligned(at::IntArrayRef block, int64_t dim, int64_t offset, int64_t numel);
  // rows > 0: the whole rows read (range.numel elements) -> this rank's shard
  // (flat); and the other way, collective on the group: this rank's shard ->
  // the whole rows every rank's shards make (flat), for its rank 0 to write.
  at::Tensor own_of_rows(const at::Tensor& rows, const WholeRange& range) const;
  at::Tensor rows_of_own(const at::Tensor& shard, const WholeRange& range) const;
  // The optimizer's tensors (the parameters, or a strategy's shards of
  // them). The gradient norm's parts: the split parameters' gradients are
  // distinct on each rank of the group, the others alike, so only the
  // group's rank 0 counts those (OptimParam::norm_counted), and
  // reduce_norm sums the parts over the group (max for norm_type inf). A
  // strategy's shard of a block a checkpoint cannot place in the whole
  // tensor (not whole rows of a dim > 0 split: whole_range), a full_shape
  // other than the block's, and without `sharded_checkpoint` (rank 0 saves
  // the optimizer whole) anything but the whole block, are refused
  // (HostError naming the strategy and the parameter).
  void check_optimizer_params(std::vector<optim::OptimParam>& params,
                              bool sharded_checkpoint) const;
  double reduce_norm(double norm_type, double local) const;

 private:
  TensorParallelPlan(model::TensorParallel plan, const config::Node& job, std::string strategy);

  model::TensorParallel plan_;
  const config::Node& job_;
  std::string strategy_;  // "strategy 'ddp' (plugin ...)"
  std::vector<model::TpSplit> splits_;
  std::map<std::string, std::vector<int64_t>> block_shapes_;  // of the split parameters
  c10::Device device_{c10::kCPU};                             // the model's
};

}  // namespace rh::lifecycle
