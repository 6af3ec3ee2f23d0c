// checkpoints: a strategy's checkpoints are runner-host checkpoints, not
// private files. Its checkpoint (N ranks, 4 iterations) must resume under
// ddp on N ranks and under single on one rank (N -> 1, the global batch
// kept), and ddp's checkpoint must resume under it; each resumed run must
// say it resumed from the saved iteration and reach iteration 6. A
// strategy that writes its own layout without the host's resharding
// metadata, or can only read what it wrote itself, fails here.
#include "cli/conformance/Checks.hpp"
#include "cli/conformance/TrainJob.hpp"

namespace fs = std::filesystem;

namespace rh::cli::conformance {
namespace {

constexpr int kSaved = 4;
constexpr int kFinal = 6;

// "" when `run` resumed from `checkpoint` at iteration kSaved and saved
// iteration kFinal; else why not.
std::string resumed_ok(const std::string& what, const JobResult& run, const fs::path& checkpoint) {
  if (run.exit_code != 0) return what + " failed: " + run.summary() + run.tail();
  const std::string said =
      "resumed from " + checkpoint.string() + " at epoch 0, iteration " + std::to_string(kSaved);
  if (run.log.find(said) == std::string::npos)
    return what + " did not log '" + said + "': " + run.summary() + run.tail();
  const fs::path last = run.work_dir / ("iter_" + std::to_string(kFinal)) / "model.safetensors";
  if (!fs::exists(last)) return what + " left no " + last.string() + ": " + run.summary();
  return "";
}

}  // namespace

CheckResult check_checkpoints(CheckContext& ctx) {
  const int ranks = ctx.ranks_or({2}).front();
  const std::string n = std::to_string(ranks);
  TrainJob job;
  job.max_iters = kSaved;
  job.save_interval = kSaved;
  job.strategy = ctx.strategy_yaml;
  const JobResult& mine = ctx.jobs.run("checkpoints_strategy", job.yaml(), ranks);
  if (mine.exit_code != 0)
    return fail("job on " + n + " ranks failed: " + mine.summary() + mine.tail());
  job.strategy = "{type: ddp}";
  const JobResult& ddp = ctx.jobs.run("checkpoints_ddp", job.yaml(), ranks);
  if (ddp.exit_code != 0) return fail("the ddp job failed: " + ddp.summary() + ddp.tail());
  const fs::path my_ckpt = mine.work_dir / ("iter_" + std::to_string(kSaved));
  const fs::path ddp_ckpt = ddp.work_dir / ("iter_" + std::to_string(kSaved));

  TrainJob resume = job;
  resume.max_iters = kFinal;
  resume.save_interval = kFinal;
  resume.extra = "resume: " + my_ckpt.string() + "\n";
  resume.strategy = "{type: ddp}";
  if (auto why = resumed_ok("its checkpoint resumed under ddp on " + n + " ranks",
                            ctx.jobs.run("checkpoints_to_ddp", resume.yaml(), ranks), my_ckpt);
      !why.empty())
    return fail(why);
  TrainJob single = resume;
  single.strategy = "{type: single}";
  single.batch = job.batch * ranks;
  if (auto why = resumed_ok("its checkpoint resumed under single on 1 rank",
                            ctx.jobs.run("checkpoints_to_single", single.yaml(), 0), my_ckpt);
      !why.empty())
    return fail(why);
  resume.strategy = ctx.strategy_yaml;
  resume.extra = "resume: " + ddp_ckpt.string() + "\n";
  if (auto why = resumed_ok("ddp's checkpoint resumed under it on " + n + " ranks",
                            ctx.jobs.run("checkpoints_from_ddp", resume.yaml(), ranks), ddp_ckpt);
      !why.empty())
    return fail(why);
  return pass("its checkpoint (" + n + " ranks, iteration " + std::to_string(kSaved) +
              ") resumed under ddp and under single (" + n + " -> 1), ddp's under it; each " +
              "continued from iteration " + std::to_string(kSaved) + " to " +
              std::to_string(kFinal));
}

}  // namespace rh::cli::conformance
