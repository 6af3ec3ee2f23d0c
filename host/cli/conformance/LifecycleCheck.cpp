// lifecycle: every hook fires for every strategy, in the host's one order
// (docs/architecture.md §3). A 2-rank job with the `trace` hook must record
// exactly the golden event sequence of the host's own lifecycle tests, with
// the same counters (mode, epoch, iter, inner_iter): for training (2 epochs
// of 3 iterations) and for a resume (1 epoch saved by the checkpoint hook,
// then resumed for the second: the load and save events included). A
// strategy that skips or repeats a step, or miscounts iterations (e.g. by
// splitting the data otherwise), differs from the golden sequence.
#include <sstream>

#include "cli/conformance/Checks.hpp"
#include "cli/conformance/GoldenTrace.hpp"

namespace fs = std::filesystem;

namespace rh::cli::conformance {
namespace {

// The golden jobs of tests/host/lifecycle/LifecycleTest.cpp, their data
// scaled with the ranks so that each rank still has 3 batches per epoch.
std::string lifecycle_job(const std::string& strategy, int ranks, int max_epochs,
                          const std::string& more) {
  std::ostringstream y;
  y << "seed: 1\n"
    << "model: {type: mlp, in_features: 8, hidden: [16], num_classes: 3}\n"
    << "data:\n"
    << "  train: {dataset: {type: synthetic_classification, num_samples: " << 24 * ranks
    << ", num_features: 8, num_classes: 3},\n"
    << "          batch_size: 8, shuffle: true, num_workers: 0}\n"
    << "optim_wrapper: {optimizer: {type: SGD, lr: 0.1, momentum: 0.9}}\n"
    << "train_cfg: {by_epoch: true, max_epochs: " << max_epochs << "}\n"
    << "strategy: " << strategy << "\n"
    << "dist: {timeout_s: 30}\n"
    << more;
  return y.str();
}

// Every rank's trace hook appends to the one file, a line at a time
// (GoldenTrace.hpp says how the ranks' sequences are told apart).
const char* const kTrace =
    "hooks:\n  - {type: trace, path: trace.log, append: true, flush_lines: 1}\n";
const char* const kTraceAndCheckpoint =
    "hooks:\n  - {type: trace, path: trace.log, append: true, flush_lines: 1}\n"
    "  - {type: checkpoint, interval: 1}\n";

// "" when `trace` matches the golden file `name`, else why not.
std::string compare(const CheckContext& ctx, const std::string& name, const JobResult& run,
                    int ranks) {
  const fs::path golden = golden_dir(ctx.program) / ("lifecycle_" + name + ".txt");
  if (!fs::exists(golden))
    return "golden file " + golden.string() + " is missing (reinstall runner-host)";
  if (run.exit_code != 0) return name + " job failed: " + run.summary() + run.tail();
  const fs::path trace = run.work_dir / "trace.log";
  if (!fs::exists(trace)) return name + " job wrote no " + trace.string();
  const auto diff = interleaving_difference(normalise_trace(read_text(golden)),
                                            normalise_trace(read_text(trace)), ranks);
  if (diff)
    return name + " events differ from " + golden.string() + ": " + *diff +
           " (trace: " + trace.string() + ")";
  return "";
}

}  // namespace

CheckResult check_lifecycle(CheckContext& ctx) {
  const int ranks = ctx.ranks_or({2}).front();
  const std::string& s = ctx.strategy_yaml;
  const JobResult& train =
      ctx.jobs.run("lifecycle_train", lifecycle_job(s, ranks, 2, kTrace), ranks);
  if (std::string why = compare(ctx, "train", train, ranks); !why.empty()) return fail(why);

  // Resumed into another work_dir, so that its trace holds only the resumed run.
  const JobResult& first = ctx.jobs.run("lifecycle_resume_first",
                                        lifecycle_job(s, ranks, 1, kTraceAndCheckpoint), ranks);
  if (first.exit_code != 0)
    return fail("first half of resume failed: " + first.summary() + first.tail());
  const JobResult& resumed =
      ctx.jobs.run("lifecycle_resume",
                   lifecycle_job(s, ranks, 2,
                                 std::string(kTraceAndCheckpoint) +
                                     "resume: " + (first.work_dir / "epoch_1").string() + "\n"),
                   ranks);
  if (std::string why = compare(ctx, "resume", resumed, ranks); !why.empty()) return fail(why);
  return pass("every rank's train and resume event sequences (" + std::to_string(ranks) +
              " ranks) equal the golden ones in " + golden_dir(ctx.program).string());
}

}  // namespace rh::cli::conformance
