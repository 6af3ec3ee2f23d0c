// Tensor parallelism as the built-in models run it (docs/distributed.md,
// "Tensor parallel"): a strategy's plan (rh_TensorParallelPlanArgs) read
// into rules, the group its collectives go through, and the collectives
// with their autograd duals — Megatron-LM's f (identity forward, all-reduce
// backward) before a colwise block and g (all-reduce forward, identity
// backward) after a rowwise one.
//
// The model is built whole on every rank, from the job's seed, and then
// keeps only its slices (Model::parallelize): the same initial weights as
// any other strategy's, so a tensor-parallel run can be compared with ddp.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace rh::model {

enum class TpStyle { Replicate, Colwise, Rowwise, Vocab, Sequence };
const char* tp_style_name(TpStyle style);  // "replicate", "colwise", ...

struct TpRule {
  std::string pattern;  // a module path, `*` matching any run of characters
  TpStyle style = TpStyle::Replicate;
};

// The ranks of one tensor-parallel group, as the lifecycle gives them (the
// strategy's rh_Comm). Collectives are synchronous; every rank of the group
// calls them in the same order (forward and backward run the same layers
// on every rank).
class TpGroup {
 public:
  virtual ~TpGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: the sum over the group. `t` is contiguous.
  virtual void all_reduce_sum(at::Tensor& t) = 0;
  // Every rank's contiguous `t`, stacked on a new first dimension in rank
  // order: (size, t.sizes()...).
  virtual at::Tensor all_gather(const at::Tensor& t) = 0;
};

struct TensorParallel {
  std::vector<TpRule> rules;  // the first match applies; none: replicate
  std::shared_ptr<TpGroup> group;

  TpStyle style_of(const std::string& module) const;
  // Refuses a rule that matches none of `modules` (a typo would otherwise
  // leave the model replicated without a word).
  void check_rules_match(const std::vector<std::string>& modules) const;
};

// A parameter a plan split: along `dim` into group-size equal blocks, this
// rank keeping block `rank`.
struct TpSplit {
  std::string name;
  int64_t dim = 0;
};

// f: identity forward; in backward the gradient summed over the group.
at::Tensor tp_copy(const at::Tensor& x, TpGroup& group);
// g: the sum over the group forward; identity backward.
at::Tensor tp_reduce(const at::Tensor& x, TpGroup& group);
// Every rank's x concatenated on the last dimension, in rank order; in
// backward each rank keeps its own block of the gradient.
at::Tensor tp_gather_last(const at::Tensor& x, TpGroup& group);
// Sequence parallel, x (B, T, ...) with T along dim 1. Gather: every rank's
// positions concatenated in rank order (B, n T, ...); in backward the
// gradient summed over the group, this rank keeping its positions (a
// reduce-scatter: the colwise block after it computed a part of it on each
// rank). Scatter: the sum over the group, this rank keeping its positions
// [rank T / n, (rank + 1) T / n) (a reduce-scatter); in backward the
// gradient all-gathered.
at::Tensor tp_sequence_gather(const at::Tensor& x, TpGroup& group);
at::Tensor tp_sequence_scatter(const at::Tensor& x, TpGroup& group);

// `weight` keeps block group.rank() of group.size() along `dim` (a copy:
// the whole one is freed); refuses a size that does not divide it.
void keep_block(at::Tensor& weight, int64_t dim, const TpGroup& group, const std::string& name);

}  // namespace rh::model
