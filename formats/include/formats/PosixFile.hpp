// Files through POSIX calls, with the error handling checkpoints need: every
// failure is an rh::Exception naming the path, the operation and errno's
// text; short reads and writes are retried; fsync is explicit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace rh::posix {

// What identifies a file's content without reading it: a file replaced,
// rewritten or touched gets another inode, size, mtime or ctime.
struct FileIdentity {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileIdentity& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns &&
           ctime_ns == o.ctime_ns;
  }
};

class PosixFile {
 public:
  // RH_ERROR_NOT_FOUND when the file does not exist, else RH_ERROR_IO.
  static PosixFile open_read(const std::string& path);
  // Creates or truncates `path` for writing (mode 0644).
  static PosixFile create(const std::string& path);

  PosixFile(PosixFile&& other) noexcept;
  PosixFile& operator=(PosixFile&& other) noexcept;
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;
  ~PosixFile();  // closes without reporting errors; call close() to see them

  const std::string& path() const { return path_; }
  uint64_t size() const;
  FileIdentity identity() const;
  // Reads exactly `size` bytes at `offset`; a file that ends early is
  // RH_ERROR_DATA_LOSS ("changed while being read").
  void read_at(uint64_t offset, void* data, size_t size) const;
  void write_all(const void* data, size_t size);
  // Writes exactly `size` bytes at `offset` (pwrite; the file position stays).
  void write_at(uint64_t offset, const void* data, size_t size);
  // Hands every dirty page of the file to the disk now (sync_file_range
  // WRITE, best effort; durable only after sync()): the files of one Flush
  // get their blocks allocated and their data on the way before the first
  // fsync, so that one journal commit serves them all instead of one each.
  void start_writeback();
  void sync();
  void close();

 private:
  PosixFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  static constexpr size_t kWritebackChunk = size_t{16} << 20;
  int fd_ = -1;
  std::string path_;
  uint64_t written_ = 0;  // by write_all, from the start
  uint64_t kicked_ = 0;   // handed to the disk so far (sync_file_range)
};

// Collects small writes into one buffer; large ones go straight through.
// The buffer is left uninitialised: zero-filling a 1 MiB buffer for every
// file was most of a small checkpoint's CPU time, and evicted the training
// loop's working set from the caches.
class BufferedWriter {
 public:
  explicit BufferedWriter(PosixFile& file, size_t capacity = size_t{1} << 20);
  void write(const void* data, size_t size);
  void flush();

 private:
  PosixFile& file_;
  std::unique_ptr<unsigned char[]> buffer_;
  size_t capacity_;
  size_t used_ = 0;
};

// rename(2): replaces `to` atomically.
void rename_file(const std::string& from, const std::string& to);
// Makes a rename inside `dir` durable.
void sync_directory(const std::string& dir);

}  // namespace rh::posix
