// The gloo backend's rendezvous: gloo's store over the run's c10d store,
// and the TCP device each rank listens on (the address from which the
// master is reached, or GLOO_SOCKET_IFNAME's interface).
#pragma once

#include <gloo/rendezvous/store.h>
#include <gloo/transport/device.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/Backends.hpp"

namespace rh::comm::detail {

// gloo's rendezvous store over the run's c10d store, keys under `prefix`.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  GlooStore(StorePtr store, std::string prefix, std::chrono::milliseconds timeout)
      : store_(std::move(store)), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(prefix_ + key, std::vector<uint8_t>(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    std::vector<uint8_t> value = store_->get(prefix_ + key);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> prefixed;
    prefixed.reserve(keys.size());
    for (const auto& k : keys) prefixed.push_back(prefix_ + k);
    store_->wait(prefixed, timeout);
  }

 private:
  StorePtr store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

// The local address from which the master is reached (what a peer on the
// master's network can connect to); the host name when that fails.
std::string local_address_towards(const std::string& master_addr, int master_port);

// The TCP device this rank listens on: GLOO_SOCKET_IFNAME's interface, or
// local_address_towards() the master. HostError naming the rank when it
// cannot listen.
std::shared_ptr<gloo::transport::Device> make_device(const RendezvousOptions& o);

}  // namespace rh::comm::detail
