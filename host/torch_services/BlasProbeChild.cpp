#include "torch_services/BlasProbeChild.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

namespace rh::host {
namespace {

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

// This process's environment without the variables the probe sets itself.
std::vector<std::string> child_environment(const ProbeRequest& request) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    if (starts_with(entry, "OPENBLAS_NUM_THREADS=")) continue;
    if (request.coretype && starts_with(entry, "OPENBLAS_CORETYPE=")) continue;
    env.push_back(entry);
  }
  env.emplace_back("OPENBLAS_NUM_THREADS=1");
  if (request.coretype) env.push_back("OPENBLAS_CORETYPE=" + *request.coretype);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (std::string& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

std::string describe_request(const ProbeRequest& request) {
  return "the BLAS probe of " + request.library +
         (request.coretype ? " with OPENBLAS_CORETYPE=" + *request.coretype : std::string());
}

}  // namespace

BlasProbeResult probe_in_child(const std::filesystem::path& exe, const ProbeRequest& request,
                               double timeout_s) {
  BlasProbeResult failed;
  std::vector<std::string> args = {exe.string(), "--blas-probe", request.library};
  if (request.core_only) args.emplace_back("--core-only");
  std::vector<std::string> env = child_environment(request);
  std::vector<char*> argv = pointers(args), envp = pointers(env);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    failed.error = describe_request(request) + ": pipe: " + std::strerror(errno);
    return failed;
  }
  // posix_spawn, not fork: the runner library's process has LibTorch's
  // threads, and nothing but exec is safe in a fork of it.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (spawned != 0) {
    ::close(fds[0]);
    failed.error = describe_request(request) + ": cannot start " + exe.string() + ": " +
                   std::strerror(spawned);
    return failed;
  }

  std::string output;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = ready == 0;
      break;
    }
    char buffer[4096];
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child closed its output
    output.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }

  if (timed_out) {
    failed.error = describe_request(request) + " ran past " + std::to_string(timeout_s) + " s";
    return failed;
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    failed.error = describe_request(request) + " was killed by signal " + std::to_string(sig) +
                   " (" + ::strsignal(sig) + ")" +
                   (sig == SIGILL ? ": this CPU lacks those kernels' instructions" : "");
    return failed;
  }
  BlasProbeResult result = parse_probe_output(output);
  if (!result.error.empty()) {
    failed.error = describe_request(request) + " exited with code " +
                   std::to_string(WEXITSTATUS(status)) + "; " + result.error;
    return failed;
  }
  return result;
}

ProbeFn child_prober(const std::filesystem::path& exe) {
  return [exe](const ProbeRequest& request) { return probe_in_child(exe, request); };
}

}  // namespace rh::host
