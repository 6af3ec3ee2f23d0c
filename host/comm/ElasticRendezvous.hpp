// The elastic rendezvous of the launchers (launch/ElasticAgent.hpp says what
// it agrees on and when) over c10d's TCPStore: node 0's launcher hosts the
// store on the master port, as torchrun's agent does, and the workers of
// every round use it too (TORCHELASTIC_USE_AGENT_STORE, each round's keys
// under /worker/attempt_<round>).
//
// Keys, under runner-host/elastic/<job id>/:
//   beat/<node>           a counter each launcher bumps every kBeatS, over a
//                         connection of its own (a thread): how node 0 tells
//                         a lost node from a slow one
//   round/<r>/join/<node> the node's host name: it is ready for round r
//   round/<r>/nodes       "0,2": round r's nodes in node-rank order, set by
//                         node 0 when it closes the round; "!<why>" when the
//                         round cannot go on (fewer than --min-nodes)
//   round/<r>/failure     "node 1 (sim-b): rank 2 exited with code 1": the
//                         first failure of round r a node reported
// Every request waits at most kRequestS: a store that does not answer within
// it (node 0 lost, or its link down) is taken as lost.
#pragma once

#include <memory>

#include "launch/ElasticAgent.hpp"

namespace rh::comm {

// Node 0 (options.node_rank == 0) hosts the store on options.port (0: a free
// port); the others connect to it, for up to options.timeout_s. Throws
// std::runtime_error naming the address when that fails.
std::unique_ptr<launch::ElasticAgent> make_elastic_agent(
    const launch::ElasticAgentOptions& options);

}  // namespace rh::comm
