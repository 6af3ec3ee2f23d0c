// The shared-memory collectives (forked ranks; on their own with a
// file-backed key-value store, or through the gloo communicator): all_reduce
// over several pieces on 2 and 3 ranks, no segment name left in /dev/shm,
// ranks on different hosts fall back, which transport the communicator takes,
// reduce_scatter and all_gather bit for bit against TCP, ranks that disagree
// on sizes or collectives, dead peers and timeouts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "abi/HostError.hpp"
#include "comm/Communicator.hpp"
#include "comm/Reduce.hpp"
#include "comm/ShmAllReduce.hpp"
#include "common/TestUtil.hpp"
#include "host/comm/MultiProcess.hpp"

namespace {

namespace fs = std::filesystem;
using rh::comm::ReduceOp;
using rh::comm::detail::ShmAllReduce;
using rh::comm::detail::ShmRendezvous;
using rh::test::check;
using rh::test::RankContext;
using rh::test::run_ranks;

// The file of `key` in `dir` ('/' in keys become '_').
fs::path key_file(const fs::path& dir, std::string key) {
  std::replace(key.begin(), key.end(), '/', '_');
  return dir / key;
}

// Keys are files of `dir`, written under a temporary name and renamed; a
// get gives up after `patience_ms`.
ShmRendezvous file_store(const fs::path& dir, int rank, int patience_ms = 10000) {
  return ShmRendezvous{[dir, rank](const std::string& key, const std::string& value) {
                         const fs::path file = key_file(dir, key);
                         fs::path tmp = file;
                         tmp += ".tmp" + std::to_string(rank);
                         std::ofstream(tmp) << value;
                         fs::rename(tmp, file);
                       },
                       [dir, patience_ms](const std::string& key) {
                         const fs::path file = key_file(dir, key);
                         for (int waited = 0; waited < patience_ms; waited += 5) {
                           std::ifstream in(file);
                           if (in) return std::string(std::istreambuf_iterator<char>(in), {});
                           std::this_thread::sleep_for(std::chrono::milliseconds(5));
                         }
                         throw std::runtime_error("key " + key + " never set");
                       }};
}

std::vector<int> ranks_of(int n) {
  std::vector<int> r(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) r[static_cast<size_t>(i)] = i;
  return r;
}

void expect_all_ok(const std::vector<int>& codes) {
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// Sums of rank-dependent integers (exact in float32) over sizes that end
// inside the first piece, exactly on a piece and several pieces in; max too.
int sums_body(const RankContext& ctx, const fs::path& dir) {
  std::string why;
  auto shm = ShmAllReduce::connect(file_store(dir, ctx.rank), ctx.rank, ctx.world_size,
                                   ranks_of(ctx.world_size), ShmAllReduce::host_identity(),
                                   std::chrono::seconds(10), &why);
  check(shm != nullptr, "connect: " + why);
  const size_t piece = ShmAllReduce::kSlotBytes / sizeof(float);
  for (size_t n : {size_t{1}, size_t{17}, piece, 2 * piece + 12345}) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i % 1000) * (ctx.rank + 1));
    shm->all_reduce(v.data(), n, sizeof(float),
                    rh::comm::detail::reduce_function({kDLFloat, 32, 1}, ReduceOp::Sum, "t"));
    const float ranks_sum = static_cast<float>(ctx.world_size * (ctx.world_size + 1) / 2);
    for (size_t i = 0; i < n; ++i)  // the message only on a failure: 4 s per run otherwise
      if (v[i] != static_cast<float>(i % 1000) * ranks_sum)
        check(false, "n=" + std::to_string(n) + " element " + std::to_string(i) + " = " +
                         std::to_string(v[i]));
  }
  std::vector<int64_t> m{ctx.rank, -ctx.rank, 7};
  shm->all_reduce(m.data(), m.size(), sizeof(int64_t),
                  rh::comm::detail::reduce_function({kDLInt, 64, 1}, ReduceOp::Max, "t"));
  check(m[0] == ctx.world_size - 1 && m[1] == 0 && m[2] == 7, "max of int64");
  return 0;
}

