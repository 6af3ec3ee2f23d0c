// The built-in launcher: `runner-host --nproc-per-node N` starts N local
// workers (one per local rank) and supervises them. No LibTorch here.
//
// What launch() does, in order:
//   1. Picks MASTER_PORT when it is 0: binds an ephemeral port on master_addr
//      (single node only, as the other nodes could not know the port) and
//      keeps that socket bound, not listening, with SO_REUSEADDR, until it
//      returns: the kernel hands the port to no other socket (no other job's
//      launcher, no connection's local end), while rank 0's store, which
//      binds with SO_REUSEADDR too, can still listen on it. On node 0 a port
//      given is checked the same way: when something listens on it already
//      (another job's rendezvous store), launch() throws
//      std::invalid_argument saying the port is taken, where it came from
//      (master_port_from) and naming --master-port; otherwise it is held
//      likewise. (Where master_addr is no address of this host nothing is
//      checked: rank 0's store reports what it finds.)
//   2. Starts every worker (fork + exec of worker_argv) with, on top of the
//      launcher's own environment:
//        RANK=node_rank*nproc+r  WORLD_SIZE=nnodes*nproc  LOCAL_RANK=r
//        LOCAL_WORLD_SIZE=nproc  GROUP_RANK=node_rank  MASTER_ADDR  MASTER_PORT
//        OMP_NUM_THREADS=max(1, cores/nproc) (unless already set)  RH_LAUNCHED=1
//        RH_JOB_ID (job_id; made when empty: RH_JOB_ID of the launcher's
//          environment, else a random 64-bit id on one node, else one derived
//          from what every node's launcher is given alike: master address
//          and port, nnodes, nproc_per_node)
//        RH_MASTER_ADDR_FROM, RH_MASTER_PORT_FROM (where MASTER_ADDR and
//          MASTER_PORT came from, for the workers' log)
//      Each worker runs in its own process group, with stdin from /dev/null, and
//      with PR_SET_PDEATHSIG=SIGKILL, so that it dies if the launcher is killed
//      (even by SIGKILL).
//      With `gate` (LaunchGate.hpp), RH_LAUNCH_GATE too: local rank 0 checks
//      the job while the others wait at their start; a refusal is printed
//      once, unprefixed, the waiting ranks end without a word, and launch()
//      returns 2 (no "rank N exited" line, no SIGTERM).
//   3. Re-emits the workers' output line by line, each line prefixed
//      "[rank N] " (stdout to stdout_fd, stderr to stderr_fd). A last line with
//      no newline is emitted, with a newline added, at end of file; a line
//      longer than 64 KiB is cut into 64 KiB lines. SIGPIPE is ignored while
//      launch() runs: when a write to stdout_fd fails (EPIPE: `runner-host ...
//      | head` after head exited) the workers' further stdout is read and
//      dropped, the workers keep running, and stderr_fd gets once
//        runner-host launcher: stdout closed (Broken pipe): the workers' further stdout is dropped
//      (likewise a failed stderr_fd drops the rest of stderr and the messages).
//   4. Forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 received
//      by the launcher to every running worker (to its process group), each
//      time, and writes
//        runner-host launcher: forwarding SIGUSR1 to the workers
//      A terminating signal (all but SIGUSR1/SIGUSR2) starts the grace period
//      (once; the line says "(SIGKILL to those left after G s; Ctrl-C again to
//      kill them now)"): the workers still running kill_grace_s later are
//      SIGKILLed,
//        runner-host launcher: rank N still running after G s: SIGKILL
//      A second SIGINT (Ctrl-C twice) SIGKILLs every worker at once:
//        runner-host launcher: second SIGINT: SIGKILL to the workers
//      SIGUSR1/SIGUSR2 (SLURM's preemption warnings) only reach the workers,
//      which save a checkpoint and end on their own: the first to end non-zero
//      is a failure as in 5, except that the others, acting on the warning
//      already, get no SIGTERM (a second stop signal would end a worker at
//      once, cutting its checkpoint short), only the grace period:
//        runner-host launcher: stopping the other ranks (they were sent SIGUSR1: SIGKILL after G s)
//      A signal ignored when launch() is called (nohup) stays ignored, by the
//      launcher and by the workers. The workers have process groups of their
//      own, so a terminal's Ctrl-C reaches them once, through the launcher.
//      The workers start with the caller's dispositions of these signals and
//      of SIGCHLD and SIGPIPE (ignored stays ignored, the rest default).
//   5. When a worker exits with a non-zero code or is killed by a signal, it
//      writes to stderr_fd
//        runner-host launcher: rank N exited with code C
//        runner-host launcher: rank N killed by signal S (SIGNAME)
//        runner-host launcher: stopping the other ranks (SIGTERM, then SIGKILL after G s)
//      sends SIGTERM to the other workers, waits up to kill_grace_s, then sends
//      SIGKILL to those left (as in 4), and reaps them all. When a terminating
//      signal was forwarded already, the workers are handling it and its grace
//      period runs: no SIGTERM is added and the grace is not restarted. Only
//      the first failure is reported. A worker that cannot be executed counts
//      as failed with code 127:
//        runner-host launcher: cannot start rank N: execute PATH: REASON
//      When a worker ends, whatever is left in its process group is SIGKILLed
//      before the worker is reaped (once reaped, its group id could be reused
//      by an unrelated process group): a reaped worker's id is never signalled.
//   6. Returns the exit code to use: the first failing worker's code (128 + S
//      for a signal: 137 for a worker SIGKILLed at the end of the grace or by a
//      second SIGINT), or 0 when every worker exited with 0.
//   7. Elastic (max_restarts > 0, ElasticAgent.hpp): steps 2-6 are one
//      round. A round that ends in a failure (a worker of this node, or
//      another node's reported through the rendezvous, which stops this
//      node's workers as in 5) is followed by the next, on the world the
//      rendezvous closes it with, up to max_restarts times; the workers get
//      TORCHELASTIC_USE_AGENT_STORE=True, TORCHELASTIC_RESTART_COUNT,
//      TORCHELASTIC_MAX_RESTARTS, RH_ELASTIC_BASE_WORLD_SIZE (the first
//      round's world) and, after a failure, RH_ELASTIC_DETECTED_AT (when
//      this launcher learned of it, seconds since the epoch). A forwarded
//      stop signal ends the job without a restart.
// clang-format off
//        runner-host launcher: another node failed (node 1 (b): rank 2 exited with code 1): stopping this node's workers
//        runner-host launcher: restart 1 of 3: nodes 0 (were 0, 1), 8 rank(s); this is node 0, node rank 0 now
//        runner-host launcher: no restart left (--max-restarts 3): the job ends
// clang-format on
// Every worker is reaped before launch() returns: no zombie, no orphan.
//
// launch() installs its own handlers of the forwarded signals and SIGCHLD, and
// ignores SIGPIPE, while it runs, and restores the previous ones before it
// returns; call it from one thread at a time (it is meant to be the whole
// program's work).
//
// Where each part lives: the rendezvous of step 1 in LaunchRendezvous; the
// processes of steps 2 and 5 (fork, exec, process groups, reaping) in
// WorkerProcesses; the prefixed output of step 3 in WorkerOutput; the
// signal handling of step 4 (the self-pipe, the mask across fork) in
// LauncherSignals; what the launcher decides (forwarding, the grace period,
// the first failure, the exit code) in Launcher.cpp's Supervisor.
#pragma once

