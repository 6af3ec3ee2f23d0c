#include "data/DataFiles.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace rh::data {

namespace fs = std::filesystem;

FileKey FileKey::of(const config::Node& node) {
  return FileKey{node.location(), node.path(), node.is_scalar() ? node.scalar() : std::string()};
}

std::string resolve_data_path(const std::string& path, const std::string& job_dir) {
  const fs::path p(path);
  if (p.is_absolute() || job_dir.empty()) return p.lexically_normal().string();
  return (fs::path(job_dir) / p).lexically_normal().string();
}

void throw_data_error(const FileKey& key, const std::string& message) {
  throw config::ConfigError(key.where, key.key_path, message);
}

std::string in_quotes(const std::string& text) { return "'" + text + "'"; }

void throw_unreadable(const std::string& file, const std::string& what, const FileKey& key,
                      int err) {
  std::string message =
      "cannot read the " + what + " " + in_quotes(file) + ": " + std::strerror(err);
  if (!key.written.empty() && fs::path(key.written).is_relative()) {
    message += " (relative paths are resolved against the job directory)";
  }
  std::error_code ec;
  if (fs::exists(file + ".gz", ec)) {
    message += "; found " + in_quotes(file + ".gz") + ": decompress it with gunzip";
  }
  throw_data_error(key, message);
}

std::vector<uint8_t> read_data_file(const std::string& file, const std::string& what,
                                    const FileKey& key) {
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  errno = 0;
  std::ifstream in;
  if (fs::exists(status) && !fs::is_directory(status)) in.open(file, std::ios::binary);
  if (!in.is_open()) {
    throw_unreadable(file, what, key,
                     !fs::exists(status)        ? ENOENT
                     : fs::is_directory(status) ? EISDIR
                     : errno != 0               ? errno
                                                : EACCES);
  }
  std::vector<uint8_t> bytes;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size > 0) {
    bytes.resize(static_cast<size_t>(size));
    in.read(reinterpret_cast<char*>(bytes.data()), size);
  }
  if (!in)
    throw_data_error(key, "cannot read the " + what + " " + in_quotes(file) + ": read error");
  return bytes;
}

MappedFile::MappedFile(const std::string& file, const std::string& what, const FileKey& key) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_unreadable(file, what, key, errno);
  struct stat st {};
  const int err = ::fstat(fd, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
  if (err != 0) {
    ::close(fd);
    throw_unreadable(file, what, key, err);
  }
  size_ = static_cast<size_t>(st.st_size);
  void* p = size_ > 0 ? ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  const int map_err = errno;
  ::close(fd);
  if (p == MAP_FAILED)
    throw_data_error(
        key, "cannot map the " + what + " " + in_quotes(file) + ": " + std::strerror(map_err));
  data_ = static_cast<const uint8_t*>(p);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace rh::data