TEST(ShmAllReduceTest, SumsOverSeveralPiecesOnTwoAndThreeRanks) {
  for (int n : {2, 3}) {
    rh::test::TempDir dir;
    expect_all_ok(run_ranks(n, [&](const RankContext& ctx) { return sums_body(ctx, dir.path()); }));
  }
}

TEST(ShmAllReduceTest, LeavesNoSegmentNameBehind) {
  rh::test::TempDir dir;
  expect_all_ok(run_ranks(2, [&](const RankContext& ctx) {
    std::string why;
    auto shm = ShmAllReduce::connect(file_store(dir.path(), ctx.rank), ctx.rank, 2, ranks_of(2),
                                     ShmAllReduce::host_identity(), std::chrono::seconds(10), &why);
    check(shm != nullptr, "connect: " + why);
    if (ctx.rank == 0) {  // rank 0 named the segment after its pid, and unlinked it
      const std::string prefix = "rh-allreduce-" + std::to_string(::getpid()) + "-";
      for (const auto& e : fs::directory_iterator("/dev/shm"))
        check(e.path().filename().string().rfind(prefix, 0) != 0,
              "left behind: " + e.path().string());
    }
    std::vector<double> v{1.0};
    shm->all_reduce(v.data(), 1, sizeof(double),
                    rh::comm::detail::reduce_function({kDLFloat, 64, 1}, ReduceOp::Sum, "t"));
    check(v[0] == 2.0, "sum after the unlink");
    return 0;
  }));
}

// Rank 1 dies before mapping the segment: rank 0's rendezvous fails, and the
// segment it created does not stay behind in /dev/shm.
TEST(ShmAllReduceTest, APeerLostDuringSetUpLeavesNoSegmentBehind) {
  rh::test::TempDir dir;
  expect_all_ok(run_ranks(2, [&](const RankContext& ctx) {
    if (ctx.rank == 1) {
      file_store(dir.path(), 1).set("shm/host/1", ShmAllReduce::host_identity());
      return 0;  // gone before "shm/name" is even read
    }
    std::string why;
    try {
      ShmAllReduce::connect(file_store(dir.path(), 0, /*patience_ms=*/500), 0, 2, ranks_of(2),
                            ShmAllReduce::host_identity(), std::chrono::seconds(10), &why);
      check(false, "connect without rank 1 must fail");
    } catch (const std::runtime_error& e) {
      check(std::string(e.what()).find("shm/mapped/1 never set") != std::string::npos, e.what());
    }
    const std::string prefix = "rh-allreduce-" + std::to_string(::getpid()) + "-";
    for (const auto& e : fs::directory_iterator("/dev/shm"))
      check(e.path().filename().string().rfind(prefix, 0) != 0,
            "left behind: " + e.path().string());
    return 0;
  }));
}

TEST(ShmAllReduceTest, RanksOnDifferentHostsFallBackOnEveryRank) {
  rh::test::TempDir dir;
  expect_all_ok(run_ranks(2, [&](const RankContext& ctx) {
    std::string why;
    // What two machines would report: another host name on rank 1.
    const std::string identity = ShmAllReduce::host_identity() + (ctx.rank == 1 ? " other" : "");
    auto shm =
        ShmAllReduce::connect(file_store(dir.path(), ctx.rank), ctx.rank, 2, std::vector<int>{4, 9},
                              identity, std::chrono::seconds(10), &why);
    check(shm == nullptr, "no shared memory across hosts");
    check(why == "rank 9 is on another host", "why: " + why);
    return 0;
  }));
}

