// handshake: the library loads through the host's registry (the ABI major
// and native tag the host accepts, well-formed plugin info and vtables), it
// has a strategy component (of --type when given), and a job using it passes
// `--dry-run`: the host creates every component and checks the strategy's
// traits against the job (host/lifecycle/JobComponents.cpp), e.g. a
// sharded_checkpoint without UnitParams is refused there.
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
  return pass(loaded + "; a --dry-run job with it is accepted");
}

}  // namespace rh::cli::conformance
