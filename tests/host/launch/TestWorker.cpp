// rh_launch_test_worker: a stand-in for runner-host that the launcher tests
// start. It runs its arguments as a little script, in order:
//   @R CMD ...      run CMD only when RANK == R
//   #N CMD ...      run CMD only when TORCHELASTIC_RESTART_COUNT == N (unset: 0);
//                   conditions chain: #0 @1 exit 3
//   out TEXT        print TEXT and a newline to stdout
//   err TEXT        print TEXT and a newline to stderr
//   partial TEXT    print TEXT to stdout, no newline
//   long N          print N 'x' and a newline to stdout
//   env             print RANK=... WORLD_SIZE=... (one line per launcher variable,
//                   the elastic launcher's included)
//   pidfile DIR     write this pid to DIR/pid.<RANK> (atomically)
//   wait-pids DIR N wait until DIR/pid.0 ... DIR/pid.<N-1> exist (10 s at most)
//   spawn-child DIR start a child that sleeps 30 s; its pid goes to DIR/child.<RANK>
//   sleep S         sleep S seconds (fractions allowed)
//   exit C          exit with code C
//   signal S        die by signal S
//   ignore-term     ignore SIGTERM
//   ignore S        ignore signal S
//   trap S          on signal S print "got signal S" and exit with 128 + S
//   note S          on signal S print "got signal S" and carry on
//   wait-signal S   wait until signal S was noted (10 s at most; exit 101 then)
//   dispositions    print SIGNAME=default|ignored|handled for the signals the
//                   launcher handles (what this process started with)
//   kill-launcher S send signal S to the parent (the launcher)
//   port-check      on MASTER_PORT: print "plain bind: ok|<error>" (a bind
//                   without SO_REUSEADDR on 127.0.0.1, as an ephemeral port
//                   or another program would take it), then "store listen:
//                   ok|<error>" (bind on [::] with SO_REUSEADDR and listen, as
//                   rank 0's TCPStore does)
//   gate-pass       the launch gate (RH_LAUNCH_GATE, check role): passed
//   gate-refuse T   the launch gate: refused with the line T; exit 2
//   gate-wait       the launch gate (wait role): wait for it; closed: exit 2
//                   without a word (as runner-host's ranks do)
// and exits with 0 at the end.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include "launch/LaunchGate.hpp"

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

void on_trapped(int sig) {
  char line[32];
  const int n = std::snprintf(line, sizeof(line), "got signal %d\n", sig);
  ssize_t written = write(STDOUT_FILENO, line, static_cast<size_t>(n));
  (void)written;
  _exit(128 + sig);
}

// The signals `note` saw, set from the handler.
volatile sig_atomic_t g_noted[NSIG] = {};

void on_noted(int sig) {
  char line[32];
  const int n = std::snprintf(line, sizeof(line), "got signal %d\n", sig);
  ssize_t written = write(STDOUT_FILENO, line, static_cast<size_t>(n));
  (void)written;
  g_noted[sig] = 1;
}

void write_pid(const std::string& path, pid_t pid) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << pid << "\n";
  std::rename(tmp.c_str(), path.c_str());
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

}  // namespace

