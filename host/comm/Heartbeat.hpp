// Every rank's pulse in the rendezvous store, so that a collective that
// fails can say which ranks stopped, and on which host. Gloo's TCP errors
// name no peer ("Connection closed by peer", "Timed out waiting 10000ms for
// recv"): with more than 2 ranks, or a whole host lost, the message could
// not say who. Each rank writes a counter under "heartbeat/<rank>" every
// period from a thread of its own, over a connection of its own to the store
// (the collectives' connections are the collectives'); at start every rank
// also publishes its host name and reads every other's. After a failure,
// explain_loss() reads the counters twice, some periods apart: a rank whose
// counter stood still has stopped. When the store itself cannot be reached,
// the host that holds it (rank 0's, or the agent's) is the lost one.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/Communicator.hpp"

namespace rh::comm::detail {

class Heartbeat {
 public:
  // Connects, publishes this rank's host, waits (up to the job's timeout)
  // for every rank's, and starts beating. Throws HostError when the store
  // cannot be reached.
  explicit Heartbeat(const RendezvousOptions& o);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // After a collective failed: "lost host sim-b (node 1): ranks 2, 3 stopped
  // (no heartbeat for 2.5 s)", or the store's host when the store cannot be
  // reached; "" when every rank still beats (the cause is elsewhere). Blocks
  // for about 2.5 periods.
  std::string explain_loss();

  // The seconds between two beats: a tenth of the job's timeout, within
  // [0.2, 1].
  double period_s() const { return period_s_; }

 private:
  struct Impl;
  void run();
  // Each rank's counter now; throws when the store cannot be reached.
  std::vector<long long> read_all();

  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int world_size_ = 1;
  double period_s_ = 1;
  std::string store_at_;            // "addr:port"
  std::vector<std::string> hosts_;  // by rank
  // One connection, used by the beating thread and by explain_loss (a
  // collective's thread): one request at a time on it.
  std::mutex store_mutex_;
  std::mutex mutex_;  // stop_
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace rh::comm::detail
