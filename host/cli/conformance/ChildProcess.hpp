// A child process in a session of its own, its output in a log file.
//
// The conformance jobs run the runner-host program itself, launcher and
// workers, as a user runs them. Each is started as the leader of a new
// session so that everything it starts (the workers, anything they start)
// can be found afterwards by session id: that is how the faults check tells
// that no process was left behind, and how a job that hangs is cleaned up.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace rh::cli::conformance {

class ChildProcess {
 public:
  // Starts `program args...` with stdout and stderr appended to `log`.
  // Throws std::runtime_error naming the program when fork fails.
  ChildProcess(const std::filesystem::path& program, const std::vector<std::string>& args,
               const std::filesystem::path& log);
  // Kills whatever of its session is still running (SIGKILL), and the
  // leader when it was never reaped.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Its exit code once it exits within `limit` (128 + signal when a signal
  // ended it); nullopt while it still runs.
  std::optional<int> wait(std::chrono::duration<double> limit);
  // SIGKILLs every process of its session, the leader last.
  void kill_session();

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// Every process whose session is `leader`'s, the leader excluded: what a
// job left running (workers are reparented, never moved out of it).
std::vector<pid_t> session_members(pid_t leader);
// The value of `name` in a process's environment; nullopt when unset or the
// process is gone.
std::optional<std::string> environment_value(pid_t pid, const std::string& name);

}  // namespace rh::cli::conformance
