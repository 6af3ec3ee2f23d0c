#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "FuzzEntries.hpp"

namespace rh::fuzz {

const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/rh-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("fuzz: cannot create a directory from " + pattern);
    // libFuzzer runs millions of inputs in one process: one directory, reused.
    static const std::string created = pattern;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(created, ec);
    });
    return pattern;
  }();
  return dir;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) throw std::runtime_error("fuzz: cannot write " + path);
}

}  // namespace rh::fuzz
