// Preemption: a worker asked to stop by SIGTERM or SIGUSR1 (SLURM's
// `--signal`, a scheduler's grace period, the launcher forwarding one) stops
// at the next iteration boundary — after saving a checkpoint when the job
// checkpoints — instead of dying mid-step, so the job resumes where it stopped.
//
// The handler only records the signal while a training loop accepts it
// (StopSignalScope); at any other time, and on a second signal, the signal
// takes its default action at once (the process ends), as without a handler.
#pragma once

namespace rh::launch {

// Installs the handlers for SIGTERM and SIGUSR1 (call once, in a worker).
void install_stop_signal_handlers();

// The first stop signal received while accepted, or 0.
int stop_signal();

// While one is alive, SIGTERM / SIGUSR1 are recorded instead of ending the
// process.
class StopSignalScope {
 public:
  StopSignalScope();
  ~StopSignalScope();
  StopSignalScope(const StopSignalScope&) = delete;
  StopSignalScope& operator=(const StopSignalScope&) = delete;
};

}  // namespace rh::launch