#include <string>
#include <vector>

#include "launch/ElasticAgent.hpp"
#include "launch/LaunchFlags.hpp"
#include "launch/LaunchRendezvous.hpp"  // pick_free_port, PortReservation: step 1

namespace rh::launch {

// The launcher's options: the job's shape (LaunchFlags.hpp) and the
// rendezvous as resolved from the flags, the environment and the job.
struct LaunchOptions : LaunchShape {
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: pick a free port (nnodes == 1 only)
  // Where master_addr and master_port came from, for messages and the
  // workers' log: "--master-port", "MASTER_PORT", "dist.master_port at
  // job.yaml:9:30", "the default"; "" reads as the flag.
  std::string master_addr_from;
  std::string master_port_from;
  // The workers' RH_JOB_ID; "": launch() makes one (see 2.).
  std::string job_id;
  bool gate = false;        // the launch gate (see 2.)
  double kill_grace_s = 5;  // the grace period: SIGTERM (or a forwarded signal) -> SIGKILL
  int stdout_fd = 1;        // where the workers' prefixed stdout goes
  int stderr_fd = 2;        // the workers' prefixed stderr and the launcher's messages
  // Elastic restart (ElasticAgent.hpp): after a failure, up to max_restarts
  // (LaunchShape) new rounds on the nodes left, while at least min_nodes
  // (0: nnodes) are.
  double elastic_timeout_s = 300;  // how long a round may take to close
  std::string host;                // this node's name, for messages ("" reads as "?")
};

// Runs one worker per local rank and returns the exit code to use (see above).
// Throws std::invalid_argument for bad options (nothing is started then):
// nproc_per_node < 1, nnodes < 1, node_rank outside [0, nnodes), a port outside
// [0, 65535], port 0 with nnodes > 1, an empty worker_argv, a master_addr
// where no free port can be bound (port 0), or a port given that something
// listens on already (node 0). A system failure while starting the
// workers (pipe, fork) stops those already started and returns 1; one before
// any worker is started throws std::runtime_error.
// With max_restarts > 0 the launcher restarts the workers on a new world
// after a failure (see ElasticAgent.hpp), through the agent `agents` makes;
// without a factory max_restarts > 0 is refused (std::invalid_argument).
int launch(const LaunchOptions& options, const std::vector<std::string>& worker_argv,
           const ElasticAgentFactory& agents = {});

// The CPUs this process may run on (its affinity mask; at least 1).
int available_cores();

}  // namespace rh::launch
