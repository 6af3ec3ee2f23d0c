// Reading a dataset's files: resolving paths against the job directory and
// turning every failure into a ConfigError that names the config key, the
// resolved file and a hint. Shared by the file-backed datasets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/ConfigNode.hpp"

namespace rh::data {

// The config key a dataset's file came from (`path:` or `root:`), for errors.
// Empty when a dataset is built directly (tests, tools): errors then name the
// file only.
struct FileKey {
  config::Location where;  // the key's value in the YAML
  std::string key_path;    // "data.train.dataset.path"
  std::string written;     // the path as written in the config ("data/tiny.txt")

  // The key of `node` (a scalar path value), with its text.
  static FileKey of(const config::Node& node);
};

// `path` itself when absolute, else `job_dir`/`path`, lexically normalised.
std::string resolve_data_path(const std::string& path, const std::string& job_dir);

// Throws ConfigError(key.where, key.key_path, message).
[[noreturn]] void throw_data_error(const FileKey& key, const std::string& message);

// The whole file. A file that cannot be read throws
//   <where>: <key>: cannot read the <what> '/abs/file': No such file or directory
// followed by a hint when `key.written` is relative (what it was resolved against)
// and when a compressed copy (<file>.gz) lies beside it.
std::vector<uint8_t> read_data_file(const std::string& file, const std::string& what,
                                    const FileKey& key);

// Throws read_data_file's error for a file that cannot be read (errno `err`).
[[noreturn]] void throw_unreadable(const std::string& file, const std::string& what,
                                   const FileKey& key, int err);

// A whole file mapped read-only (nothing is read until a page is touched),
// unmapped when destroyed; errors as read_data_file's. An empty file maps
// to no bytes.
class MappedFile {
 public:
  MappedFile(const std::string& file, const std::string& what, const FileKey& key);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// 'text' in single quotes, for messages.
std::string in_quotes(const std::string& text);

}  // namespace rh::data
