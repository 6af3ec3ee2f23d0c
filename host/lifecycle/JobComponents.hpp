// The plugin components a job names, created once at lifecycle step 1 so
// that every plugin has validated its subtree before anything runs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "abi/ComponentFactory.hpp"

namespace rh::config {
class Node;
}

namespace rh::lifecycle {

struct JobComponents {
  std::unique_ptr<host::StrategyInstance> strategy;
  std::vector<std::unique_ptr<host::HookInstance>> hooks;  // job-file order
  std::unique_ptr<host::CheckpointIoInstance> checkpoint_io;
};

// AmpOptimWrapper's float16 on the CPU, where LibTorch has no CPU float16
// autocast (before 2.4): a ConfigError at optim_wrapper.dtype. Step 1 asks
// it of a LibTorch without CUDA, the lifecycle of the device the strategy
// chose.
void check_amp_on_cpu(const config::Node& job, bool on_cpu);

// Step 1: creates the strategy, the hooks and the checkpoint IO, and checks
// what the job asks of them (traits honoured, AmpOptimWrapper beside the
// strategy's own precision, clip_grad's ReduceGradNorm, float16 on a
// CPU-only LibTorch): before anything is created or launched, and by
// --dry-run.
// `job` must contain `strategy` and `checkpoint_io` (see apply_job_defaults).
JobComponents create_components(host::ComponentFactory& factory, const config::Node& job);

// Step 1 too: the model's rules between keys (gpt's dim a multiple of
// heads, llama's n_heads of n_kv_heads, ...), which its builder checks,
// by building it on the meta device (no memory, no values drawn): a
// ConfigError at the key, before anything is created, and by --dry-run. A
// TorchScript model is not built here (its file is read once, when the
// lifecycle builds the model). Then the strategy's tensor-parallel plan,
// run on those shapes, and its group size against the job's `world_size`
// ranks (TensorParallelPlan::check).
void check_model(const config::Node& job, const std::string& job_dir,
                 host::StrategyInstance& strategy, int world_size);

}  // namespace rh::lifecycle
