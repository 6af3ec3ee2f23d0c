// faults: a rank that dies mid-training ends the job, promptly, naming the
// rank, and leaves no process behind. A 2-rank job trains (by iteration,
// with no end in sight); once the trace shows it stepping, this check
// SIGKILLs the last rank's process (rank 1 of 2), as the OOM killer or a
// crashed node would; skipped for a one-rank strategy (no peer outlives it).
// The job must exit non-zero within 60 s, its output must name that rank,
// and no process of its session may remain. A strategy whose collectives ignore
// dist.timeout_s, that blocks the stop signal, or that starts helper
// processes it never reaps fails here.
//
// The kill comes from outside (this program), not from RH_FAULT_INJECT: the
// check must work against an installed runner-host, where test-only
// injection points are no contract.
#include <signal.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "cli/conformance/Checks.hpp"
#include "cli/conformance/TrainJob.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace rh::cli::conformance {
namespace {

constexpr int kItersBeforeKill = 5;
constexpr std::chrono::seconds kStartLimit{120};
constexpr std::chrono::seconds kEndLimit{60};

int count_of(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

// The line of `log` that names rank `victim` (the launcher's report first).
std::string line_naming_rank(const std::string& log, int victim) {
  const std::string rank = "rank " + std::to_string(victim);
  std::istringstream in(log);
  std::string any;
  for (std::string line; std::getline(in, line);) {
    if (line.find(rank + " ") == std::string::npos && line.find(rank + ":") == std::string::npos)
      continue;
    if (line.find("launcher") != std::string::npos) return line;
    if (any.empty()) any = line;
  }
  return any;
}

}  // namespace

CheckResult check_faults(CheckContext& ctx) {
  TrainJob job;
  job.strategy = ctx.strategy_yaml;
  job.max_iters = 1000000;
  job.save_interval = 1000000;
  // flush_lines 1: each event is in the file at once, so progress is visible.
  job.extra_hooks = "  - {type: trace, path: trace.log, flush_lines: 1}\n";
  const std::string name = "faults";
  const fs::path trace = ctx.jobs.work_dir(name) / "trace.log";
  const fs::path log = ctx.jobs.log_file(name);
  // The last rank of the first world size (rank 1 of 2; rank 0 of a
  // one-rank strategy such as single).
  const int ranks = ctx.ranks_or({2}).front();
  if (ranks == 1)
    return skip(
        "one rank (--ranks 1): no peer outlives it to notice, and the launcher runs it "
        "in its own process");
  const int victim = ranks - 1;
  const std::string who = "rank " + std::to_string(victim);
  auto launcher = ctx.jobs.start(name, job.yaml(), ranks);

  // Until it steps: kItersBeforeKill iterations traced.
  const auto started = Clock::now();
  while (count_of(read_text(trace), "after_train_iter") < kItersBeforeKill) {
    if (auto code = launcher->wait(std::chrono::milliseconds(50)))
      return fail("the job ended (exit " + std::to_string(*code) + ") before it trained " +
                  std::to_string(kItersBeforeKill) + " iterations (log: " + log.string() + ")");
    if (Clock::now() - started > kStartLimit)
      return fail("the job traced fewer than " + std::to_string(kItersBeforeKill) +
                  " iterations in " + std::to_string(kStartLimit.count()) +
                  " s (log: " + log.string() + ")");
  }
  // The victim: the first process of the session with its RANK (a helper it
  // started inherits the variable, but starts later: a higher pid).
  pid_t victim_pid = -1;
  for (pid_t p : session_members(launcher->pid()))
    if (environment_value(p, "RANK") == std::to_string(victim) &&
        (victim_pid < 0 || p < victim_pid))
      victim_pid = p;
  if (victim_pid < 0)
    return fail("no process with RANK=" + std::to_string(victim) +
                " in the job's session (log: " + log.string() + ")");
  ::kill(victim_pid, SIGKILL);
  const auto killed = Clock::now();

  const std::optional<int> code = launcher->wait(kEndLimit);
  const double took = std::chrono::duration<double>(Clock::now() - killed).count();
  const std::string text = read_text(log);
  if (!code)
    return fail("the job still ran " + std::to_string(kEndLimit.count()) + " s after " + who +
                " (pid " + std::to_string(victim_pid) + ") was SIGKILLed (log: " + log.string() +
                ")");
  const std::vector<pid_t> left = session_members(launcher->pid());
  std::ostringstream when;
  when.precision(2);
  when << std::fixed << took;
  if (*code == 0)
    return fail("the job exited 0 after " + who + " was SIGKILLed (log: " + log.string() + ")");
  const std::string naming = line_naming_rank(text, victim);
  if (naming.empty())
    return fail("exit " + std::to_string(*code) + " " + when.str() + " s after " + who +
                " was SIGKILLed, but no line names it (log: " + log.string() + ")");
  if (!left.empty()) {
    std::string pids;
    for (pid_t p : left) pids += (pids.empty() ? "" : ", ") + std::to_string(p);
    return fail(std::to_string(left.size()) + " process(es) of the job left running after it " +
                "exited: " + pids + " (log: " + log.string() + ")");
  }
  return pass(who + " SIGKILLed mid-training: exit " + std::to_string(*code) + " " + when.str() +
              " s later, no process left; \"" + naming + "\"");
}

}  // namespace rh::cli::conformance
