// Elastic restart (`--max-restarts N`, `--min-nodes M`): what the launcher
// needs from the rendezvous that lets the surviving nodes agree on a new
// world after one is lost. The launcher (Launcher.cpp) holds the loop:
// start the workers on round r's world, supervise them, and when a worker
// fails here or another node asks for a restart, stop them and join round
// r+1. The rendezvous itself is a store (comm/ElasticRendezvous.hpp hosts
// it on node 0's launcher, over c10d's TCPStore): this header keeps the
// launcher free of LibTorch.
//
// Rounds. Every node joins round 0 (the first start); when a round ends in
// a failure, each surviving launcher joins the next. Node 0's launcher,
// which hosts the store, closes a round once every node of the previous
// round has either joined or stopped beating (each launcher writes a
// heartbeat to the store; one silent for kLostAfterS is lost), and
// publishes the round's nodes in node-rank order: node 0 first, the others
// in the order of their first-round node ranks. A round with fewer than
// --min-nodes nodes ends the job on every node that joined it. A node that
// comes after a round closed is told the job went on without it.
//
// Limit (as torchrun's c10d rendezvous backend): the store lives in node
// 0's launcher, so the loss of node 0 ends the job; any other node may be
// lost, --max-restarts times.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rh::launch {

// Seconds after which a launcher whose heartbeat stood still is taken as lost.
constexpr double kLostAfterS = 3.0;

// One round's world, as node 0 closed it.
struct ElasticWorld {
  int node_rank = 0;       // this node's rank in the round
  std::vector<int> nodes;  // the round's nodes, by their first-round node rank, in node-rank order
  int nnodes() const { return static_cast<int>(nodes.size()); }
};

class ElasticAgent {
 public:
  virtual ~ElasticAgent() = default;
  // Joins `round` and blocks until node 0 closes it. Throws
  // std::runtime_error saying why this node cannot go on: the round has
  // fewer than --min-nodes nodes, it closed without this node, the store
  // (node 0) cannot be reached, or it did not close within the timeout.
  virtual ElasticWorld join(int round) = 0;
  // A failure some node reported in `round` ("node 1 (sim-b): rank 2 exited
  // with code 1"), nullopt while there is none. Throws std::runtime_error
  // when the store cannot be reached.
  virtual std::optional<std::string> failure(int round) = 0;
  // Reports this node's failure in `round`, so that every node stops its
  // workers and joins the next. Throws std::runtime_error when the store
  // cannot be reached.
  virtual void report_failure(int round, const std::string& what) = 0;
};

struct ElasticAgentOptions {
  std::string master_addr;
  int port = 0;       // node 0: 0 picks a free one (one node only)
  int node_rank = 0;  // the first round's, which names the node throughout
  int nnodes = 1;     // the first round's
  int min_nodes = 1;
  std::string job_id;      // every key of the job carries it
  double timeout_s = 300;  // how long a round may take to close
  std::string host;        // this node's host name, for messages
};
using ElasticAgentFactory =
    std::function<std::unique_ptr<ElasticAgent>(const ElasticAgentOptions&)>;

}  // namespace rh::launch
