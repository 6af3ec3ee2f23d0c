// Communicator benchmark: forks N ranks (default 2) that join two gloo worlds
// on 127.0.0.1, one over TCP (the gloo rings, as between hosts) and one
// through shared memory (what ranks of one host use, ShmAllReduce.hpp), and
// time all_reduce, reduce_scatter and all_gather of float32 buffers of 1, 16,
// 64 and 256 MiB (the all_reduce buffer, the reduce_scatter input, the
// all_gather output) on both. Each time is the slowest rank's; after one
// warm-up of each, the two transports alternate (TCP first in even rounds,
// shared memory first in odd ones, so that drift on a shared machine hits
// both alike); the table gives the median of --reps rounds and the spread
// (min-max) of each, and shm/tcp, the ratio of the medians.
//
//   rh_bench_comm [--ranks N] [--sizes 1,16,64,256] [--reps R] [--backend gloo]
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
#include <utility>
#include <vector>

#include "comm/Communicator.hpp"

namespace {

using rh::comm::Buffer;
using rh::comm::Communicator;
using rh::comm::ReduceOp;

struct Options {
  int ranks = 2;
  std::vector<int> sizes_mib{1, 16, 64, 256};
  int reps = 5;
  std::string backend = "gloo";
};

// "1,16,64" -> {1, 16, 64}; empty when malformed or a size is < 1.
std::vector<int> parse_sizes(const std::string& text) {
  std::vector<int> sizes;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    char* rest = nullptr;
    const long v = std::strtol(item.c_str(), &rest, 10);
    if (item.empty() || *rest != '\0' || v < 1 || v > 65536) return {};
    sizes.push_back(static_cast<int>(v));
    start = end + 1;
  }
  return sizes;
}

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

struct Times {
  std::vector<double> runs;
  double median() const { return sorted()[runs.size() / 2]; }
  double min() const { return sorted().front(); }
  double max() const { return sorted().back(); }
  std::vector<double> sorted() const {
    std::vector<double> s = runs;
    std::sort(s.begin(), s.end());
    return s;
  }
};

// One collective on both worlds: a warm-up each, then `reps` alternating rounds.
template <class Op>
std::pair<Times, Times> tcp_and_shm(Communicator& tcp, Communicator& shm, int reps, Op&& op) {
  timed(tcp, [&] { op(tcp); });
  timed(shm, [&] { op(shm); });
  Times t, s;
  for (int i = 0; i < reps; ++i) {
    if (i % 2 == 0) t.runs.push_back(timed(tcp, [&] { op(tcp); }));
    s.runs.push_back(timed(shm, [&] { op(shm); }));
    if (i % 2 == 1) t.runs.push_back(timed(tcp, [&] { op(tcp); }));
  }
  return {t, s};
}

int run_rank(const Options& opt, int rank, int port, int shm_port) {
  rh::comm::RendezvousOptions o;
  o.master_port = port;
  o.rank = rank;
  o.world_size = opt.ranks;
  o.timeout_s = 120;
  o.backend = opt.backend;
  o.shared_memory = false;
  auto tcp = rh::comm::create_world(o);
  o.master_port = shm_port;
  o.shared_memory = true;
  auto shm = rh::comm::create_world(o);
  const size_t P = static_cast<size_t>(opt.ranks);
  const int max_mib = *std::max_element(opt.sizes_mib.begin(), opt.sizes_mib.end());
  const size_t max_count = (size_t{1} << 20) * static_cast<size_t>(max_mib) / sizeof(float);
  std::vector<float> a(max_count, 1.0f / static_cast<float>(P));
  std::vector<float> b(max_count, 1.0f);
  if (rank == 0) {
    std::printf("communicator benchmark: backend %s, %d ranks on 127.0.0.1, float32\n",
                opt.backend.c_str(), opt.ranks);
    std::printf("tcp: %s, shm: %s; ms of the slowest rank, median of %d [min-max]\n",
                tcp->all_reduce_transport().c_str(), shm->all_reduce_transport().c_str(), opt.reps);
    std::printf("%8s  %-14s %24s %24s %8s\n", "size MiB", "collective", "tcp ms", "shm ms",
                "shm/tcp");
    std::fflush(stdout);
  }
  auto cell = [](const Times& t) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.2f [%.2f-%.2f]", t.median() * 1e3, t.min() * 1e3,
                  t.max() * 1e3);
    return std::string(text);
  };
  for (int mib : opt.sizes_mib) {
    const size_t count = (size_t{1} << 20) * static_cast<size_t>(mib) / sizeof(float);
    const size_t part = count / P;
    const std::pair<const char*, std::pair<Times, Times>> rows[] = {
        {"all_reduce", tcp_and_shm(*tcp, *shm, opt.reps,
                                   [&](Communicator& c) {
                                     c.all_reduce(floats(a, count), ReduceOp::Sum, false);
                                   })},
        {"reduce_scatter", tcp_and_shm(*tcp, *shm, opt.reps,
                                       [&](Communicator& c) {
                                         c.reduce_scatter(floats(a, part * P), floats(b, part),
                                                          ReduceOp::Sum, false);
                                       })},
        {"all_gather", tcp_and_shm(*tcp, *shm, opt.reps, [&](Communicator& c) {
           c.all_gather(floats(b, part), floats(a, part * P), false);
         })}};
    if (rank == 0) {
      for (const auto& [name, times] : rows)
        std::printf("%8d  %-14s %24s %24s %8.3f\n", mib, name, cell(times.first).c_str(),
                    cell(times.second).c_str(), times.second.median() / times.first.median());
      std::fflush(stdout);
    }
  }
  tcp->barrier();
  shm->barrier();
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
    else if (arg == "--sizes")
      opt.sizes_mib = parse_sizes(next());
    else if (arg == "--reps")
      opt.reps = std::atoi(next().c_str());
    else if (arg == "--backend")
      opt.backend = next();
    else {
      std::fprintf(
          stderr,
          "usage: rh_bench_comm [--ranks N] [--sizes 1,16,64,256] [--reps R] [--backend gloo]\n");
      return 2;
    }
  }
  if (opt.ranks < 1 || opt.sizes_mib.empty() || opt.reps < 1) {
    std::fprintf(stderr,
                 "--ranks and --reps must be >= 1, --sizes a list of MiB >= 1 such as 1,16,64\n");
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
