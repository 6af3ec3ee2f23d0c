// handshake: the library loads through the host's registry (the ABI major
// and native tag the host accepts, well-formed plugin info and vtables), it
// has a strategy component (of --type when given), and a job using it passes
// `--dry-run`: the host creates every component and checks the strategy's
// traits against the job (host/lifecycle/JobComponents.cpp), e.g. a
// sharded_checkpoint without UnitParams is refused there. Without --ranks,
// one iteration on 2 ranks then finds a strategy that runs one process
// (its SetupEnv refuses the world, as `single`'s does): the handshake says
// so, and the other checks run on 1 rank instead of failing one by one.
#include "cli/conformance/Checks.hpp"
#include "cli/conformance/TrainJob.hpp"

namespace rh::cli::conformance {

CheckResult check_handshake(CheckContext& ctx) {
  const PluginProbe& p = ctx.probe;
  if (!p.loaded)
    return fail("the host's registry refused " + ctx.options.strategy.string() + ": " + p.error);
  if (p.type.empty()) return fail(p.error);
  const std::string loaded = "plugin " + p.plugin_name + " " + p.plugin_version + ", ABI " +
                             std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor) +
                             ", native tag " + p.native_tag + ", strategy '" + p.type + "'";
  TrainJob job;
  job.strategy = ctx.strategy_yaml;
  const JobResult& r = ctx.jobs.run("handshake_dry_run", job.yaml(), 0, {"--dry-run"});
  if (r.exit_code != 0)
    return fail(loaded + "; but a --dry-run job with it was refused: " + r.summary() + r.tail());
  if (r.log.find("dry run: the job is valid; strategy " + p.type) == std::string::npos)
    return fail(loaded + "; the --dry-run job did not report strategy '" + p.type +
                "': " + r.summary() + r.tail());
  std::string worlds;
  if (ctx.options.ranks.empty()) {
    TrainJob one_step;
    one_step.strategy = ctx.strategy_yaml;
    one_step.max_iters = 1;
    one_step.accumulation = 1;
    const JobResult& two = ctx.jobs.run("handshake_two_ranks", one_step.yaml(), 2);
    const size_t at = two.log.find("SetupEnv: ");
    if (two.exit_code != 0 && at != std::string::npos) {
      const size_t end = two.log.find('\n', at);
      ctx.one_process = true;
      worlds = "; it runs one process (SetupEnv refused 2 ranks: " +
               two.log.substr(at + 10, end == std::string::npos ? end : end - at - 10) +
               "): the other checks run on 1 rank, as with --ranks 1";
    }
  }
  return pass(loaded + "; a --dry-run job with it is accepted" + worlds);
}

}  // namespace rh::cli::conformance
