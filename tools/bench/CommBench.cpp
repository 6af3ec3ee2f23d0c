// Communicator benchmark: forks N ranks (default 2) that join a gloo world on
// 127.0.0.1 and time all_reduce, reduce_scatter and all_gather of float32
// buffers of 1, 2, 4, ... 256 MiB (the all_reduce buffer, the reduce_scatter
// input, the all_gather output). Each time is the slowest rank's, the median
// of --reps runs after one warm-up. all_reduce is timed twice: over TCP (the
// gloo ring, as between hosts) and through shared memory (what ranks of one
// host use, ShmAllReduce.hpp). The rs/ar column is reduce_scatter time over
// the TCP all_reduce time: a bandwidth-optimal reduce-scatter moves half of
// what a ring all-reduce moves, so theory says about 0.5.
//
//   rh_bench_comm [--ranks N] [--max-mib M] [--reps R] [--backend gloo]
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "comm/Communicator.hpp"

namespace {

using rh::comm::Buffer;
using rh::comm::Communicator;
using rh::comm::ReduceOp;

struct Options {
  int ranks = 2;
  int max_mib = 256;
  int reps = 5;
  std::string backend = "gloo";
};

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 29500;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

Buffer floats(std::vector<float>& v, size_t count) {
  return Buffer{v.data(), count, DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0}};
}

// Seconds of the slowest rank for one run of `op`, ranks started together.
template <class Op>
double timed(Communicator& world, Op&& op) {
  world.barrier();
  auto start = std::chrono::steady_clock::now();
  op();
  std::vector<double> t{
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  Buffer b{t.data(), 1, DLDataType{kDLFloat, 64, 1}, DLDevice{kDLCPU, 0}};
  world.all_reduce(b, ReduceOp::Max, false);
  return t[0];
}

template <class Op>
double median_time(Communicator& world, int reps, Op&& op) {
  timed(world, op);  // warm-up
  std::vector<double> runs;
  for (int i = 0; i < reps; ++i) runs.push_back(timed(world, op));
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

int run_rank(const Options& opt, int rank, int port, int shm_port) {
  rh::comm::RendezvousOptions o;
  o.master_port = port;
  o.rank = rank;
  o.world_size = opt.ranks;
  o.timeout_s = 120;
  o.backend = opt.backend;
  o.shared_memory = false;
  auto world = rh::comm::create_world(o);  // over TCP
  o.master_port = shm_port;
  o.shared_memory = true;
  auto shm_world = rh::comm::create_world(o);
  const size_t P = static_cast<size_t>(opt.ranks);
  const size_t max_count = (size_t{1} << 20) * static_cast<size_t>(opt.max_mib) / sizeof(float);
  std::vector<float> a(max_count, 1.0f / static_cast<float>(P));
  std::vector<float> b(max_count, 1.0f);
  if (rank == 0) {
    std::printf(
        "communicator benchmark: backend %s, %d ranks on 127.0.0.1, float32, median of %d\n",
        opt.backend.c_str(), opt.ranks, opt.reps);
    std::printf("all_reduce through %s next to it; rs/ar against the TCP all_reduce\n",
                shm_world->all_reduce_transport().c_str());
    std::printf("%9s %14s %14s %14s %8s %12s %14s %8s\n", "size MiB", "all_reduce ms",
                "reduce_scat ms", "all_gather ms", "rs/ar", "ar algo GB/s", "ar shm ms", "shm/tcp");
    std::fflush(stdout);
  }
  for (int mib = 1; mib <= opt.max_mib; mib *= 2) {
    const size_t count = (size_t{1} << 20) * static_cast<size_t>(mib) / sizeof(float);
    const size_t part = count / P;
    double ar = median_time(*world, opt.reps,
                            [&] { world->all_reduce(floats(a, count), ReduceOp::Sum, false); });
    double rs = median_time(*world, opt.reps, [&] {
      world->reduce_scatter(floats(a, part * P), floats(b, part), ReduceOp::Sum, false);
    });
    double ag = median_time(
        *world, opt.reps, [&] { world->all_gather(floats(b, part), floats(a, part * P), false); });
    double shm = median_time(*shm_world, opt.reps, [&] {
      shm_world->all_reduce(floats(a, count), ReduceOp::Sum, false);
    });
    if (rank == 0) {
      std::printf("%9d %14.3f %14.3f %14.3f %8.3f %12.2f %14.3f %8.3f\n", mib, ar * 1e3, rs * 1e3,
                  ag * 1e3, rs / ar, static_cast<double>(count * sizeof(float)) / ar / 1e9,
                  shm * 1e3, shm / ar);
      std::fflush(stdout);
    }
  }
  world->barrier();
  shm_world->barrier();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--ranks")
      opt.ranks = std::atoi(next().c_str());
    else if (arg == "--max-mib")
      opt.max_mib = std::atoi(next().c_str());
    else if (arg == "--reps")
      opt.reps = std::atoi(next().c_str());
    else if (arg == "--backend")
      opt.backend = next();
    else {
      std::fprintf(stderr,
                   "usage: rh_bench_comm [--ranks N] [--max-mib M] [--reps R] [--backend gloo]\n");
      return 2;
    }
  }
  if (opt.ranks < 1 || opt.max_mib < 1 || opt.reps < 1) {
    std::fprintf(stderr, "--ranks, --max-mib and --reps must be >= 1\n");
    return 2;
  }
  const int port = free_port();
  int shm_port = free_port();
  while (shm_port == port) shm_port = free_port();
  std::vector<pid_t> pids;
  std::fflush(stdout);
  for (int r = 0; r < opt.ranks; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int code = 1;
      try {
        code = run_rank(opt, r, port, shm_port);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] %s\n", r, e.what());
      }
      std::fflush(stdout);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  return failed;
}
