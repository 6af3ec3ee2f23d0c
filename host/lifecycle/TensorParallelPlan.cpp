// A strategy's tensor-parallel plan in the lifecycle (TensorParallelPlan.hpp).
#include "lifecycle/TensorParallelPlan.hpp"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "abi/ComponentInstances.hpp"
#include "abi/HostError.hpp"
#include "comm/Communicator.hpp"
#include "config/ConfigNode.hpp"
#include "lifecycle/World.hpp"
#include "model/Model.hpp"
#include "optim/OptimWrapper.hpp"

namespace rh::lifecycle {
namespace {

// The strategy's group as the model's collectives see it.
class CommTpGroup final : public model::TpGroup {
 public:
  explicit CommTpGroup(comm::Communicator& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  void all_reduce_sum(at::Tensor& t) override {
    comm_.all_reduce(comm_buffer(t), comm::ReduceOp::Sum, false)->wait();
  }
  at::Tensor all_gather(const at::Tensor& t) override {
    std::vector<int64_t> shape{comm_.size()};
    for (int64_t d : t.sizes()) shape.push_back(d);
    at::Tensor all = at::empty(shape, t.options());
    comm_.all_gather(comm_buffer(t), comm_buffer(all), false)->wait();
    return all;
  }

 private:
  comm::Communicator& comm_;
};

model::TpStyle style_of(rh_TensorParallelStyle s, const std::string& strategy) {
  switch (s) {
    case RH_TP_REPLICATE:
      return model::TpStyle::Replicate;
    case RH_TP_COLWISE:
      return model::TpStyle::Colwise;
    case RH_TP_ROWWISE:
      return model::TpStyle::Rowwise;
    case RH_TP_VOCAB:
      return model::TpStyle::Vocab;
    case RH_TP_SEQUENCE:
      return model::TpStyle::Sequence;
  }
  throw host::HostError(
      RH_ERROR_INVALID_ARGUMENT,
      strategy + " TensorParallelPlan: unknown style " + std::to_string(static_cast<int>(s)));
}

// What the strategy answers (size 1: no plan), its rules read; the group
// only after SetupEnv.
struct Answer {
  int size = 1;
  rh_Comm* group = nullptr;
  std::vector<model::TpRule> rules;
};

Answer ask_strategy(host::StrategyInstance& strategy, const config::Node& job) {
  Answer a;
  if (!strategy.has_tensor_parallel_plan()) return a;
  const std::string& model_type = job.find_path("model.type")->as_string();
  rh_TensorParallelPlanArgs args{};
  args.struct_size = RH_TENSOR_PARALLEL_PLAN_ARGS_STRUCT_SIZE;
  args.model_type = rh_StringView{model_type.data(), model_type.size()};
  args.size = 1;
  strategy.tensor_parallel_plan(args);
  if (args.size == 1) return a;
  const std::string who = strategy.what() + " TensorParallelPlan";
  if (args.size < 1)
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                          who + ": size " + std::to_string(args.size) + " (must be >= 1)");
  if (args.num_rules > 0 && args.rules == nullptr)
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT, who + ": num_rules without rules");
  for (size_t i = 0; i < args.num_rules; ++i) {
    const rh_TensorParallelRule& r = args.rules[i];
    a.rules.push_back({std::string(r.pattern.data, r.pattern.size), style_of(r.style, who)});
  }
  a.size = args.size;
  a.group = args.group;
  return a;
}

// Rank 0 of a group of `size` that never communicates: the model splits
// its shapes (meta tensors) to check the plan at step 1.
class ShapeOnlyGroup final : public model::TpGroup {
 public:
  explicit ShapeOnlyGroup(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  void all_reduce_sum(at::Tensor&) override { unreachable(); }
  at::Tensor all_gather(const at::Tensor&) override { unreachable(); }

 private:
  [[noreturn]] static void unreachable() {
    throw host::HostError(RH_ERROR_INTERNAL, "a plan's check ran a collective");
  }
  int size_;
};

// model.parallelize(plan), a refusal as a ConfigError at model.type.
std::vector<model::TpSplit> parallelize(model::Model& model, const model::TensorParallel& plan,
                                        const config::Node& job, const std::string& strategy) {
  try {
    return model.parallelize(plan);
  } catch (const std::invalid_argument& e) {
    const config::Node* type = job.find_path("model.type");
    throw config::ConfigError(type->location(), "model.type",
                              "model.type '" + type->as_string() +
                                  "' cannot run the tensor-parallel plan of " + strategy + ": " +
                                  e.what());
  }
}

}  // namespace

TensorParallelPlan::TensorParallelPlan(model::TensorParallel plan, const config::Node& job,
                                       std::string strategy)
    : plan_(std::move(plan)), job_(job), strategy_(std::move(strategy)) {}

void TensorParallelPlan::check(host::StrategyInstance& strategy, const config::Node& job,
                               model::Model* shapes, int world_size) {
  Answer a = ask_strategy(strategy, job);
  if (a.size == 1) return;
  if (world_size % a.size != 0) {
    const config::Node* node = job.find("strategy");
    throw config::ConfigError(
        node->location(), "strategy",
        strategy.what() + "'s tensor-parallel plan has groups of " + std::to_string(a.size) +
            " ranks, which do not divide the job's " + std::to_string(world_size) + " rank(s)");
  }
  if (const config::Node* seed = job.find("diff_rank_seed"); seed != nullptr && seed->as_bool())
    throw config::ConfigError(seed->location(), "diff_rank_seed",
                              "the ranks of a tensor-parallel group compute one model and must "
                              "draw the same numbers; diff_rank_seed: false with " +
                                  strategy.what() + "'s tensor parallelism");
  model::TensorParallel plan{std::move(a.rules), std::make_shared<ShapeOnlyGroup>(a.size)};
  if (shapes == nullptr) {  // TorchScript: not built at step 1
    const config::Node* type = job.find_path("model.type");
    throw config::ConfigError(type->location(), "model.type",
                              "model.type 'torchscript' cannot run the tensor-parallel plan of " +
                                  strategy.what() +
                                  ": a TorchScript module's forward is opaque, so the host "
                                  "cannot put the plan's collectives between its layers");
  }
  parallelize(*shapes, plan, job, strategy.what());
}

std::unique_ptr<TensorParallelPlan> TensorParallelPlan::ask(host::StrategyInstance& strategy,
                                                            World& world, const config::Node& job) {
  Answer a = ask_strategy(strategy, job);
  if (a.size == 1) return nullptr;
  const std::string who = strategy.what() + " TensorParallelPlan";
  const int n = a.size;
  if (world.size() % n != 0)
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT, who + ": size " + std::to_string(n) +
                                                         " does not divide the world's " +
                                                         std::to_string(world.size()) + " ranks");
  comm::Communicator& group = comm::communicator_of(a.group, who.c_str());
  if (group.size() != n || group.rank() != world.rank() % n)
    throw host::HostError(
        RH_ERROR_INVALID_ARGUMENT,
        who + ": rank " + std::to_string(world.rank()) + "'s group has " +
            std::to_string(group.size()) + " ranks and it is rank " + std::to_string(group.rank()) +
            " there; a plan of size " + std::to_string(n) +
            " needs the group of consecutive ranks " + std::to_string(world.rank() / n * n) + ".." +
            std::to_string(world.rank() / n * n + n - 1) + " (rh_TensorParallelPlanArgs)");
  model::TensorParallel plan{std::move(a.rules), std::make_shared<CommTpGroup>(group)};
  world.set_tensor_parallel(n);
  return std::unique_ptr<TensorParallelPlan>(
      new TensorParallelPlan(std::move(plan), job, strategy.what()));
}