TEST(ShmAllReduceTest, GlooTakesSharedMemoryOnOneHostAndTcpWhenTurnedOff) {
  expect_all_ok(run_ranks(2, [](const RankContext& ctx) {
    auto on = rh::comm::create_world(ctx.options());
    check(on->all_reduce_transport() == "shared memory", on->all_reduce_transport());
    auto group = on->new_group({0, 1});
    check(group->all_reduce_transport() == "shared memory",
          "group: " + group->all_reduce_transport());
    on->barrier();  // rank 0 hosts the store: it stays until every rank is done with it
    return 0;
  }));
  expect_all_ok(run_ranks(2, [](const RankContext& ctx) {
    rh::comm::RendezvousOptions o = ctx.options();
    o.shared_memory = false;
    auto off = rh::comm::create_world(o);
    check(off->all_reduce_transport() == "tcp ring", off->all_reduce_transport());
    off->barrier();
    return 0;
  }));
}

// A plugin that passes different sizes on different ranks gets an error on
// every rank instead of pieces of different collectives summed together.
TEST(ShmAllReduceTest, DifferentSizesOnTheRanksAreAnError) {
  expect_all_ok(run_ranks(2, [](const RankContext& ctx) {
    auto world = rh::comm::create_world(ctx.options());
    std::vector<float> v(ctx.rank == 0 ? 100 : 101, 1.0f);
    rh::comm::Buffer b{v.data(), v.size(), {kDLFloat, 32, 1}, {kDLCPU, 0}};
    try {
      world->all_reduce(b, ReduceOp::Sum, false);
      check(false, "all_reduce of 100 and 101 floats must fail");
    } catch (const rh::host::HostError& e) {
      const std::string m = e.what();
      std::printf("[rank %d] %s\n", ctx.rank, m.c_str());
      check(m.find("all_reduce failed on rank " + std::to_string(ctx.rank)) == 0, m);
      check(m.find("reduces 404 bytes") != std::string::npos ||
                m.find("reduces 400 bytes") != std::string::npos,
            m);
      check(m.find("every rank must pass the same size and dtype") != std::string::npos, m);
    }
    return 0;
  }));
}

// Sizes that agree on their first pieces (2 and 3 pieces): still an error,
// on the first piece, not a later collective's data summed into the third.
TEST(ShmAllReduceTest, SizesSharingTheirFirstPiecesAreAnErrorToo) {
  rh::test::TempDir dir;
  expect_all_ok(run_ranks(2, [&](const RankContext& ctx) {
    std::string why;
    auto shm = ShmAllReduce::connect(file_store(dir.path(), ctx.rank), ctx.rank, 2, ranks_of(2),
                                     ShmAllReduce::host_identity(), std::chrono::seconds(10), &why);
    check(shm != nullptr, "connect: " + why);
    const size_t piece = ShmAllReduce::kSlotBytes / sizeof(float);
    std::vector<float> v((ctx.rank == 0 ? 2 : 3) * piece, 1.0f);
    try {
      shm->all_reduce(v.data(), v.size(), sizeof(float),
                      rh::comm::detail::reduce_function({kDLFloat, 32, 1}, ReduceOp::Sum, "t"));
      check(false, "2 and 3 pieces must fail");
    } catch (const std::runtime_error& e) {
      const std::string m = e.what();
      check(m.find("rank " + std::to_string(1 - ctx.rank) + " reduces " +
                   std::to_string((ctx.rank == 0 ? 3 : 2) * ShmAllReduce::kSlotBytes) +
                   " bytes where rank " + std::to_string(ctx.rank) + " reduces " +
                   std::to_string(v.size() * sizeof(float))) == 0,
            m);
    }
    return 0;
  }));
}

