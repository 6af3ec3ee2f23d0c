#include "comm/Heartbeat.hpp"

#include <algorithm>
#include <chrono>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "abi/HostError.hpp"
#include "comm/CommInternal.hpp"
#include "comm/TcpStore.hpp"

namespace rh::comm::detail {

struct Heartbeat::Impl {
  c10::intrusive_ptr<c10d::Store> store;
};

Heartbeat::Heartbeat(const RendezvousOptions& o)
    : impl_(std::make_unique<Impl>()),
      rank_(o.rank),
      world_size_(o.world_size),
      period_s_(std::clamp(o.timeout_s / 10.0, 0.2, 1.0)),
      store_at_(o.master_addr + ":" + std::to_string(o.master_port)) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(o.master_port);
  opts.isServer = false;
  opts.waitWorkers = false;
  // Short: after a failure a store that does not answer within it is taken
  // as lost (every rank joined it already, so connecting is quick).
  opts.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::min(o.timeout_s, 5.0) * 1000));
  c10::intrusive_ptr<c10d::Store> store = make_tcp_store(o.master_addr, opts);
  if (!o.store_prefix.empty())
    store = c10::make_intrusive<c10d::PrefixStore>(o.store_prefix, std::move(store));
  if (!o.job_id.empty())
    store = c10::make_intrusive<c10d::PrefixStore>("runner-host/job/" + o.job_id + "/rh",
                                                   std::move(store));
  impl_->store = store;
  store->set("host/" + std::to_string(rank_), bytes_of(this_host()));
  store->set("heartbeat/" + std::to_string(rank_), bytes_of("0"));
  std::vector<std::string> keys;
  for (int r = 0; r < world_size_; ++r) keys.push_back("host/" + std::to_string(r));
  store->wait(keys);
  for (const std::string& k : keys) hosts_.push_back(text_of(store->get(k)));
  // The beats go through a connection of their own: a collective's failure
  // handling (explain_loss) must not wait behind a beat, nor a beat behind it.
  thread_ = std::thread([this] { run(); });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Heartbeat::run() {
  long long beat = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    lock.unlock();
    try {
      std::lock_guard<std::mutex> store_lock(store_mutex_);
      impl_->store->set("heartbeat/" + std::to_string(rank_), bytes_of(std::to_string(++beat)));
    } catch (const std::exception&) {
      // The store is gone (its host was lost): explain_loss says so.
    }
    lock.lock();
    wake_.wait_for(lock, std::chrono::duration<double>(period_s_), [this] { return stop_; });
  }
}

std::vector<long long> Heartbeat::read_all() {
  std::lock_guard<std::mutex> lock(store_mutex_);
  std::vector<long long> out;
  for (int r = 0; r < world_size_; ++r)
    out.push_back(std::stoll(text_of(impl_->store->get("heartbeat/" + std::to_string(r)))));
  return out;
}

std::string Heartbeat::explain_loss() {
  // The host holding the store, and its ranks: when it cannot be reached.
  auto store_lost = [&] {
    std::vector<int> there;
    for (int r = 0; r < world_size_; ++r)
      if (hosts_[static_cast<size_t>(r)] == hosts_[0]) there.push_back(r);
    return "the rendezvous store at " + store_at_ + " cannot be reached: lost host " + hosts_[0] +
           " (rank 0's, which holds the store; its ranks " + rank_list(there) + ")";
  };
  std::vector<long long> before, after;
  const double wait_s = 2.5 * period_s_;
  try {
    before = read_all();
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    after = read_all();
  } catch (const std::exception&) {
    return store_lost();
  }
  // The stopped ranks, by host, in the order the hosts first appear.
  std::vector<std::string> order;
  std::map<std::string, std::vector<int>> stopped;
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_ || after[static_cast<size_t>(r)] != before[static_cast<size_t>(r)]) continue;
    const std::string& h = hosts_[static_cast<size_t>(r)];
    if (stopped.count(h) == 0) order.push_back(h);
    stopped[h].push_back(r);
  }
  if (order.empty()) return "";
  std::string out;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", wait_s);
  for (const std::string& h : order) {
    std::vector<int> all;
    for (int r = 0; r < world_size_; ++r)
      if (hosts_[static_cast<size_t>(r)] == h) all.push_back(r);
    const std::vector<int>& gone = stopped[h];
    out += (out.empty() ? "" : "; ") +
           (gone.size() == all.size() ? "lost host " + h + ": its ranks " + rank_list(gone)
                                      : "on host " + h + ": rank(s) " + rank_list(gone)) +
           " stopped (no heartbeat for " + secs + " s)";
  }
  return out;
}

}  // namespace rh::comm::detail