void TensorParallelPlan::apply(model::Model& model) {
  for (const model::NamedTensor& p : model.named_parameters()) {
    device_ = p.tensor.device();  // where the norm's parts are summed
    break;
  }
  splits_ = parallelize(model, plan_, job_, strategy_);
  for (const model::NamedTensor& p : model.named_parameters())
    if (is_split(p.name)) block_shapes_[p.name] = p.tensor.sizes().vec();
}

int64_t TensorParallelPlan::split_dim(const std::string& name) const {
  for (const model::TpSplit& s : splits_)
    if (s.name == name) return s.dim;
  return -1;
}

at::Tensor TensorParallelPlan::whole(const at::Tensor& block, int64_t dim) const {
  const at::Tensor all = plan_.group->all_gather(block.contiguous());  // (n, block...)
  return all.movedim(0, dim).flatten(dim, dim + 1);
}

std::vector<int64_t> TensorParallelPlan::whole_shape(at::IntArrayRef block, int64_t dim) const {
  std::vector<int64_t> shape = block.vec();
  shape[static_cast<size_t>(dim)] *= size();
  return shape;
}

namespace {
// Elements of one row of a block split along `dim`: its elements from dim on
// (dim 0: all of them).
int64_t row_numel(at::IntArrayRef block, int64_t dim) {
  return c10::multiply_integers(block.begin() + dim, block.end());
}
}  // namespace

