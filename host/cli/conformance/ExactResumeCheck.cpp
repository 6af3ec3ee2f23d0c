// exact_resume: stopping and resuming changes nothing. On 2 and 3 ranks
// (--ranks), a dropout mlp with diff_rank_seed (each rank draws its own
// dropout masks) and accumulation over 2 batches runs 8 iterations
// straight; another run stops after 4 with a checkpoint asked for at
// iteration 3, inside a window (the host takes it at the window's end), and
// a third resumes from it to 8. The final model files must be byte-equal.
// A strategy that keeps state it does not save (a step counter, error
// feedback, a communication schedule) or that does not restore the
// per-rank RNG and data position fails here. A lossy strategy that declared
// its divergence (--expect-divergence: its ranks hold different values
// between syncs, and a checkpoint holds rank 0's) gets the difference
// reported instead of failed, as equivalence does.
#include "cli/conformance/Checks.hpp"
#include "cli/conformance/ModelFiles.hpp"
#include "cli/conformance/TrainJob.hpp"

namespace rh::cli::conformance {

CheckResult check_exact_resume(CheckContext& ctx) {
  std::string report;
  for (const int ranks : ctx.ranks_or({2, 3})) {
    const std::string n = std::to_string(ranks);
    TrainJob job;
    job.strategy = ctx.strategy_yaml;
    job.model =
        "{type: mlp, in_features: 16, hidden: [32, 32], num_classes: 4, dropout: 0.2, "
        "frozen: [layers.0]}";
    job.extra = "diff_rank_seed: true\n";
    job.max_iters = 8;
    job.save_interval = 3;
    const JobResult& straight = ctx.jobs.run("exact_resume_" + n + "_straight", job.yaml(), ranks);
    if (straight.exit_code != 0)
      return fail("uninterrupted run on " + n + " ranks failed: " + straight.summary() +
                  straight.tail());

    TrainJob stopped = job;
    stopped.max_iters = 4;
    const JobResult& first = ctx.jobs.run("exact_resume_" + n + "_stopped", stopped.yaml(), ranks);
    if (first.exit_code != 0)
      return fail("run stopped after 4 iterations on " + n + " ranks failed: " + first.summary() +
                  first.tail());
    // iter_3 was asked for after iteration 3, inside the window (3, 4).
    const auto checkpoint = first.work_dir / "iter_3";
    TrainJob resumed = job;
    resumed.extra += "resume: " + checkpoint.string() + "\n";
    const JobResult& second = ctx.jobs.run("exact_resume_" + n + "_resumed", resumed.yaml(), ranks);
    if (second.exit_code != 0)
      return fail("resume from " + checkpoint.string() + " on " + n +
                  " ranks failed: " + second.summary() + second.tail());
    // A run that silently started afresh would also match the straight one.
    if (second.log.find("resumed from " + checkpoint.string()) == std::string::npos)
      return fail("the run given `resume: " + checkpoint.string() + "` on " + n +
                  " ranks did not report resuming from it: " + second.summary() + second.tail());
    const auto a = straight.work_dir / "iter_8" / "model.safetensors";
    const auto b = second.work_dir / "iter_8" / "model.safetensors";
    try {
      if (!same_bytes(a, b)) {
        const ModelDifference d = compare_models(b, a);
        if (!ctx.options.expect_divergence.empty()) {
          report += (report.empty() ? "" : ", ") + n + " ranks: max relative difference " +
                    std::to_string(d.max_relative) + " in " + d.worst_tensor +
                    " (divergence expected: " + ctx.options.expect_divergence + ")";
          continue;
        }
        return fail("on " + n + " ranks " + b.string() + " differs from the uninterrupted " +
                    a.string() + ": max relative difference " + std::to_string(d.max_relative) +
                    " (" + d.worst_tensor + ")");
      }
    } catch (const std::exception& e) {
      return fail(e.what());
    }
    report += (report.empty() ? "" : ", ") + n + " ranks: byte-equal";
  }
  return pass(
      "final model files, uninterrupted vs stopped at 4 and resumed from a mid-window "
      "checkpoint: " +
      report);
}

}  // namespace rh::cli::conformance
