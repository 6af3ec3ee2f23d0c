#include "ProcessCallRecorder.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

namespace {

// Not thread-safe: the launcher and the tests call these from one thread.
struct Record {
  bool on = false;
  std::set<pid_t> reaped;
  std::vector<std::string> late;
  std::vector<pid_t> groups;
};

Record& record() {
  static Record r;
  return r;
}

void note_reaped(pid_t pid) {
  if (record().on && pid > 0) record().reaped.insert(pid);
}

}  // namespace

// The replacements. glibc declares kill() noexcept (__THROW), the waits not
// (they are cancellation points): the definitions must say the same.
extern "C" int kill(pid_t pid, int sig) noexcept {
  Record& r = record();
  if (r.on && pid != 0 && pid != -1) {
    const pid_t target = pid < 0 ? -pid : pid;
    if (r.reaped.count(target) != 0)
      r.late.push_back("kill(" + std::to_string(pid) + ", " + std::to_string(sig) + ") after " +
                       std::to_string(target) + " was reaped");
    else if (pid < 0)
      r.groups.push_back(target);
  }
  return static_cast<int>(syscall(SYS_kill, pid, sig));
}

extern "C" pid_t waitpid(pid_t pid, int* status, int options) {
  const pid_t r = static_cast<pid_t>(syscall(SYS_wait4, pid, status, options, nullptr));
  note_reaped(r);
  return r;
}

extern "C" int waitid(idtype_t idtype, id_t id, siginfo_t* info, int options) {
  const int r = static_cast<int>(syscall(SYS_waitid, idtype, id, info, options, nullptr));
  if (r == 0 && (options & WNOWAIT) == 0) note_reaped(info->si_pid);
  return r;
}

namespace rh::test {

RecordProcessCalls::RecordProcessCalls() { record() = Record{true, {}, {}, {}}; }
RecordProcessCalls::~RecordProcessCalls() { record() = Record{}; }

std::vector<std::string> RecordProcessCalls::signals_after_reaping() const { return record().late; }
std::vector<pid_t> RecordProcessCalls::groups_signalled() const { return record().groups; }

}  // namespace rh::test