// Both ranks run `collective` once; then rank 1 skips it and stays alive
// while rank 0 runs it again: rank 0's error must start with `message`
// (timeout 2 s, step "at train iteration 5").
void expect_timeout_without_rank_one(const std::function<void(rh::comm::Communicator&)>& collective,
                                     const std::string& message) {
  rh::test::TempDir dir;
  const std::string done = (dir / "rank0-done").string();
  expect_all_ok(run_ranks(2, [&](const RankContext& ctx) {
    auto world = rh::comm::create_world(ctx.options(/*timeout_s=*/2));
    check(world->all_reduce_transport() == "shared memory", world->all_reduce_transport());
    world->set_step_description([] { return std::string("at train iteration 5"); });
    collective(*world);   // both ranks
    if (ctx.rank == 1) {  // skips the next one, alive until rank 0 saw its timeout
      for (int i = 0; i < 1000 && !fs::exists(done); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return 0;
    }
    auto start = std::chrono::steady_clock::now();
    try {
      collective(*world);
      check(false, "without rank 1 it must time out: " + message);
    } catch (const rh::host::HostError& e) {
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::ofstream(done) << "x";
      const std::string m = e.what();
      std::printf("[rank 0] %s\n", m.c_str());
      check(e.code() == RH_ERROR_TIMEOUT, "code TIMEOUT: " + m);
      check(m.rfind(message, 0) == 0, m);
      check(took >= 1.5 && took < 2 + 4, "timed out after " + std::to_string(took) + " s");
    }
    return 0;
  }));
}

TEST(ShmAllReduceTest, TimeoutNamesTheCollectiveTheStepAndTheMissingRank) {
  std::vector<float> v(1000, 1.0f);
  expect_timeout_without_rank_one(
      [&](rh::comm::Communicator& world) {
        world.all_reduce({v.data(), v.size(), {kDLFloat, 32, 1}, {kDLCPU, 0}}, ReduceOp::Sum,
                         false);
      },
      "all_reduce timed out after 2 s at train iteration 5 on rank 0: timed out waiting for "
      "rank 1 in the shared-memory all-reduce (it has not posted its data yet)");
}

// ---- reduce_scatter and all_gather through shared memory ----

// Joins a second world over TCP beside `shm_world` (which rank 0 tells the
// port of), so that one process compares both transports.
std::unique_ptr<rh::comm::Communicator> tcp_world_beside(rh::comm::Communicator& shm_world,
                                                         const RankContext& ctx) {
  std::vector<int64_t> port{ctx.rank == 0 ? rh::test::free_port() : 0};
  shm_world.broadcast({port.data(), 1, {kDLInt, 64, 1}, {kDLCPU, 0}}, 0, false);
  rh::comm::RendezvousOptions o = ctx.options();
  o.master_port = static_cast<int>(port[0]);
  o.shared_memory = false;
  auto tcp = rh::comm::create_world(o);
  check(tcp->all_reduce_transport() == "tcp ring", "tcp world: " + tcp->all_reduce_transport());
  return tcp;
}

// Rank `rank`'s input of `n` floats. `exact`: multiples of 1/1024 below 2^10,
// whose sums over 3 ranks are exact in float32 whatever the order (the TCP
// ring adds in another order than shared memory); otherwise normal floats,
// whose sums depend on the order.
std::vector<float> rank_input(int rank, size_t n, bool exact) {
  std::mt19937 gen(static_cast<uint32_t>(1234 + rank));
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> ints(-(1 << 20), 1 << 20);
  std::vector<float> v(n);
  for (auto& x : v) x = exact ? static_cast<float>(ints(gen)) / 1024.0f : normal(gen);
  return v;
}

rh::comm::Buffer floats(std::vector<float>& v, size_t offset = 0, size_t count = SIZE_MAX) {
  return {v.data() + offset,
          count == SIZE_MAX ? v.size() - offset : count,
          {kDLFloat, 32, 1},
          {kDLCPU, 0}};
}

void check_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                     const std::string& what) {
  check(got.size() == want.size(), what + ": sizes");
  if (std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0) return;
  size_t i = 0;
  while (std::memcmp(&got[i], &want[i], sizeof(float)) == 0) ++i;
  check(false, what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) +
                   ", expected " + std::to_string(want[i]));
}

const char* op_name(ReduceOp op) {
  return op == ReduceOp::Sum   ? "sum"
         : op == ReduceOp::Avg ? "avg"
         : op == ReduceOp::Max ? "max"
                               : "min";
}

