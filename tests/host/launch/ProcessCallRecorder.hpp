// Records how the launcher signals and reaps its workers, to check the order:
// a process group may be signalled only while its leader is not reaped yet (a
// reaped leader's id can be reused by an unrelated process or group).
//
// ProcessCallRecorder.cpp defines kill(), waitpid() and waitid() in the test
// program. The program's own definitions take precedence over libc's, for the
// launcher (linked in statically) as for the tests; each passes the call on to
// the kernel unchanged, and records it while a RecordProcessCalls is alive.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace rh::test {

class RecordProcessCalls {
 public:
  RecordProcessCalls();
  ~RecordProcessCalls();
  RecordProcessCalls(const RecordProcessCalls&) = delete;
  RecordProcessCalls& operator=(const RecordProcessCalls&) = delete;

  // One "kill(PID, SIG) after PID was reaped" for each signal sent to a pid
  // or group id whose process had been reaped (by waitpid or waitid).
  std::vector<std::string> signals_after_reaping() const;
  // The group ids signalled (kill(-G, ...)) while their leader was unreaped.
  std::vector<pid_t> groups_signalled() const;
};

}  // namespace rh::test
