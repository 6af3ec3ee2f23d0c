// The collectives of a tensor-parallel plan as autograd functions, and the
// plan's rules (TensorParallel.hpp).
#include "model/TensorParallel.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fnmatch.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <stdexcept>

#include "model/Model.hpp"

namespace rh::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The group crosses autograd's saved data as an integer: the functions run
// inside the model's forward and backward, which the group outlives.
TpGroup& group_of(AutogradContext* ctx) {
  return *reinterpret_cast<TpGroup*>(ctx->saved_data["group"].toInt());
}
void save_group(AutogradContext* ctx, TpGroup& group) {
  ctx->saved_data["group"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(&group));
}

at::Tensor summed(const at::Tensor& x, TpGroup& group) {
  at::Tensor out = x.contiguous().clone();
  group.all_reduce_sum(out);
  return out;
}

struct CopyToGroup : torch::autograd::Function<CopyToGroup> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, TpGroup* group) {
    save_group(ctx, *group);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {summed(grads[0], group_of(ctx)), at::Tensor()};
  }
};

struct ReduceFromGroup : torch::autograd::Function<ReduceFromGroup> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, TpGroup* group) {
    return summed(x, *group);
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], at::Tensor()};
  }
};

struct GatherLast : torch::autograd::Function<GatherLast> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, TpGroup* group) {
    save_group(ctx, *group);
    const int64_t last = x.dim() - 1;
    at::Tensor all = group->all_gather(x.contiguous());  // (n, ..., v)
    return all.movedim(0, last).flatten(last);           // (..., n v), rank-major
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TpGroup& group = group_of(ctx);
    const at::Tensor& g = grads[0];
    const int64_t block = g.size(-1) / group.size();
    return {g.narrow(-1, group.rank() * block, block).contiguous(), at::Tensor()};
  }
};

// (n, B, T, ...) -> (B, n T, ...): the ranks' positions in rank order.
at::Tensor along_sequence(const at::Tensor& all) { return all.movedim(0, 1).flatten(1, 2); }

// This rank's positions of x (B, T, ...).
at::Tensor own_positions(const at::Tensor& x, const TpGroup& group) {
  const int64_t chunk = x.size(1) / group.size();
  return x.narrow(1, group.rank() * chunk, chunk).contiguous();
}

struct SequenceGather : torch::autograd::Function<SequenceGather> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, TpGroup* group) {
    save_group(ctx, *group);
    return along_sequence(group->all_gather(x.contiguous()));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TpGroup& group = group_of(ctx);
    return {own_positions(summed(grads[0], group), group), at::Tensor()};
  }
};

struct SequenceScatter : torch::autograd::Function<SequenceScatter> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, TpGroup* group) {
    save_group(ctx, *group);
    if (x.size(1) % group->size() != 0)
      throw std::invalid_argument("sequence parallel: " + std::to_string(x.size(1)) +
                                  " positions, which tensor_parallel size " +
                                  std::to_string(group->size()) +
                                  " does not divide (feed sequences of a multiple of it)");
    return own_positions(summed(x, *group), *group);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TpGroup& group = group_of(ctx);
    return {along_sequence(group.all_gather(grads[0].contiguous())), at::Tensor()};
  }
};

}  // namespace

const char* tp_style_name(TpStyle style) {
  switch (style) {
    case TpStyle::Replicate:
      return "replicate";
    case TpStyle::Colwise:
      return "colwise";
    case TpStyle::Rowwise:
      return "rowwise";
    case TpStyle::Vocab:
      return "vocab";
    case TpStyle::Sequence:
      return "sequence";
  }
  return "?";
}

TpStyle TensorParallel::style_of(const std::string& module) const {
  for (const TpRule& r : rules)
    if (fnmatch(r.pattern.c_str(), module.c_str(), 0) == 0) return r.style;
  return TpStyle::Replicate;
}

void TensorParallel::check_rules_match(const std::vector<std::string>& modules) const {
  for (const TpRule& r : rules) {
    bool any = false;
    for (const std::string& m : modules) any = any || fnmatch(r.pattern.c_str(), m.c_str(), 0) == 0;
    if (any) continue;
    std::string some;
    for (size_t i = 0; i < modules.size() && i < 6; ++i) some += (i ? ", " : "") + modules[i];
    throw std::invalid_argument("tensor-parallel rule '" + r.pattern + "' (" +
                                tp_style_name(r.style) +
                                ") matches no module of the model (its modules: " + some +
                                (modules.size() > 6 ? ", ..." : "") + ")");
  }
}

at::Tensor tp_copy(const at::Tensor& x, TpGroup& group) { return CopyToGroup::apply(x, &group); }
at::Tensor tp_reduce(const at::Tensor& x, TpGroup& group) {
  return ReduceFromGroup::apply(x, &group);
}
at::Tensor tp_gather_last(const at::Tensor& x, TpGroup& group) {
  return GatherLast::apply(x, &group);
}
at::Tensor tp_sequence_gather(const at::Tensor& x, TpGroup& group) {
  return SequenceGather::apply(x, &group);
}
at::Tensor tp_sequence_scatter(const at::Tensor& x, TpGroup& group) {
  return SequenceScatter::apply(x, &group);
}

void keep_block(at::Tensor& weight, int64_t dim, const TpGroup& group, const std::string& name) {
  const int64_t n = group.size();
  if (weight.size(dim) % n != 0)
    throw std::invalid_argument(
        name + " has " + std::to_string(weight.size(dim)) + (dim == 0 ? " rows" : " columns") +
        ", which tensor_parallel size " + std::to_string(n) + " does not divide");
  const int64_t block = weight.size(dim) / n;
  at::NoGradGuard no_grad;
  // set_data: the parameter keeps its identity (the registry's, the layer's
  // and the optimizer's handles all see the block).
  weight.set_data(weight.detach().narrow(dim, group.rank() * block, block).contiguous().clone());
}

std::vector<TpSplit> Model::parallelize(const TensorParallel&) {
  throw std::invalid_argument("its layers have no split (only the built-in llama's do)");
}

}  // namespace rh::model
