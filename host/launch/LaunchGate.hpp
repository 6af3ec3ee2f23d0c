// The launch gate: the built-in launcher's local rank 0 checks the job
// (what --dry-run checks: the job whole, the rules between keys and
// --mode, the loaders, the plugins created) before the node's other ranks
// go past their start-up, so that a job that cannot run is one message,
// exit 2, and nothing created on any rank — without a process of its own
// (every rank loads LibTorch in parallel; only rank 0 checks first).
//
// The protocol, over two pipes the launcher makes for each round:
//   RH_LAUNCH_GATE=check:FD  (local rank 0) FD is the write end of the
//                            verdict pipe: 'P' (passed), or 'R' and the
//                            refusal's text (the launcher prints it once,
//                            unprefixed), then closed.
//   RH_LAUNCH_GATE=wait:FD   (the other local ranks) FD is the read end of
//                            the go pipe: each reads one byte before it
//                            does anything; end of file (the launcher
//                            closed it: refused, or rank 0 died first)
//                            means exit 2 quietly.
// A worker takes the variable out of its environment and marks FD
// close-on-exec, so that nothing it starts inherits either.
// torchrun, srun and mpirun set no gate: each rank checks for itself.
#pragma once

#include <string>

namespace rh::launch {

constexpr const char* kLaunchGateEnv = "RH_LAUNCH_GATE";
// The launcher's exit code after a refusal: the job is invalid.
constexpr int kGateRefusedExit = 2;

// The worker's side.
class WorkerGate {
 public:
  enum class Role { None, Check, Wait };

  // Reads (and unsets) RH_LAUNCH_GATE; a malformed value is no gate.
  static WorkerGate from_env();

  Role role() const { return role_; }
  // Wait: blocks until the launcher opens the gate (true) or closes it
  // (false: exit 2 without a word, the launcher reports).
  bool wait_until_open();
  // Check: the job passed; the other ranks go on.
  void pass();
  // Check: the job was refused with `text` (lines, each ending in '\n').
  void refuse(const std::string& text);

 private:
  Role role_ = Role::None;
  int fd_ = -1;
};

// The launcher's side: the two pipes of one round of workers.
class LauncherGate {
 public:
  enum class State { Pending, Open, Refused, Closed };

  // Makes the pipes (false with errno set when it cannot).
  bool make();
  ~LauncherGate();
  LauncherGate() = default;
  LauncherGate(const LauncherGate&) = delete;
  LauncherGate& operator=(const LauncherGate&) = delete;

  // What worker `local_rank` gets: its RH_LAUNCH_GATE entry and the
  // descriptor it keeps across execve.
  std::string env_entry(int local_rank) const;
  int worker_fd(int local_rank) const;
  // Once every worker is started: the workers' ends closed here.
  void started();

  // The verdict pipe, for poll() while Pending (-1 otherwise).
  int poll_fd() const { return state_ == State::Pending ? verdict_read_ : -1; }
  // Reads what rank 0 wrote; `block`: until its verdict or end of file
  // (rank 0 has ended). Opens the gate for `waiters` ranks on 'P'; closes
  // it on a refusal or an end of file without a verdict.
  void read(int waiters, bool block);

  State state() const { return state_; }
  // The refusal's text (State::Refused).
  const std::string& refusal() const { return refusal_; }

 private:
  void open(int waiters);
  void close_go();

  int verdict_read_ = -1, verdict_write_ = -1;
  int go_read_ = -1, go_write_ = -1;
  std::string received_;
  std::string refusal_;
  State state_ = State::Pending;
};

}  // namespace rh::launch
