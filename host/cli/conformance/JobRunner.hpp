// Runs the conformance jobs: each a YAML file and a run of the runner-host
// program itself (/proc/self/exe), through its launcher on N ranks as a
// user runs it, in one directory per job under the conformance root.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/conformance/ChildProcess.hpp"

namespace rh::cli::conformance {

struct JobResult {
  int exit_code = -1;  // 128 + signal when a signal ended it; -1: timed out (killed)
  std::string log;     // stdout and stderr, launcher and every rank
  double seconds = 0;  // wall time
  std::filesystem::path work_dir;
  std::filesystem::path log_file;

  // "exit 1 after 2.3 s (log: <file>)" for reports.
  std::string summary() const;
  // The log's last `lines` lines, each indented, for a failure's detail.
  std::string tail(int lines = 8) const;
};

class JobRunner {
 public:
  JobRunner(std::filesystem::path program, std::filesystem::path root,
            std::chrono::seconds timeout);

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path work_dir(const std::string& name) const { return root_ / name; }

  // Writes <root>/<name>.yaml (`work_dir: <root>/<name>` first, then
  // `yaml`) and runs it: on `ranks` processes through the launcher
  // (--nproc-per-node), or in this one process's child without it when
  // `ranks` is 0. Runs are kept by name: asking again for a name with the
  // same job returns the first result (checks share their reference runs);
  // another job under a used name is a programming error (std::logic_error).
  const JobResult& run(const std::string& name, const std::string& yaml, int ranks,
                       const std::vector<std::string>& extra_args = {});

  // Starts the job as run() does and returns at once (the faults check
  // acts on it while it runs). Never kept.
  std::unique_ptr<ChildProcess> start(const std::string& name, const std::string& yaml, int ranks,
                                      const std::vector<std::string>& extra_args = {});
  std::filesystem::path log_file(const std::string& name) const;

 private:
  std::vector<std::string> arguments(const std::string& name, const std::string& yaml, int ranks,
                                     const std::vector<std::string>& extra_args);

  std::filesystem::path program_;
  std::filesystem::path root_;
  std::chrono::seconds timeout_;
  std::map<std::string, std::pair<std::string, JobResult>> done_;  // name -> (job, result)
};

std::string read_text(const std::filesystem::path& p);

}  // namespace rh::cli::conformance
