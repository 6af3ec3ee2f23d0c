#include "launch/LaunchFlags.hpp"

#include <stdexcept>

namespace rh::launch {

const std::vector<LauncherFlagSpec>& launcher_flag_specs() {
  static const std::vector<LauncherFlagSpec> kSpecs = {
      {"nproc-per-node", "N",
       "start N worker processes on this node, one per local rank (default 1)",
       +[](LauncherFlags& f) -> int& { return f.nproc_per_node; }},
      {"nnodes", "N", "the number of nodes (default 1)",
       +[](LauncherFlags& f) -> int& { return f.nnodes; }},
      {"node-rank", "R", "this node's rank, 0 to nnodes-1 (default 0)",
       +[](LauncherFlags& f) -> int& { return f.node_rank; }},
      {"master-addr", "ADDR",
       "the address of rank 0's node (default: MASTER_ADDR, else the job's dist.master_addr, "
       "else 127.0.0.1)",
       +[](LauncherFlags& f) -> std::optional<std::string>& { return f.master_addr; }},
      {"master-port", "PORT",
       "the rendezvous port on the master (default: MASTER_PORT, else the job's "
       "dist.master_port, else a free one on one node and 29500 on several; 0 picks a free one, "
       "single node only)",
       +[](LauncherFlags& f) -> std::optional<int>& { return f.master_port; }},
      {"max-restarts", "N",
       "elastic: after a failure (a node lost, a worker failed) restart the workers up to N "
       "times on the nodes left, resuming from the newest valid checkpoint (default 0)",
       +[](LauncherFlags& f) -> int& { return f.max_restarts; }},
      {"min-nodes", "M",
       "elastic: go on while at least M nodes are left (default: --nnodes; needs --max-restarts)",
       +[](LauncherFlags& f) -> int& { return f.min_nodes; }},
  };
  return kSpecs;
}

void check_launch_shape(const LaunchShape& f) {
  auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
  if (f.nproc_per_node < 1)
    bad("--nproc-per-node: expected 1 or more, got " + std::to_string(f.nproc_per_node));
  if (f.nnodes < 1) bad("--nnodes: expected 1 or more, got " + std::to_string(f.nnodes));
  if (f.node_rank < 0 || f.node_rank >= f.nnodes)
    bad("--node-rank: expected 0 to " + std::to_string(f.nnodes - 1) + " (--nnodes " +
        std::to_string(f.nnodes) + "), got " + std::to_string(f.node_rank));
  if (f.max_restarts < 0)
    bad("--max-restarts: expected 0 or more, got " + std::to_string(f.max_restarts));
  if (f.min_nodes < 0 || f.min_nodes > f.nnodes)
    bad("--min-nodes: expected 1 to --nnodes " + std::to_string(f.nnodes) + ", got " +
        std::to_string(f.min_nodes));
  if (f.min_nodes > 0 && f.max_restarts == 0)
    bad("--min-nodes " + std::to_string(f.min_nodes) +
        " needs --max-restarts: without restarts a lost node ends the job whatever the minimum");
}

void check_master(const std::optional<std::string>& addr, const std::optional<int>& port,
                  int nnodes, const std::string& port_from) {
  auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
  if (port && (*port < 0 || *port > 65535))
    bad("--master-port: expected 0 to 65535, got " + std::to_string(*port));
  if (port == 0 && nnodes > 1)
    bad(port_from +
        " 0 (pick a free port) needs --nnodes 1: every node must be given the same "
        "port");
  if (addr && addr->empty()) bad("--master-addr: empty");
}

void check_launcher_flags(const LauncherFlags& f) {
  check_launch_shape(f);
  check_master(f.master_addr, f.master_port, f.nnodes, "--master-port");
}

}  // namespace rh::launch
