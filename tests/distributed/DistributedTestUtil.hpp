// Helpers of the distributed tests (through the runner-host binary): a free
// loopback port for a rendezvous, and the float32 tensors of a safetensors
// checkpoint file.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/TestUtil.hpp"

namespace rh::test {

inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// The safetensors header (JSON is YAML).
inline YAML::Node safetensors_header(const std::string& bytes, uint64_t& header_size) {
  std::memcpy(&header_size, bytes.data(), 8);
  return YAML::Load(bytes.substr(8, header_size));
}

// The float32 tensors of a safetensors file, by name.
inline std::map<std::string, std::vector<float>> read_safetensors(const std::filesystem::path& p) {
  std::string bytes = read_file(p);
  uint64_t n = 0;
  YAML::Node header = safetensors_header(bytes, n);
  std::map<std::string, std::vector<float>> out;
  for (const auto& kv : header) {
    const std::string name = kv.first.as<std::string>();
    if (name == "__metadata__" || kv.second["dtype"].as<std::string>() != "F32") continue;
    const size_t begin = kv.second["data_offsets"][0].as<size_t>(),
                 end = kv.second["data_offsets"][1].as<size_t>();
    std::vector<float> v((end - begin) / 4);
    std::memcpy(v.data(), bytes.data() + 8 + n + begin, end - begin);
    out[name] = std::move(v);
  }
  return out;
}

}  // namespace rh::test
