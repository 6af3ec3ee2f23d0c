// The runner: owns the lifecycle of docs/architecture.md §3 and runs it for every
// strategy the same way. Runner.cpp's State::train() is the whole order of
// things (Runner::run() picks it or an evaluation by --mode); read it top to
// bottom.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <stdexcept>
#include <string>

#include "lifecycle/JobComponents.hpp"

namespace rh::config {
class Node;
}
namespace rh::host {
class HostServices;
}

namespace rh::lifecycle {

enum class RunMode { Train, Val, Test };

struct RunnerOptions {
  RunMode mode = RunMode::Train;
  std::filesystem::path job_dir;   // resolves relative paths of the job
  std::filesystem::path work_dir;  // logs and checkpoints
  std::string config_yaml;         // the resolved job, stored in meta.json
  std::string runner_version;
};

// Thrown when training stopped early for a stop signal (SIGTERM, SIGUSR1) at
// an iteration boundary, after saving a checkpoint when the job has a
// checkpoint hook. The program exits with 128 + signal, as if killed by it.
class StopRequested : public std::runtime_error {
 public:
  StopRequested(int signal, const std::string& what) : std::runtime_error(what), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

class Runner {
 public:
  Runner(const config::Node& job, RunnerOptions options, host::HostServices& services,
         JobComponents components);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Runs the mode's lifecycle. Throws host::HostError / config::ConfigError.
  void run();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace rh::lifecycle
