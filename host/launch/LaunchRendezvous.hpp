// The rendezvous the launcher settles before it starts a worker (step 1 of
// launch(), Launcher.hpp): the port rank 0's store listens on, picked and
// held, or checked and held, and the job id every worker gets. No LibTorch
// and no processes here.
#pragma once

#include <string>

namespace rh::launch {

struct LaunchOptions;

// A port that is free now on `addr` (an ephemeral port the kernel picked).
// Throws std::runtime_error when nothing can be bound on addr. (Free now
// only: launch() keeps the port it picks reserved, see PortReservation.)
int pick_free_port(const std::string& addr);

// A port held for rank 0's rendezvous store: a socket bound to it with
// SO_REUSEADDR and not listening, so that the kernel gives the port to no
// other socket while the store, which binds with SO_REUSEADDR, can still
// listen on it. Closed with the object.
class PortReservation {
 public:
  PortReservation() = default;
  ~PortReservation();
  PortReservation(PortReservation&& other) noexcept;
  PortReservation& operator=(PortReservation&& other) noexcept;
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;

  // A free port on `addr`, held. Throws std::runtime_error when nothing can
  // be bound on addr.
  static PortReservation free_port(const std::string& addr);
  // `port` on `addr`, held when it can be bound; `taken` is set when
  // something listens on it already (EADDRINUSE). Nothing is held, and
  // taken stays false, when addr is no address of this host or cannot be
  // resolved.
  static PortReservation given_port(const std::string& addr, int port, bool& taken);

  int port() const { return port_; }
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// What launch() starts the workers with.
struct Rendezvous {
  // The port, held while the workers run when it was picked here or given
  // and free on node 0: no other job's launcher, and no connection's local
  // end, can be given it before rank 0 listens.
  PortReservation reservation;
  int port = 0;
  std::string port_from;  // where the port came from, for the workers' log
  std::string job_id;     // the workers' RH_JOB_ID
};

// The port (options.master_port; 0: a free one picked on master_addr, held)
// and the job id (options.job_id, else RH_JOB_ID, else a random one on one
// node, else one derived from what every node's launcher is given alike).
// Throws std::invalid_argument when no free port can be bound (port 0) or,
// on node 0, when something listens on the port given already.
Rendezvous settle_rendezvous(const LaunchOptions& options);

}  // namespace rh::launch
