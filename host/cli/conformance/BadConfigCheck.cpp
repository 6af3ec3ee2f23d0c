// bad_config: a typo in the strategy's keys is an error, not a default. A
// --dry-run job whose `strategy:` holds a key no strategy has must exit 2
// naming the key path (`strategy.no_such_key`) — before anything is built.
// The host refuses keys a plugin never read; a plugin that reads every key
// it is given (iterating the map) must check them itself.
#include "cli/conformance/Checks.hpp"
#include "cli/conformance/TrainJob.hpp"

namespace rh::cli::conformance {

CheckResult check_bad_config(CheckContext& ctx) {
  TrainJob job;
  job.strategy = ctx.strategy_yaml_unknown_key;
  const JobResult& r = ctx.jobs.run("bad_config", job.yaml(), 0, {"--dry-run"});
  const std::string key = "strategy.no_such_key";
  if (r.exit_code != 2)
    return fail("an unknown key `" + key + "` gave " + r.summary() + ", expected exit 2" +
                r.tail());
  if (r.log.find(key) == std::string::npos)
    return fail("exit 2 for an unknown key, but the message does not name `" + key +
                "`:" + r.tail());
  // The message's line, quoted in the report.
  const size_t at = r.log.find(key);
  const size_t newline = r.log.rfind('\n', at);
  const size_t begin = newline == std::string::npos ? 0 : newline + 1;
  const size_t end = r.log.find('\n', at);
  const std::string line =
      r.log.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  return pass("unknown key refused with exit 2: " + line);
}

}  // namespace rh::cli::conformance
