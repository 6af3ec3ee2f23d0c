#include "formats/PosixFile.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "rh/cpp/error.hpp"

namespace rh::posix {
namespace {

[[noreturn]] void io_error(const std::string& path, const std::string& what, int err) {
  throw Exception(err == ENOENT ? RH_ERROR_NOT_FOUND : RH_ERROR_IO,
                  path + ": " + what + ": " + std::strerror(err));
}

}  // namespace

PosixFile PosixFile::open_read(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) io_error(path, "cannot open", errno);
  return PosixFile(fd, path);
}

PosixFile PosixFile::create(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error(path, "cannot create", errno);
  return PosixFile(fd, path);
}

PosixFile::PosixFile(PosixFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      written_(other.written_),
      kicked_(other.kicked_) {}

PosixFile& PosixFile::operator=(PosixFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    written_ = other.written_;
    kicked_ = other.kicked_;
  }
  return *this;
}

PosixFile::~PosixFile() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t PosixFile::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) io_error(path_, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) throw Exception(RH_ERROR_IO, path_ + ": not a regular file");
  return static_cast<uint64_t>(st.st_size);
}

FileIdentity PosixFile::identity() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) io_error(path_, "cannot stat", errno);
  FileIdentity id;
  id.dev = static_cast<uint64_t>(st.st_dev);
  id.ino = static_cast<uint64_t>(st.st_ino);
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return id;
}

void PosixFile::read_at(uint64_t offset, void* data, size_t size) const {
  auto* p = static_cast<unsigned char*>(data);
  while (size > 0) {
    ssize_t n = ::pread(fd_, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      io_error(path_, "read failed at byte " + std::to_string(offset), errno);
    }
    if (n == 0) {
      throw Exception(RH_ERROR_DATA_LOSS, path_ + ": file ended at byte " + std::to_string(offset) +
                                              " (it changed while being read)");
    }
    p += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
}

void PosixFile::write_all(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (size > 0) {
    // In pieces of kWritebackChunk, each handed to the disk at once
    // (sync_file_range, best effort): the device writes while the caller
    // prepares the next bytes, and the final fsync has little left to wait
    // for, where a plain write-then-fsync would leave all of it to the end.
    const size_t piece = std::min(size, kWritebackChunk);
    ssize_t n = ::write(fd_, p, piece);
    if (n < 0) {
      if (errno == EINTR) continue;
      io_error(path_, "write failed", errno);
    }
    p += n;
    size -= static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
    if (written_ - kicked_ >= kWritebackChunk) {
      ::sync_file_range(fd_, static_cast<off_t>(kicked_), static_cast<off_t>(written_ - kicked_),
                        SYNC_FILE_RANGE_WRITE);
      kicked_ = written_;
    }
  }
}

void PosixFile::write_at(uint64_t offset, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (size > 0) {
    ssize_t n = ::pwrite(fd_, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      io_error(path_, "write failed", errno);
    }
    p += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
}

void PosixFile::start_writeback() {
  ::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);
  kicked_ = written_;
}

void PosixFile::sync() {
  if (::fsync(fd_) != 0) io_error(path_, "fsync failed", errno);
}

void PosixFile::close() {
  const int fd = std::exchange(fd_, -1);
  if (fd >= 0 && ::close(fd) != 0) io_error(path_, "close failed", errno);
}

BufferedWriter::BufferedWriter(PosixFile& file, size_t capacity)
    : file_(file), buffer_(new unsigned char[capacity]), capacity_(capacity) {}

void BufferedWriter::write(const void* data, size_t size) {
  if (used_ + size > capacity_) flush();
  if (size >= capacity_) {
    file_.write_all(data, size);
    return;
  }
  if (size > 0) std::memcpy(buffer_.get() + used_, data, size);
  used_ += size;
}

void BufferedWriter::flush() {
  file_.write_all(buffer_.get(), used_);
  used_ = 0;
}

void rename_file(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    io_error(to, "cannot rename " + from + " to it", errno);
}

void sync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) io_error(dir, "cannot open the directory to fsync it", errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) io_error(dir, "fsync of the directory failed", err);
}

}  // namespace rh::posix
