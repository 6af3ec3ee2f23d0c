#include "launch/WorkerOutput.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace rh::launch::detail {
namespace {

// A line longer than this is emitted in pieces of this size.
constexpr size_t kMaxLine = 64 * 1024;

}  // namespace

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 100);
    } else {
      return false;
    }
  }
  return true;
}

int above_stdio(int fd) {
  if (fd < 0 || fd > STDERR_FILENO) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  close(fd);
  return moved;
}

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void write_output(Output& out, const std::string& text) {
  if (out.closed) return;
  if (!write_all(out.fd, text)) {
    out.closed = true;
    out.error = errno;
  }
}

void emit_lines(Stream& s, const std::string& prefix, bool at_eof) {
  std::string text;
  size_t start = 0;
  while (start < s.pending.size()) {
    size_t nl = s.pending.find('\n', start);
    size_t end;
    if (nl != std::string::npos && nl - start <= kMaxLine) {
      end = nl;
    } else if (s.pending.size() - start >= kMaxLine) {
      end = start + kMaxLine;  // a long line, cut
    } else if (at_eof) {
      end = s.pending.size();  // the last line had no newline
    } else {
      break;
    }
    text += prefix;
    text.append(s.pending, start, end - start);
    text += '\n';
    start = end < s.pending.size() && s.pending[end] == '\n' ? end + 1 : end;
  }
  s.pending.erase(0, start);
  if (!text.empty()) write_output(*s.out, text);
}

void read_stream(Stream& s, const std::string& prefix) {
  char buf[65536];
  while (s.fd >= 0) {
    ssize_t n = read(s.fd, buf, sizeof(buf));
    if (n > 0) {
      s.pending.append(buf, static_cast<size_t>(n));
      emit_lines(s, prefix, false);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {  // end of file (or an error: treated alike)
      emit_lines(s, prefix, true);
      close_fd(s.fd);
    }
  }
}

}  // namespace rh::launch::detail