// Chunks that end inside a piece, and one several pieces long that is no
// multiple of anything (a reduce_scatter piece is 1/P of a slot per chunk).
int reduce_scatter_and_all_gather_body(const RankContext& ctx) {
  auto shm = rh::comm::create_world(ctx.options());
  check(shm->all_reduce_transport() == "shared memory", shm->all_reduce_transport());
  auto tcp = tcp_world_beside(*shm, ctx);
  const size_t P = static_cast<size_t>(ctx.world_size);
  const size_t me = static_cast<size_t>(ctx.rank);
  const bool exact = ctx.world_size > 2;  // 2 ranks: a + b == b + a, any floats
  const size_t long_chunk = 3 * ShmAllReduce::kSlotBytes / sizeof(float) / P + 12345;
  for (size_t chunk : {size_t{1}, size_t{17}, long_chunk}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
      const std::string what = std::string("reduce_scatter ") + op_name(op) +
                               " chunk=" + std::to_string(chunk) + " on " + std::to_string(P) +
                               " ranks";
      auto in = rank_input(ctx.rank, P * chunk, exact);
      // avg divides each rank's values by P before the sum (as ddp does):
      // multiples of P keep the quotients, and so the sums, exact.
      if (exact && op == ReduceOp::Avg)
        for (float& x : in) x *= static_cast<float>(P);
      const auto in_copy = in;
      std::vector<float> through_shm(chunk, -1.0f), through_tcp(chunk, -2.0f);
      shm->reduce_scatter(floats(in), floats(through_shm), op, false);
      check(in == in_copy, what + " left its input alone");
      tcp->reduce_scatter(floats(in), floats(through_tcp), op, false);
      check_same_bits(through_shm, through_tcp, what + ": shared memory against tcp");
      // Our chunk of the input as the output: the same bits.
      shm->reduce_scatter(floats(in), floats(in, me * chunk, chunk), op, false);
      check_same_bits(std::vector<float>(in.begin() + me * chunk, in.begin() + (me + 1) * chunk),
                      through_shm, what + " in place");
    }
    const std::string what =
        "all_gather n=" + std::to_string(chunk) + " on " + std::to_string(P) + " ranks";
    auto in = rank_input(ctx.rank, chunk, false);
    std::vector<float> through_shm(P * chunk, -1.0f), through_tcp(P * chunk, -2.0f);
    shm->all_gather(floats(in), floats(through_shm), false);
    tcp->all_gather(floats(in), floats(through_tcp), false);
    check_same_bits(through_shm, through_tcp, what + ": shared memory against tcp");
    std::vector<float> want;
    for (int r = 0; r < ctx.world_size; ++r) {
      auto theirs = rank_input(r, chunk, false);
      want.insert(want.end(), theirs.begin(), theirs.end());
    }
    check_same_bits(through_shm, want, what);
    std::vector<float> in_place(P * chunk, -3.0f);
    std::copy(in.begin(), in.end(), in_place.begin() + static_cast<ptrdiff_t>(me * chunk));
    shm->all_gather(floats(in_place, me * chunk, chunk), floats(in_place), false);
    check_same_bits(in_place, want, what + " in place");
  }
  shm->barrier();
  tcp->barrier();
  return 0;
}

TEST(ShmAllReduceTest, ReduceScatterAndAllGatherEqualTcpBitForBitOnTwoRanks) {
  expect_all_ok(run_ranks(2, reduce_scatter_and_all_gather_body));
}

TEST(ShmAllReduceTest, ReduceScatterAndAllGatherEqualTcpBitForBitOnThreeRanks) {
  expect_all_ok(run_ranks(3, reduce_scatter_and_all_gather_body));
}

