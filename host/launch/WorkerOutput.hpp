// The workers' output as the launcher re-emits it (internal to host/launch):
// read from each worker's pipes without blocking, cut into lines, each line
// prefixed "[rank N] " and written in one write; a line longer than 64 KiB
// is cut, a last line without a newline gets one at end of file. A write
// that fails (EPIPE: `runner-host ... | head` after head exited) closes that
// output: what comes later for it is read and dropped, so that the workers
// never block on a full pipe.
#pragma once

#include <string>

namespace rh::launch::detail {

// Where the launcher writes (stdout_fd or stderr_fd).
struct Output {
  int fd = -1;
  bool closed = false;
  int error = 0;  // errno of the failed write
};

// One of a worker's output streams: the read end of its pipe and the bytes
// of a line not complete yet.
struct Stream {
  int fd = -1;
  Output* out = nullptr;
  std::string pending;
};

// Writes `text` to `out` unless it is closed; a failed write closes it.
void write_output(Output& out, const std::string& text);

// Emits the complete lines of s.pending (all of it when `at_eof`), each
// prefixed, in one write.
void emit_lines(Stream& s, const std::string& prefix, bool at_eof);

// Reads what is available on s (non-blocking); at end of file flushes the last
// partial line and closes the stream.
void read_stream(Stream& s, const std::string& prefix);

// Descriptor helpers the launcher's files share (WorkerProcesses, LaunchGate).
// Closes fd when it is open and sets it to -1.
void close_fd(int& fd);
// Writes all of `data` to fd. Returns false on an error other than
// EINTR/EAGAIN, EPIPE included (SIGPIPE is ignored while launch() runs): a
// closed terminal or pipe must not stop the supervision.
bool write_all(int fd, const std::string& data);
// Moves fd above 0, 1 and 2 (which may be closed in the launcher, so that a
// new pipe could get one of them) and keeps it close-on-exec.
int above_stdio(int fd);
void set_nonblocking(int fd);

}  // namespace rh::launch::detail
