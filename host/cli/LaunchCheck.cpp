#include "cli/LaunchCheck.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "launch/LaunchMain.hpp"

namespace rh::cli {
namespace {

// `args` less --log-level and its value, in both forms (the check sets its
// own: one option may not be given twice).
std::vector<std::string> without_log_level(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (args[i] == "--log-level") {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind("--log-level=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

}  // namespace

LaunchCheck check_before_launch(const std::filesystem::path& self,
                                const std::vector<std::string>& args) {
  std::vector<std::string> argv = without_log_level(launch::strip_launcher_flags(args));
  argv.insert(argv.begin(), self.string());
  for (const char* extra : {"--dry-run", "--log-level", "error"}) argv.emplace_back(extra);
  std::vector<char*> c_argv;
  for (std::string& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);

  LaunchCheck out;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return out;  // unchecked: the workers check
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return out;
  }
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, 1);
    ::dup2(pipe_fds[1], 2);
    ::execv(c_argv[0], c_argv.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n > 0) {
      out.errors.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

}  // namespace rh::cli