// Each element of a reduce_scatter is summed as the all_reduce sums it: slot
// 0 + slot 1, then + slot 2 (floats whose sum depends on the order).
TEST(ShmAllReduceTest, ReduceScatterSumsInTheAllReduceOrder) {
  rh::test::TempDir dir;
  expect_all_ok(run_ranks(3, [&](const RankContext& ctx) {
    std::string why;
    auto shm = ShmAllReduce::connect(file_store(dir.path(), ctx.rank), ctx.rank, 3, ranks_of(3),
                                     ShmAllReduce::host_identity(), std::chrono::seconds(10), &why);
    check(shm != nullptr, "connect: " + why);
    const auto sum = rh::comm::detail::reduce_function({kDLFloat, 32, 1}, ReduceOp::Sum, "t");
    const size_t chunk = ShmAllReduce::kSlotBytes / sizeof(float) / 3 + 101;  // 2 pieces
    auto in = rank_input(ctx.rank, 3 * chunk, false);
    std::vector<float> scattered(chunk);
    shm->reduce_scatter(in.data(), scattered.data(), chunk, sizeof(float), sum);
    auto reduced = in;
    shm->all_reduce(reduced.data(), reduced.size(), sizeof(float), sum);
    const size_t me = static_cast<size_t>(ctx.rank);
    check_same_bits(
        scattered,
        std::vector<float>(reduced.begin() + me * chunk, reduced.begin() + (me + 1) * chunk),
        "reduce_scatter against all_reduce");
    std::vector<float> folded(chunk);
    auto in0 = rank_input(0, 3 * chunk, false), in1 = rank_input(1, 3 * chunk, false),
         in2 = rank_input(2, 3 * chunk, false);
    for (size_t j = 0; j < chunk; ++j)
      folded[j] = (in0[me * chunk + j] + in1[me * chunk + j]) + in2[me * chunk + j];
    check_same_bits(scattered, folded, "reduce_scatter against (x0 + x1) + x2");
    return 0;
  }));
}

// Expects `fn` to throw a runtime_error whose message starts with `start`.
template <class Fn>
void expect_refusal(Fn&& fn, const std::string& start, const std::string& what) {
  try {
    fn();
    check(false, what + " must fail");
  } catch (const std::runtime_error& e) {
    check(std::string(e.what()).rfind(start, 0) == 0, what + ": " + e.what());
  }
}

TEST(ShmAllReduceTest, RanksPassingDifferentSizesOrCollectivesAreRefused) {
  rh::test::TempDir dir;
  expect_all_ok(run_ranks(2, [&](const RankContext& ctx) {
    auto connect = [&](const std::string& name) {
      fs::create_directories(dir / name);
      std::string why;
      auto shm =
          ShmAllReduce::connect(file_store(dir / name, ctx.rank), ctx.rank, 2, ranks_of(2),
                                ShmAllReduce::host_identity(), std::chrono::seconds(10), &why);
      check(shm != nullptr, "connect: " + why);
      return shm;
    };
    const auto sum = rh::comm::detail::reduce_function({kDLFloat, 32, 1}, ReduceOp::Sum, "t");
    const int other = 1 - ctx.rank;
    const size_t mine = ctx.rank == 0 ? 100 : 101, theirs = ctx.rank == 0 ? 101 : 100;
    std::vector<float> in(2 * 101, 1.0f), out(2 * 101);
    auto rs = connect("rs");
    expect_refusal(
        [&] { rs->reduce_scatter(in.data(), out.data(), mine, 4, sum); },
        "rank " + std::to_string(other) + " reduce-scatters " + std::to_string(2 * theirs * 4) +
            " bytes where rank " + std::to_string(ctx.rank) + " reduce-scatters " +
            std::to_string(2 * mine * 4) + " (every rank must pass the same size and dtype)",
        "reduce_scatter of 100 and 101 floats per rank");
    auto ag = connect("ag");
    expect_refusal([&] { ag->all_gather(in.data(), out.data(), mine, 4); },
                   "rank " + std::to_string(other) + " gathers " + std::to_string(theirs * 4) +
                       " bytes where rank " + std::to_string(ctx.rank) + " gathers " +
                       std::to_string(mine * 4),
                   "all_gather of 100 and 101 floats");
    // Equal byte counts, different collectives: 400 bytes either way.
    auto mixed = connect("mixed");
    expect_refusal(
        [&] {
          if (ctx.rank == 0)
            mixed->all_gather(in.data(), out.data(), 100, 4);
          else
            mixed->reduce_scatter(in.data(), out.data(), 50, 4, sum);
        },
        ctx.rank == 0 ? "rank 1 runs the shared-memory reduce-scatter where rank 0 runs the "
                        "all-gather (every rank must run the same collectives in the same order)"
                      : "rank 0 runs the shared-memory all-gather where rank 1 runs the "
                        "reduce-scatter",
        "all_gather against reduce_scatter");
    return 0;
  }));
}

