// The shared-memory all-reduce on its own (forked ranks, a file-backed
// key-value store): results over several pieces on 2 and 3 ranks, no segment
// name left in /dev/shm, ranks on different hosts fall back, and through the
// gloo communicator: which transport all_reduce takes, a timeout inside it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "comm/Communicator.hpp"
#include "comm/MultiProcess.hpp"
#include "comm/Reduce.hpp"
#include "comm/ShmAllReduce.hpp"
#include "common/TestUtil.hpp"
#include "plugins/HostError.hpp"

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
    for (size_t i = 0; i < n; ++i)
      check(v[i] == static_cast<float>(i % 1000) * ranks_sum, "n=" + std::to_string(n) +
                                                                  " element " + std::to_string(i) +
                                                                  " = " + std::to_string(v[i]));
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

TEST(ShmAllReduceTest, TimeoutNamesTheCollectiveTheStepAndTheMissingRank) {
  rh::test::TempDir dir;
  const std::string done = (dir / "rank0-done").string();
  expect_all_ok(run_ranks(2, [&](const RankContext& ctx) {
    auto world = rh::comm::create_world(ctx.options(/*timeout_s=*/2));
    world->set_step_description([] { return std::string("at train iteration 5"); });
    std::vector<float> v(1000, 1.0f);
    rh::comm::Buffer b{v.data(), v.size(), {kDLFloat, 32, 1}, {kDLCPU, 0}};
    world->all_reduce(b, ReduceOp::Sum, false);  // both ranks
    if (ctx.rank == 1) {  // skips the next one, alive until rank 0 saw its timeout
      for (int i = 0; i < 1000 && !fs::exists(done); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return 0;
    }
    auto start = std::chrono::steady_clock::now();
    try {
      world->all_reduce(b, ReduceOp::Sum, false);
      check(false, "all_reduce without rank 1 must time out");
    } catch (const rh::host::HostError& e) {
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::ofstream(done) << "x";
      const std::string m = e.what();
      std::printf("[rank 0] %s\n", m.c_str());
      check(e.code() == RH_ERROR_TIMEOUT, "code TIMEOUT: " + m);
      check(m.find("all_reduce timed out after 2 s at train iteration 5 on rank 0") == 0, m);
      check(m.find("waiting for rank 1") != std::string::npos, m);
      check(took >= 1.5 && took < 2 + 4, "timed out after " + std::to_string(took) + " s");
    }
    return 0;
  }));
}

}  // namespace
