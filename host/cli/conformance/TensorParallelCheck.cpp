// tensor_parallel: a strategy that declares a tensor-parallel plan (ABI
// 1.11, TensorParallelPlan) trains a llama as ddp does on the same
// data-parallel world. The job: a small llama (4 query heads, 2 key/value
// heads, 3 layers) on a generated text, AdamW with gradient clipping and
// accumulation over 2 batches, 6 iterations, under the strategy on each of
// --ranks (default 2 and 4) and under ddp on as many ranks as the
// strategy's run reports data-parallel replicas ("tensor parallel: G groups
// of S consecutive ranks, data over R replicas"): the same global batch.
// Two comparisons:
// - every step's gradient norm (metrics hook) within --tolerance of ddp's
//   (relative): the gradients differ only by rounding, so the norms agree
//   to ~1e-8; a norm that counts a replicated parameter once per rank of
//   the group, or misses the other ranks' blocks, shows here;
// - the final checkpoints' model tensors within 1e-3 of ddp's (relative to
//   each tensor's largest value), an effect-size bound: a rowwise layer
//   sums the ranks' partial products, which rounds otherwise than ddp's
//   one product, and AdamW carries that (measured 6.2e-5 with ddp's
//   plan); a missing all-reduce, blocks taken from the wrong rank, data
//   sharded over the ranks instead of the replicas or checkpoints that hold
//   a rank's slices instead of whole tensors move them by 1e-1 or more.
//
// A strategy without the entry is skipped; so is one whose configuration
// declares no plan (size 1): pass one with --config.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <vector>

#include "cli/conformance/Checks.hpp"
#include "cli/conformance/ModelFiles.hpp"
#include "cli/conformance/TrainJob.hpp"

namespace fs = std::filesystem;

namespace rh::cli::conformance {
namespace {

constexpr double kTensorBound = 1e-3;  // the parameters' effect-size bound (above)

// The grad_norm of every train line of a run's metrics.jsonl.
std::vector<double> grad_norms(const fs::path& work_dir) {
  std::vector<double> out;
  std::ifstream in(work_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const YAML::Node row = YAML::Load(line);
    if (row["mode"].as<std::string>() == "train" && row["grad_norm"])
      out.push_back(row["grad_norm"].as<double>());
  }
  return out;
}

std::string tp_figure(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

// 16 kB of text over 40 characters (char_lm's vocabulary: the distinct
// bytes), the same every run: words of 2-8 letters from a fixed generator.
fs::path tp_text(const fs::path& root) {
  const fs::path file = root / "tensor_parallel_text.txt";
  std::ofstream out(file, std::ios::binary);
  const std::string letters = "abcdefghijklmnopqrstuvwxyz .,;:!?'-ABCDE\n";
  uint64_t x = 42;
  auto next = [&x] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<size_t>(x >> 33);
  };
  for (int i = 0; i < 16384; ++i) out << letters[next() % letters.size()];
  return file;
}

TrainJob tp_llama_job(const std::string& strategy, const fs::path& text) {
  TrainJob job;
  job.strategy = strategy;
  job.model =
      "{type: llama, vocab_size: 64, dim: 32, n_layers: 3, n_heads: 4, n_kv_heads: 2, "
      "multiple_of: 16, max_seq_len: 16}";
  job.dataset = "{type: char_lm, path: " + text.string() + ", block_size: 16, split: train}";
  job.optimizer = "{type: AdamW, lr: 0.003, weight_decay: 0.1}";
  job.extra_hooks = "  - {type: metrics}\n";
  return job;
}

}  // namespace

CheckResult check_tensor_parallel(CheckContext& ctx) {
  if (!ctx.probe.tensor_parallel)
    return skip("the strategy declares no tensor-parallel plan (no TensorParallelPlan, ABI 1.11)");
  const fs::path text = tp_text(ctx.jobs.root());
  std::string report;
  bool diverged = false;
  for (const int ranks : ctx.ranks_or({2, 4})) {
    const std::string n = std::to_string(ranks);
    TrainJob job = tp_llama_job(ctx.strategy_yaml, text);
    const JobResult& mine = ctx.jobs.run("tensor_parallel_" + n + "_strategy", job.yaml(), ranks);
    if (mine.exit_code != 0)
      return fail("llama job on " + n + " ranks failed: " + mine.summary() + mine.tail());
    std::smatch m;
    if (!std::regex_search(mine.log, m,
                           std::regex(R"(tensor parallel: \d+ groups of (\d+) consecutive ranks, )"
                                      R"(data over (\d+) replicas)")))
      return skip("its configuration declares no plan on " + n +
                  " ranks (size 1): pass one with --config");
    const int replicas = std::stoi(m[2]);
    const JobResult& ddp = ctx.jobs.run("tensor_parallel_" + std::to_string(replicas) + "_ddp",
                                        tp_llama_job("{type: ddp}", text).yaml(), replicas);
    if (ddp.exit_code != 0)
      return fail("the ddp reference on " + std::to_string(replicas) +
                  " ranks failed: " + ddp.summary() + ddp.tail());
    const std::string final_dir = "iter_" + std::to_string(job.max_iters);
    ModelDifference d;
    try {
      d = compare_models(mine.work_dir / final_dir / "model.safetensors",
                         ddp.work_dir / final_dir / "model.safetensors");
    } catch (const std::exception& e) {
      return fail(e.what());
    }
    const std::vector<double> mine_norms = grad_norms(mine.work_dir);
    const std::vector<double> ddp_norms = grad_norms(ddp.work_dir);
    if (mine_norms.size() != ddp_norms.size() || mine_norms.empty())
      return fail("the runs on " + n + " ranks logged " + std::to_string(mine_norms.size()) +
                  " gradient norms, ddp's " + std::to_string(ddp_norms.size()));
    double norm_diff = 0;
    for (size_t i = 0; i < mine_norms.size(); ++i)
      norm_diff = std::max(norm_diff, std::fabs(mine_norms[i] - ddp_norms[i]) / ddp_norms[i]);
    const bool within = d.max_relative <= kTensorBound && norm_diff <= ctx.options.tolerance;
    diverged = diverged || !within;
    report += (report.empty() ? "" : "; ") + n + " ranks (tensor parallel " + m[1].str() +
              ", ddp on " + std::to_string(replicas) + "): grad_norm within " +
              tp_figure(norm_diff) + (norm_diff <= ctx.options.tolerance ? " <= " : " > ") +
              tp_figure(ctx.options.tolerance) + ", parameters within " +
              tp_figure(d.max_relative) +
              (d.max_relative > 0 ? " (in " + d.worst_tensor + ")" : "") +
              (d.max_relative <= kTensorBound ? " <= " : " > ") + tp_figure(kTensorBound) +
              " over " + std::to_string(d.tensors) + " tensors";
  }
  report += " after 6 iterations of a llama (relative)";
  if (!diverged) return pass(report);
  return fail(report);
}

}  // namespace rh::cli::conformance
