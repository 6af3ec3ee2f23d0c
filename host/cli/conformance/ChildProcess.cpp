#include "cli/conformance/ChildProcess.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace fs = std::filesystem;

namespace rh::cli::conformance {
namespace {

std::string read_whole(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The session id in /proc/<pid>/stat (the 6th field, after the command
// name in parentheses, which may itself hold spaces); -1 when gone.
pid_t session_of(pid_t pid) {
  const std::string stat = read_whole("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 2));
  char state = 0;
  pid_t ppid = 0, pgrp = 0, session = -1;
  if (!(rest >> state >> ppid >> pgrp >> session)) return -1;
  // A zombie has left nothing running; its parent reaps it.
  if (state == 'Z') return -1;
  return session;
}

int code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

ChildProcess::ChildProcess(const fs::path& program, const std::vector<std::string>& args,
                           const fs::path& log) {
  std::vector<std::string> argv_strings;
  argv_strings.push_back(program.string());
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Opened before fork: the child then only calls async-signal-safe
  // functions.
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + log.string() + ": " + std::strerror(errno));
  pid_ = ::fork();
  if (pid_ < 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot start " + program.string() + ": fork: " + std::strerror(err));
  }
  if (pid_ == 0) {
    ::setsid();
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fd);
}

ChildProcess::~ChildProcess() {
  // Also after it exited: what it left running must not outlive the check.
  kill_session();
  if (exit_code_) return;
  int status = 0;
  ::waitpid(pid_, &status, 0);
}

std::optional<int> ChildProcess::wait(std::chrono::duration<double> limit) {
  if (exit_code_) return exit_code_;
  const auto until = std::chrono::steady_clock::now() + limit;
  do {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = code_of(status);
      return exit_code_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < until);
  return std::nullopt;
}

void ChildProcess::kill_session() {
  for (pid_t p : session_members(pid_)) {
    ::kill(p, SIGKILL);
    ::kill(p, SIGCONT);  // a stopped process dies only once continued
  }
  if (!exit_code_) ::kill(pid_, SIGKILL);
}

std::vector<pid_t> session_members(pid_t leader) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid != leader && session_of(pid) == leader) out.push_back(pid);
  }
  return out;
}

std::optional<std::string> environment_value(pid_t pid, const std::string& name) {
  std::istringstream vars(read_whole("/proc/" + std::to_string(pid) + "/environ"));
  const std::string prefix = name + "=";
  for (std::string v; std::getline(vars, v, '\0');)
    if (v.compare(0, prefix.size(), prefix) == 0) return v.substr(prefix.size());
  return std::nullopt;
}

}  // namespace rh::cli::conformance
