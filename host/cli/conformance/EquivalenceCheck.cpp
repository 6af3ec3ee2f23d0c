// equivalence: a data-parallel strategy trains as ddp does. The same job
// on the same ranks with the strategy and with ddp: an mlp with a frozen
// block (never in the optimizer), AdamW, gradient clipping and accumulation
// over 2 batches, 6 iterations. The final checkpoints' model tensors must
// agree to a relative difference of --tolerance (1e-5: reduction order
// only). Forgetting to average gradients, averaging over the wrong count,
// clipping before the reduction, stepping the frozen block or reducing
// inside an accumulation window all show here.
//
// A strategy that is meant to differ (local SGD, compression) says so with
// --expect-divergence REASON: the difference is then reported, not failed.
#include <cstdio>

#include "cli/conformance/Checks.hpp"
#include "cli/conformance/ModelFiles.hpp"
#include "cli/conformance/TrainJob.hpp"

namespace rh::cli::conformance {
namespace {

std::string figure(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

}  // namespace

CheckResult check_equivalence(CheckContext& ctx) {
  std::string report;
  bool diverged = false;
  for (const int ranks : ctx.ranks_or({2})) {
    const std::string n = std::to_string(ranks);
    TrainJob job;
    job.strategy = ctx.strategy_yaml;
    const JobResult& mine = ctx.jobs.run("equivalence_" + n + "_strategy", job.yaml(), ranks);
    if (mine.exit_code != 0)
      return fail("job on " + n + " ranks failed: " + mine.summary() + mine.tail());
    job.strategy = "{type: ddp}";
    const JobResult& ddp = ctx.jobs.run("equivalence_" + n + "_ddp", job.yaml(), ranks);
    if (ddp.exit_code != 0)
      return fail("the ddp reference on " + n + " ranks failed: " + ddp.summary() + ddp.tail());

    const std::string final_dir = "iter_" + std::to_string(job.max_iters);
    ModelDifference d;
    try {
      d = compare_models(mine.work_dir / final_dir / "model.safetensors",
                         ddp.work_dir / final_dir / "model.safetensors");
    } catch (const std::exception& e) {
      return fail(e.what());
    }
    const bool within = d.max_relative <= ctx.options.tolerance;
    diverged = diverged || !within;
    report += (report.empty() ? "" : "; ") + n + " ranks: max relative difference " +
              figure(d.max_relative) + (d.max_relative > 0 ? " (in " + d.worst_tensor + ")" : "") +
              " over " + std::to_string(d.tensors) + " tensors " + (within ? "<=" : ">") + " " +
              figure(ctx.options.tolerance);
  }
  report += " against ddp after 6 iterations";
  if (!diverged) return pass(report);
  if (!ctx.options.expect_divergence.empty())
    return pass(report + "; divergence expected: " + ctx.options.expect_divergence);
  return fail(report + " (a lossy strategy declares it: --expect-divergence REASON)");
}

}  // namespace rh::cli::conformance