namespace {

// What binding MASTER_PORT gives: "ok" or strerror.
std::string try_bind(int family, bool reuse, bool listen_too) {
  const int port = std::atoi(env_or("MASTER_PORT", "0").c_str());
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::strerror(errno);
  const int one = 1;
  if (reuse) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc;
  if (family == AF_INET) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    const int zero = 0;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  if (rc == 0 && listen_too) rc = listen(fd, 4);
  const std::string result = rc == 0 ? "ok" : std::strerror(errno);
  close(fd);
  return result;
}

int arity(const std::string& cmd) {
  if (cmd == "env" || cmd == "ignore-term" || cmd == "dispositions" || cmd == "port-check" ||
      cmd == "gate-pass" || cmd == "gate-wait")
    return 0;
  if (cmd == "wait-pids") return 2;
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  rh::launch::WorkerGate gate = rh::launch::WorkerGate::from_env();
  const std::string rank = env_or("RANK", "0");
  const std::string restart = env_or("TORCHELASTIC_RESTART_COUNT", "0");
  for (int i = 1; i < argc; ++i) {
    std::string cmd = argv[i];
    // Conditions chain: "#0 @1 exit 3" exits only rank 1 of round 0.
    bool mine = true;
    while (cmd.size() > 1 && (cmd[0] == '@' || cmd[0] == '#') && i + 1 < argc) {
      mine = mine && cmd.substr(1) == (cmd[0] == '@' ? rank : restart);
      cmd = argv[++i];
    }
    if (!mine) {
      i += arity(cmd);
      continue;
    }
    if (i + arity(cmd) >= argc) {
      std::fprintf(stderr, "test worker: %s needs %d argument(s)\n", cmd.c_str(), arity(cmd));
      return 100;
    }
    auto arg = [&]() -> std::string { return argv[++i]; };
    if (cmd == "gate-pass") {
      gate.pass();
    } else if (cmd == "gate-refuse") {
      gate.refuse(arg() + "\n");
      return 2;
    } else if (cmd == "gate-wait") {
      if (!gate.wait_until_open()) return 2;
    } else if (cmd == "out") {
      std::printf("%s\n", arg().c_str());
      std::fflush(stdout);
    } else if (cmd == "err") {
      std::fprintf(stderr, "%s\n", arg().c_str());
      std::fflush(stderr);
    } else if (cmd == "partial") {
      std::printf("%s", arg().c_str());
      std::fflush(stdout);
    } else if (cmd == "long") {
      std::printf("%s\n", std::string(std::stoul(arg()), 'x').c_str());
      std::fflush(stdout);
    } else if (cmd == "env") {
      for (const char* name :
           {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
            "MASTER_PORT", "OMP_NUM_THREADS", "RH_LAUNCHED", "RH_JOB_ID", "RH_MASTER_ADDR_FROM",
            "RH_MASTER_PORT_FROM", "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT",
            "TORCHELASTIC_MAX_RESTARTS", "RH_ELASTIC_BASE_WORLD_SIZE", "RH_ELASTIC_DETECTED_AT"})
        std::printf("%s=%s\n", name, env_or(name, "(unset)").c_str());
      std::fflush(stdout);
    } else if (cmd == "pidfile") {
      write_pid(arg() + "/pid." + rank, getpid());
    } else if (cmd == "wait-pids") {
      const std::string dir = arg();
      const int n = std::stoi(arg());
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      for (int r = 0; r < n; ++r)
        while (!exists(dir + "/pid." + std::to_string(r)) &&
               std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } else if (cmd == "spawn-child") {
      const std::string dir = arg();
      const pid_t child = fork();
      if (child == 0) {
        for (int s = 0; s < 300; ++s) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        _exit(0);
      }
      write_pid(dir + "/child." + rank, child);
    } else if (cmd == "sleep") {
      std::this_thread::sleep_for(std::chrono::duration<double>(std::stod(arg())));
    } else if (cmd == "exit") {
      std::fflush(nullptr);
      return std::stoi(arg());
    } else if (cmd == "signal") {
      const int sig = std::stoi(arg());
      std::fflush(nullptr);
      signal(sig, SIG_DFL);
      raise(sig);
    } else if (cmd == "ignore-term") {
      signal(SIGTERM, SIG_IGN);
    } else if (cmd == "ignore") {
      signal(std::stoi(arg()), SIG_IGN);
    } else if (cmd == "trap") {
      signal(std::stoi(arg()), on_trapped);
    } else if (cmd == "note" || cmd == "wait-signal") {
      const int sig = std::stoi(arg());
      if (sig <= 0 || sig >= NSIG) {
        std::fprintf(stderr, "test worker: %s: no signal %d\n", cmd.c_str(), sig);
        return 100;
      }
      if (cmd == "note") {
        signal(sig, on_noted);
        continue;
      }
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (g_noted[sig] == 0) {
        if (std::chrono::steady_clock::now() >= until) {
          std::fprintf(stderr, "test worker: no signal %d within 10 s\n", sig);
          return 101;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    } else if (cmd == "dispositions") {
      const std::pair<int, const char*> kSignals[] = {
          {SIGINT, "SIGINT"},   {SIGTERM, "SIGTERM"}, {SIGHUP, "SIGHUP"},   {SIGQUIT, "SIGQUIT"},
          {SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"}, {SIGCHLD, "SIGCHLD"}, {SIGPIPE, "SIGPIPE"}};
      for (const auto& [sig, name] : kSignals) {
        struct sigaction sa {};
        sigaction(sig, nullptr, &sa);
        const char* what = sa.sa_handler == SIG_DFL   ? "default"
                           : sa.sa_handler == SIG_IGN ? "ignored"
                                                      : "handled";
        std::printf("%s=%s\n", name, what);
      }
      std::fflush(stdout);
    } else if (cmd == "kill-launcher") {
      kill(getppid(), std::stoi(arg()));
    } else if (cmd == "port-check") {
      std::printf("plain bind: %s\n", try_bind(AF_INET, false, false).c_str());
      std::printf("store listen: %s\n", try_bind(AF_INET6, true, true).c_str());
      std::fflush(stdout);
    } else {
      std::fprintf(stderr, "test worker: unknown command '%s'\n", cmd.c_str());
      return 100;
    }
  }
  return 0;
}
