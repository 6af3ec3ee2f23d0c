#include "data/DataFiles.hpp"

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

std::vector<uint8_t> read_data_file(const std::string& file, const std::string& what,
                                    const FileKey& key) {
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  errno = 0;
  std::ifstream in;
  if (fs::exists(status) && !fs::is_directory(status)) in.open(file, std::ios::binary);
  if (!in.is_open()) {
    const int err = !fs::exists(status)        ? ENOENT
                    : fs::is_directory(status) ? EISDIR
                    : errno != 0               ? errno
                                               : EACCES;
    std::string message =
        "cannot read the " + what + " " + in_quotes(file) + ": " + std::strerror(err);
    if (!key.written.empty() && fs::path(key.written).is_relative()) {
      message += " (relative paths are resolved against the job directory)";
    }
    if (fs::exists(file + ".gz", ec)) {
      message += "; found " + in_quotes(file + ".gz") + ": decompress it with gunzip";
    }
    throw_data_error(key, message);
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

}  // namespace rh::data