bool TensorParallelPlan::rows_aligned(at::IntArrayRef block, int64_t dim, int64_t offset,
                                      int64_t numel) {
  if (dim == 0) return true;
  const int64_t row = row_numel(block, dim);
  return row > 0 && offset % row == 0 && numel % row == 0;
}

TensorParallelPlan::WholeRange TensorParallelPlan::whole_range(at::IntArrayRef block, int64_t dim,
                                                               int64_t offset,
                                                               int64_t numel) const {
  if (!rows_aligned(block, dim, offset, numel))  // checked at the optimizer's build
    throw host::HostError(RH_ERROR_INTERNAL,
                          "a shard of a tensor-parallel block that is not whole "
                          "block rows");
  if (dim == 0) return {rank() * row_numel(block, 0) + offset, numel, 0};
  const int64_t row = row_numel(block, dim), n = size();
  return {offset * n, numel * n, numel / row};
}

at::Tensor TensorParallelPlan::own_of_rows(const at::Tensor& rows, const WholeRange& range) const {
  if (range.numel == 0) return rows.reshape({0});
  return rows.reshape({range.rows, size(), -1}).select(1, rank()).contiguous().view(-1);
}

at::Tensor TensorParallelPlan::rows_of_own(const at::Tensor& shard, const WholeRange& range) const {
  if (range.numel == 0) return shard.reshape({0});  // alike on every rank of the group: no call
  const at::Tensor all = plan_.group->all_gather(shard.contiguous().view({range.rows, -1}));
  return all.transpose(0, 1).contiguous().view(-1);  // (rows, size, row)
}

void TensorParallelPlan::check_optimizer_params(std::vector<optim::OptimParam>& params,
                                                bool sharded_checkpoint) const {
  // The split parameters' tensors that are shards, and their split dims.
  std::vector<std::pair<const optim::OptimParam*, int64_t>> shards;
  for (optim::OptimParam& p : params) {
    const int64_t dim = split_dim(p.name);
    if (dim < 0) {
      if (rank() != 0) p.norm_counted = false;
      continue;
    }
    if (p.full_shape.empty()) continue;  // the whole block
    const std::vector<int64_t>& block = block_shapes_.at(p.name);
    if (p.full_shape != block) {
      std::ostringstream msg;
      msg << strategy_ << ": its optimizer tensor of '" << p.name << "' is a shard of "
          << at::IntArrayRef(p.full_shape) << ", not of this rank's tensor-parallel block "
          << at::IntArrayRef(block)
          << " (full_shape is the shape of the parameter Wrap sees, the block)";
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT, msg.str());
    }
    shards.emplace_back(&p, dim);
  }
  auto range = [](const optim::OptimParam& p) {
    return std::to_string(p.full_offset) + ".." + std::to_string(p.full_offset + p.param.numel());
  };
  for (const auto& [p, dim] : shards) {
    if (rows_aligned(p->full_shape, dim, p->full_offset, p->param.numel())) continue;
    std::ostringstream msg;
    msg << strategy_ << ": its optimizer tensor of '" << p->name << "' (elements " << range(*p)
        << " of the block " << at::IntArrayRef(p->full_shape)
        << ") is not whole rows of the tensor-parallel block, which the plan splits along dim "
        << dim
        << ": a checkpoint could not place it in the whole tensor (shard split parameters by "
           "dim-0 rows, as fsdp does)";
    throw host::HostError(RH_ERROR_UNIMPLEMENTED, msg.str());
  }
  if (sharded_checkpoint) return;
  for (const auto& [p, dim] : shards) {
    if (p->full_offset == 0 && p->param.numel() == row_numel(p->full_shape, 0)) continue;
    std::ostringstream msg;
    msg << strategy_ << ": its optimizer tensor of '" << p->name << "' holds elements " << range(*p)
        << " of the block " << at::IntArrayRef(p->full_shape)
        << " without the sharded_checkpoint trait (rank 0 saves the optimizer, so a split "
           "parameter's tensor must be its whole block)";
    throw host::HostError(RH_ERROR_UNIMPLEMENTED, msg.str());
  }
}

double TensorParallelPlan::reduce_norm(double norm_type, double local) const {
  at::Tensor t = at::full({1}, local, at::TensorOptions().dtype(at::kDouble).device(device_));
  if (std::isinf(norm_type)) {
    at::Tensor all = plan_.group->all_gather(t);
    return all.max().item<double>();
  }
  plan_.group->all_reduce_sum(t);
  return t.item<double>();
}

}  // namespace rh::lifecycle
