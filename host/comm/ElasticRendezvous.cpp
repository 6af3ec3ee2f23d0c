#include "comm/ElasticRendezvous.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "comm/CommInternal.hpp"
#include "comm/TcpStore.hpp"

namespace rh::comm {
namespace {

using Clock = std::chrono::steady_clock;
using launch::ElasticWorld;
using launch::kLostAfterS;

constexpr double kBeatS = 0.5;    // a launcher's heartbeat period
constexpr double kRequestS = 10;  // the longest one request to the store may take
constexpr double kPollS = 0.1;    // how often a waiting node looks again

using detail::bytes_of;
using detail::text_of;
std::chrono::milliseconds ms(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

std::string nodes_text(const std::vector<int>& nodes) {
  std::string out;
  for (size_t i = 0; i < nodes.size(); ++i) out += (i ? "," : "") + std::to_string(nodes[i]);
  return out;
}

std::vector<int> parse_nodes(const std::string& text) {
  std::vector<int> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(std::stoi(text.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

class StoreAgent final : public launch::ElasticAgent {
 public:
  explicit StoreAgent(const launch::ElasticAgentOptions& o) : o_(o) {
    at_ = o.master_addr + ":" + std::to_string(o.port);
    try {
      c10d::TCPStoreOptions opts;
      opts.port = static_cast<std::uint16_t>(o.port);
      opts.isServer = o.node_rank == 0;
      opts.waitWorkers = false;
      opts.timeout = ms(o.timeout_s);  // connecting: node 0 may start later
      // Each request fails once the store has been silent for kRequestS
      // (make_tcp_store bounds the client's socket on every LibTorch).
      auto tcp = make_tcp_store(o.master_addr, opts, nullptr, ms(kRequestS));
      port_ = tcp->getPort();
      at_ = o.master_addr + ":" + std::to_string(port_);
      store_ =
          c10::make_intrusive<c10d::PrefixStore>("runner-host/elastic/" + o.job_id, std::move(tcp));
      // From here on a get or wait waits kRequestS at most.
      store_->setTimeout(ms(kRequestS));
      store_->set(beat_key(o.node_rank), bytes_of("0"));
      store_->get(beat_key(o.node_rank));
    } catch (const std::exception& e) {
      throw std::runtime_error(o.node_rank == 0
                                   ? "cannot host the elastic rendezvous store on " + at_ + ": " +
                                         detail::what_of(e)
                                   : "cannot reach the elastic rendezvous store at " + at_ +
                                         " (node 0's launcher hosts it): " + detail::what_of(e));
    }
    beats_ = std::thread([this] { beat(); });
  }

  ~StoreAgent() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    beats_.join();
  }

  ElasticWorld join(int round) override {
    const std::string r = "round/" + std::to_string(round) + "/";
    request("join round " + std::to_string(round),
            [&] { store_->set(r + "join/" + std::to_string(o_.node_rank), bytes_of(o_.host)); });
    const std::vector<int> previous = round == 0 ? all_nodes() : last_.nodes;
    if (o_.node_rank == 0) close_round(round, previous);
    const auto deadline = Clock::now() + ms(o_.timeout_s + kLostAfterS + kRequestS);
    std::string nodes;
    while (true) {
      bool closed = false;
      request("wait for round " + std::to_string(round), [&] {
        closed = store_->check({r + "nodes"});
        if (closed) nodes = text_of(store_->get(r + "nodes"));
      });
      if (closed) break;
      if (Clock::now() > deadline)
        throw std::runtime_error("round " + std::to_string(round) +
                                 " of the elastic rendezvous at " + at_ + " did not close within " +
                                 detail::format_seconds(o_.timeout_s) + " s (node 0 closes it)");
      std::this_thread::sleep_for(ms(kPollS));
    }
    if (!nodes.empty() && nodes[0] == '!') throw std::runtime_error(nodes.substr(1));
    ElasticWorld w;
    w.nodes = parse_nodes(nodes);
    const auto me = std::find(w.nodes.begin(), w.nodes.end(), o_.node_rank);
    if (me == w.nodes.end())
      throw std::runtime_error("round " + std::to_string(round) + " closed without node " +
                               std::to_string(o_.node_rank) + " (it was late): the job went on " +
                               "with nodes " + nodes);
    w.node_rank = static_cast<int>(me - w.nodes.begin());
    last_ = w;
    return w;
  }

  std::optional<std::string> failure(int round) override {
    const std::string key = "round/" + std::to_string(round) + "/failure";
    std::optional<std::string> out;
    request("look for failures", [&] {
      if (store_->check({key})) out = text_of(store_->get(key));
    });
    return out;
  }

  void report_failure(int round, const std::string& what) override {
    const std::string key = "round/" + std::to_string(round) + "/failure";
    request("report a failure", [&] {
      // The first report stays: compare-and-set against "no value".
      store_->compareSet(key, {}, bytes_of(what));
    });
  }

 private:
  static std::string beat_key(int node) { return "beat/" + std::to_string(node); }

  std::vector<int> all_nodes() const {
    std::vector<int> v;
    for (int n = 0; n < o_.nnodes; ++n) v.push_back(n);
    return v;
  }

  // Runs one request; a store that fails it is lost.
  template <typename F>
  void request(const std::string& what, F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      throw std::runtime_error(
          "elastic rendezvous: cannot " + what + ": the store at " + at_ +
          (o_.node_rank == 0 ? std::string(" (this launcher's)")
                             : " does not answer: node 0, whose launcher holds it, is lost (the "
                               "job cannot go on without node 0)") +
          ": " + detail::what_of(e));
    }
  }

  // Node 0: waits until every node of the previous round joined `round` or
  // stopped beating, then publishes the round's nodes (or why it cannot go
  // on). A node of round 0 that never beat is waited for up to timeout_s.
  void close_round(int round, const std::vector<int>& previous) {
    const std::string r = "round/" + std::to_string(round) + "/";
    struct Seen {
      std::string beat;
      Clock::time_point changed;
      bool ever = false;
    };
    std::map<int, Seen> seen;
    const auto start = Clock::now();
    for (int n : previous) seen[n] = {"", start, false};
    std::vector<int> joined, lost;
    while (true) {
      joined.clear();
      lost.clear();
      const auto now = Clock::now();
      request("close round " + std::to_string(round), [&] {
        for (int n : previous) {
          if (store_->check({r + "join/" + std::to_string(n)})) {
            joined.push_back(n);
            continue;
          }
          Seen& s = seen[n];
          if (store_->check({beat_key(n)})) {
            const std::string b = text_of(store_->get(beat_key(n)));
            if (b != s.beat) s = {b, now, true};
          }
          // A node that beat before, or any node after round 0: its beat
          // standing still for kLostAfterS means it is gone.
          if ((s.ever || round > 0) && now - s.changed > ms(kLostAfterS)) lost.push_back(n);
        }
      });
      if (joined.size() + lost.size() == previous.size()) break;
      if (now - start > ms(o_.timeout_s)) break;
      std::this_thread::sleep_for(ms(kPollS));
    }
    std::sort(joined.begin(), joined.end());
    std::string value = nodes_text(joined);
    if (static_cast<int>(joined.size()) < o_.min_nodes) {
      std::string why = "round " + std::to_string(round) + " of the elastic rendezvous has " +
                        std::to_string(joined.size()) + " node(s) (" + nodes_text(joined) +
                        "), fewer than --min-nodes " + std::to_string(o_.min_nodes);
      if (!lost.empty()) why += "; lost: node(s) " + nodes_text(lost);
      value = "!" + why + ": the job ends";
    }
    request("close round " + std::to_string(round),
            [&] { store_->set(r + "nodes", bytes_of(value)); });
  }

  // The heartbeat, over a connection of its own (a round's close must not
  // wait behind a beat, nor a beat behind the close).
  void beat() {
    c10::intrusive_ptr<c10d::Store> store;
    long long n = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      lock.unlock();
      try {
        if (!store) {
          c10d::TCPStoreOptions opts;
          opts.port = static_cast<std::uint16_t>(port_);
          opts.isServer = false;
          opts.waitWorkers = false;
          opts.timeout = ms(kRequestS);
          store = c10::make_intrusive<c10d::PrefixStore>("runner-host/elastic/" + o_.job_id,
                                                         make_tcp_store(o_.master_addr, opts));
        }
        store->set(beat_key(o_.node_rank), bytes_of(std::to_string(++n)));
      } catch (const std::exception&) {
        store.reset();  // the store is gone: the main thread's requests say so
      }
      lock.lock();
      wake_.wait_for(lock, std::chrono::duration<double>(kBeatS), [this] { return stop_; });
    }
  }

  launch::ElasticAgentOptions o_;
  std::string at_;
  int port_ = 0;
  c10::intrusive_ptr<c10d::Store> store_;
  ElasticWorld last_;
  std::thread beats_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
};

}  // namespace

std::unique_ptr<launch::ElasticAgent> make_elastic_agent(const launch::ElasticAgentOptions& o) {
  return std::make_unique<StoreAgent>(o);
}

}  // namespace rh::comm
