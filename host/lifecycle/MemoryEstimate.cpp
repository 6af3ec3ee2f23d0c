#include "lifecycle/MemoryEstimate.hpp"

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <fmt/format.h>

#include <ostream>

#include "abi/ComponentInstances.hpp"
#include "config/ConfigNode.hpp"
#include "job/JobSettings.hpp"
#include "lifecycle/ModelAccess.hpp"
#include "model/ActivationEstimate.hpp"
#include "model/Model.hpp"
#include "model/TransformerBlock.hpp"

namespace rh::lifecycle {
namespace {

// State tensors the host's optimizer keeps per element of what it steps
// (host/optim/OptimWrapper.cpp): SGD a momentum buffer when momentum is not
// 0; Adam and AdamW exp_avg and exp_avg_sq, and max_exp_avg_sq with amsgrad.
int optimizer_states(const config::OptimCfg& optim) {
  if (optim.optimizer_type == "SGD") return optim.momentum != 0;
  return 2 + (optim.amsgrad ? 1 : 0);
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

bool same_figures(const RankMemory& a, const RankMemory& b) {
  return a.params == b.params && a.grads == b.grads && a.optimizer == b.optimizer &&
         a.masters == b.masters && a.comm == b.comm && a.gathered == b.gathered &&
         a.backward_grads == b.backward_grads;
}

// The activations of one forward on a rank: the job's batch (per rank),
// its sequence length, the strategy's working dtype, this LibTorch's
// attention kernel, the activation_checkpoint section.
MemoryEstimate::Activations estimate_activations(const config::Node& job,
                                                 const host::StrategyInstance& strategy) {
  MemoryEstimate::Activations out;
  const config::JobSettings settings = config::read_settings(job);
  if (settings.optim.wrapper_type == "AmpOptimWrapper") {
    out.not_estimated = "AmpOptimWrapper's autocast computes each op in its own dtype";
    return out;
  }
  model::ActivationShape shape;
  shape.batch = settings.sizes.train_batch_size;
  shape.seq_len = settings.sizes.train_block_size;
  const DLDataType dtype = strategy.traits().input_dtype;
  if (dtype.bits != 0) shape.element_size = dtype.bits / 8;
  shape.fused_attention = model::default_attention_kernel() == model::AttentionKernel::kFused;
  shape.cuda = at::hasCUDA();
  // What RecomputeBackward keeps of the generator (model/ActivationCheckpoint.cpp).
  const at::Device device = shape.cuda ? at::Device(at::kCUDA) : at::Device(at::kCPU);
  shape.rng_state =
      static_cast<int64_t>(at::globalContext().defaultGenerator(device).get_state().nbytes());
  model::ActivationCheckpointConfig ac;
  if (const config::Node* section = job.find("activation_checkpoint"))
    ac = model::read_activation_checkpoint(*section);
  const config::Node& m = *job.find("model");
  const model::ActivationEstimate est = model::estimate_activations(m, shape);
  if (!est.not_estimated.empty()) {
    out.not_estimated = est.not_estimated;
    return out;
  }
  out.after_forward = static_cast<uint64_t>(est.after_forward(ac));
  out.recompute = static_cast<uint64_t>(est.recompute(ac));
  out.what = fmt::format(
      "{} at batch {}{}, {}-byte elements, {} attention, {} kernels{}", m.find("type")->scalar(),
      shape.batch, shape.seq_len > 0 ? fmt::format(" x {} tokens", shape.seq_len) : std::string(),
      shape.element_size, shape.fused_attention ? "fused" : "written-out",
      shape.cuda ? "CUDA" : "CPU",
      ac.mode == model::ActivationCheckpointConfig::Mode::None ? "" : ", units recomputed");
  return out;
}

}  // namespace

MemoryEstimate estimate_memory(const config::Node& job, const std::filesystem::path& job_dir,
                               const host::StrategyInstance& strategy,
                               const MemoryEstimateOptions& opts) {
  MemoryEstimate est;
  est.strategy = strategy.type();
  const config::JobSettings settings = config::read_settings(job);
  est.optimizer = settings.optim.optimizer_type;
  est.optimizer_states = optimizer_states(settings.optim);

  // The model on the meta device: sizes, units, frozen; no storage.
  const std::unique_ptr<model::Model> model =
      model::build_model_shapes(*job.find("model"), job_dir.string());
  const std::vector<model::NamedTensor> params = model->named_parameters();
  const std::vector<model::Unit> units = model->units();
  const ParamPlacement placement = param_placement(params, units);
  std::vector<rh_ParamSize> sizes(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& t = params[i].tensor;
    rh_ParamSize& s = sizes[i];
    s.struct_size = RH_PARAM_SIZE_STRUCT_SIZE;
    s.name = rh_StringView{params[i].name.data(), params[i].name.size()};
    s.numel = t.numel();
    s.rows = t.dim() == 0 ? 1 : t.size(0);
    s.element_size = static_cast<int32_t>(t.element_size());
    s.unit = placement.unit[i];
    s.requires_grad = t.requires_grad() ? 1 : 0;
    s.tied = placement.tied[i];
    est.numel += s.numel;
    if (s.requires_grad) est.trainable_numel += s.numel;
  }

  est.activations = estimate_activations(job, strategy);
  if (!strategy.has_estimate_memory()) return est;
  est.strategy_estimates = true;
  rh_MemoryEstimateArgs args{};
  args.struct_size = RH_MEMORY_ESTIMATE_ARGS_STRUCT_SIZE;
  args.params = sizes.data();
  args.num_params = sizes.size();
  args.num_units = static_cast<int32_t>(units.size());
  args.world_size = opts.world_size;
  args.local_world_size = opts.local_world_size;
  args.accumulation = settings.optim.accumulative_counts;
  for (const model::NamedTensor& b : model->named_buffers())
    args.buffer_bytes += static_cast<uint64_t>(b.tensor.numel()) * b.tensor.element_size();
  for (int rank = 0; rank < opts.world_size; ++rank) {
    args.rank = rank;
    rh_MemoryEstimate out{};
    out.struct_size = RH_MEMORY_ESTIMATE_STRUCT_SIZE;
    out.optimizer_element_size = 4;
    strategy.estimate_memory(args, out);
    RankMemory r;
    r.rank = rank;
    r.params = out.param_bytes;
    r.grads = out.grad_bytes;
    r.optimizer = out.optimizer_elements * out.optimizer_element_size *
                  static_cast<uint64_t>(est.optimizer_states);
    r.masters = out.master_bytes;
    r.comm = out.comm_bytes;
    r.gathered = out.gathered_bytes;
    r.activations = est.activations.after_forward + est.activations.recompute;
    // A plugin of ABI 1.9 leaves it 0 (all its gradients held throughout).
    r.backward_grads = std::min(out.backward_grad_bytes, out.grad_bytes);
    est.ranks.push_back(r);
  }
  return est;
}

void print_memory_estimate(const MemoryEstimate& est, const MemoryEstimateOptions& opts,
                           std::ostream& out) {
  out << fmt::format(
      "memory estimate (nothing allocated): strategy {}, {} rank(s) ({} per node); model {:.2f} M "
      "parameters ({:.2f} M trainable); optimizer {}, {} state tensor(s) per element\n",
      est.strategy, opts.world_size, opts.local_world_size, static_cast<double>(est.numel) / 1e6,
      static_cast<double>(est.trainable_numel) / 1e6, est.optimizer, est.optimizer_states);
  if (!est.strategy_estimates) {
    out << "strategy '" << est.strategy
        << "' does not estimate its memory (EstimateMemory, ABI 1.9): the model's float32 "
           "parameters alone are "
        << fmt::format("{:.1f}", mib(static_cast<uint64_t>(est.numel) * 4)) << " MiB\n";
    return;
  }
  out << fmt::format("{:<14}{:>10}{:>10}{:>11}{:>10}{:>10}{:>10}{:>13}{:>10}\n", "MiB per rank",
                     "params", "grads", "optimizer", "masters", "comm", "gathered", "activations",
                     "total");
  std::string bytes;  // the same figures exactly, one line per row, for scripts
  for (size_t first = 0; first < est.ranks.size();) {
    size_t last = first;
    while (last + 1 < est.ranks.size() && same_figures(est.ranks[last + 1], est.ranks[first]))
      ++last;
    const RankMemory& r = est.ranks[first];
    const std::string who =
        first == last ? fmt::format("rank {}", first) : fmt::format("ranks {}-{}", first, last);
    out << fmt::format(
        "{:<14}{:>10.1f}{:>10.1f}{:>11.1f}{:>10.1f}{:>10.1f}{:>10.1f}{:>13.1f}{:>10.1f}\n", who,
        mib(r.params), mib(r.grads), mib(r.optimizer), mib(r.masters), mib(r.comm), mib(r.gathered),
        mib(r.activations), mib(r.total()));
    bytes += fmt::format(
        "bytes {}: params {} grads {} optimizer {} masters {} comm {} gathered {} activations {} "
        "backward_grads {} total {}\n",
        who, r.params, r.grads, r.optimizer, r.masters, r.comm, r.gathered, r.activations,
        r.backward_grads, r.total());
    first = last + 1;
  }
  const MemoryEstimate::Activations& a = est.activations;
  if (a.not_estimated.empty()) {
    out << fmt::format(
        "activations: {:.1f} MiB kept from the end of forward into backward{} ({})\n",
        mib(a.after_forward),
        a.recompute > 0
            ? fmt::format(", {:.1f} MiB more while a unit is recomputed", mib(a.recompute))
            : std::string(),
        a.what);
    bytes += fmt::format("bytes activations: after_forward {} recompute {}\n", a.after_forward,
                         a.recompute);
  } else {
    out << "activations: not estimated (" << a.not_estimated << ")\n";
  }
  out << "total: the peak; the gradients backward makes and zero_grad drops take the place of the "
         "activations it frees (the larger of the two counts)\n"
      << "not included: the temporaries of forward and backward (the gradients flowing between "
         "units), the model's buffers, the heap's free blocks, LibTorch's own memory\n"
      << bytes;
}

}  // namespace rh::lifecycle