// Through the communicator: the error names the collective and this rank.
TEST(ShmAllReduceTest, CommunicatorReduceScatterOfDifferentSizesIsAnError) {
  expect_all_ok(run_ranks(2, [](const RankContext& ctx) {
    auto world = rh::comm::create_world(ctx.options());
    std::vector<float> in(ctx.rank == 0 ? 200 : 202, 1.0f), out(in.size() / 2);
    try {
      world->reduce_scatter(floats(in), floats(out), ReduceOp::Sum, false);
      check(false, "reduce_scatter of 100 and 101 floats per rank must fail");
    } catch (const rh::host::HostError& e) {
      const std::string m = e.what();
      check(m.rfind("reduce_scatter failed on rank " + std::to_string(ctx.rank) + ": rank " +
                        std::to_string(1 - ctx.rank) + " reduce-scatters ",
                    0) == 0,
            m);
      check(m.find("every rank must pass the same size and dtype") != std::string::npos, m);
    }
    return 0;
  }));
}

// Through shared memory the waiting rank sees the peer's process gone well
// before the timeout; with dist.shared_memory false the same collectives go
// over TCP (the closed connection reports it).
TEST(ShmAllReduceTest, DeadPeerFailsReduceScatterAndAllGatherQuicklyAndTcpStaysTcp) {
  for (bool shared_memory : {true, false})
    for (std::string collective : {"reduce_scatter", "all_gather"})
      expect_all_ok(run_ranks(2, [&](const RankContext& ctx) {
        rh::comm::RendezvousOptions o = ctx.options(/*timeout_s=*/10);
        o.shared_memory = shared_memory;
        auto world = rh::comm::create_world(o);
        world->barrier();
        if (ctx.rank == 1) ::_exit(0);  // dies without closing anything
        std::vector<float> big(2000, 1.0f), small(1000, 1.0f);
        auto start = std::chrono::steady_clock::now();
        try {
          if (collective == "reduce_scatter")
            world->reduce_scatter(floats(big), floats(small), ReduceOp::Sum, false);
          else
            world->all_gather(floats(small), floats(big), false);
          check(false, collective + " with a dead peer must fail");
        } catch (const rh::host::HostError& e) {
          const double took =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          const std::string m = e.what();
          std::printf("[rank 0] %s\n", m.c_str());
          check(m.rfind(collective + " failed on rank 0: ", 0) == 0, m);
          const std::string shm_name =
              collective == "reduce_scatter" ? "reduce-scatter" : "all-gather";
          if (shared_memory)
            check(e.code() == RH_ERROR_IO && m.find(": rank 1 (pid ") != std::string::npos &&
                      m.find("exited during the shared-memory " + shm_name) != std::string::npos,
                  m);
          else
            check(m.find("shared-memory") == std::string::npos, "over TCP: " + m);
          check(took < 5, "noticed after " + std::to_string(took) + " s");
        }
        return 0;
      }));
}

TEST(ShmAllReduceTest, AllGatherTimeoutNamesTheCollectiveTheStepAndTheMissingRank) {
  std::vector<float> in(1000, 1.0f), out(2000);
  expect_timeout_without_rank_one(
      [&](rh::comm::Communicator& world) { world.all_gather(floats(in), floats(out), false); },
      "all_gather timed out after 2 s at train iteration 5 on rank 0: timed out waiting for "
      "rank 1 in the shared-memory all-gather (it has not posted its data yet)");
}

}  // namespace
