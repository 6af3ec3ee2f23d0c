// The nccl communicator (built when CMake found CUDA and NCCL). Every test
// skips without a GPU. CUDA is only ever touched in forked children: a
// parent that initialised CUDA could not fork working children.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "abi/HostError.hpp"
#include "comm/Communicator.hpp"
#include "common/TestUtil.hpp"
#include "host/comm/MultiProcess.hpp"

namespace {

using rh::comm::Buffer;
using rh::comm::ReduceOp;
using rh::test::check;
using rh::test::RankContext;
using rh::test::run_ranks;

// Number of visible GPUs, asked in a child process (capped at 100).
int gpu_count() {
  static int count = [] {
    auto codes = run_ranks(1, [](const RankContext&) {
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
      return n > 100 ? 100 : n;
    });
    return codes[0] >= 0 && codes[0] <= 100 ? codes[0] : 0;
  }();
  return count;
}

rh::comm::RendezvousOptions nccl_options(const RankContext& ctx, double timeout_s = 20) {
  auto o = ctx.options(timeout_s);
  o.backend = "nccl";
  return o;
}

// A float32 device buffer filled from / read back to the host.
struct DeviceFloats {
  float* ptr = nullptr;
  size_t n;
  int device;
  DeviceFloats(size_t n_, int device_) : n(n_), device(device_) {
    check(cudaMalloc(&ptr, n * sizeof(float)) == cudaSuccess, "cudaMalloc");
  }
  ~DeviceFloats() { cudaFree(ptr); }
  void set(const std::vector<float>& v) {
    check(
        cudaMemcpy(ptr, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess,
        "copy to device");
  }
  std::vector<float> get() const {
    std::vector<float> v(n);
    check(cudaDeviceSynchronize() == cudaSuccess, "synchronize");
    check(cudaMemcpy(v.data(), ptr, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess,
          "copy to host");
    return v;
  }
  Buffer buffer() const { return Buffer{ptr, n, {kDLFloat, 32, 1}, {kDLCUDA, device}}; }
};

TEST(NcclCommunicatorTest, WithoutAGpuCreateWorldSaysSo) {
  if (gpu_count() > 0) GTEST_SKIP() << "a GPU is visible";
  auto codes = run_ranks(1, [](const RankContext& ctx) {
    try {
      rh::comm::create_world(nccl_options(ctx));
      check(false, "nccl without a GPU must fail");
    } catch (const rh::host::HostError& e) {
      check(e.code() == RH_ERROR_FAILED_PRECONDITION, e.what());
      check(std::string(e.what()).find("needs a CUDA device") != std::string::npos, e.what());
    }
    return 0;
  });
  EXPECT_EQ(codes[0], 0);
}

int collectives_body(const RankContext& ctx) {
  auto world = rh::comm::create_world(nccl_options(ctx));
  const int P = world->size();
  const int dev = ctx.rank;  // local_rank = rank, one GPU per rank
  const size_t n = 1 << 20;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
    DeviceFloats x(n, dev);
    x.set(std::vector<float>(n, static_cast<float>(ctx.rank + 1)));
    world->all_reduce(x.buffer(), op, false);
    float want = op == ReduceOp::Sum   ? P * (P + 1) / 2.0f
                 : op == ReduceOp::Avg ? (P + 1) / 2.0f
                 : op == ReduceOp::Max ? static_cast<float>(P)
                                       : 1.0f;
    for (float v : x.get()) check(v == want, "all_reduce on the GPU");
  }
  // reduce_scatter then all_gather, async, waited in reverse order.
  DeviceFloats in(n * static_cast<size_t>(P), dev), part(n, dev),
      whole(n * static_cast<size_t>(P), dev);
  std::vector<float> host_in(in.n);
  for (size_t i = 0; i < host_in.size(); ++i) host_in[i] = static_cast<float>(i % 1000);
  in.set(host_in);
  auto w1 = world->reduce_scatter(in.buffer(), part.buffer(), ReduceOp::Sum, true);
  auto w2 = world->all_gather(part.buffer(), whole.buffer(), true);
  w2->wait();
  w1->wait();
  check(w1->completed() && w2->completed(), "completed");
  auto got = whole.get();
  for (size_t i = 0; i < got.size(); ++i)
    check(got[i] == static_cast<float>(P) * host_in[i], "reduce_scatter + all_gather");
  DeviceFloats b(1000, dev);
  b.set(std::vector<float>(1000, ctx.rank == P - 1 ? 7.0f : 0.0f));
  world->broadcast(b.buffer(), P - 1, false);
  for (float v : b.get()) check(v == 7.0f, "broadcast from the last rank");
  world->barrier();
  auto group = world->new_group({0});
  check(ctx.rank == 0 ? group != nullptr : group == nullptr, "group {0}");
  if (group) group->all_reduce(b.buffer(), ReduceOp::Sum, false);
  try {
    std::vector<float> host(4);
    world->all_reduce(Buffer{host.data(), 4, {kDLFloat, 32, 1}, {kDLCPU, 0}}, ReduceOp::Sum, false);
    check(false, "a CPU buffer on nccl must throw");
  } catch (const rh::host::HostError& e) {
    check(e.code() == RH_ERROR_INVALID_ARGUMENT, e.what());
  }
  world->barrier();
  return 0;
}

TEST(NcclCommunicatorTest, CollectivesOnOneGpuPerRank) {
  const int gpus = gpu_count();
  if (gpus == 0) GTEST_SKIP() << "no GPU";
  auto codes = run_ranks(std::min(gpus, 2), collectives_body, 120);
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// Two ranks of one host on one GPU: refused before NCCL starts (NCCL itself
// fails inside ncclCommInitRankConfig with "invalid usage"), on every rank,
// naming the counts and the fixes. Each child sees only GPU 0, so the test
// runs on any GPU machine.
TEST(NcclCommunicatorTest, TwoRanksOnOneGpuAreRefusedBeforeNcclStarts) {
  if (gpu_count() == 0) GTEST_SKIP() << "no GPU";
  auto codes = run_ranks(
      2,
      [](const RankContext& ctx) {
        ::setenv("CUDA_VISIBLE_DEVICES", "0", 1);  // before this child touches CUDA
        try {
          rh::comm::create_world(nccl_options(ctx));
          check(false, "two ranks on one GPU must be refused");
        } catch (const rh::host::HostError& e) {
          const std::string m = e.what();
          check(e.code() == RH_ERROR_FAILED_PRECONDITION, m);
          check(m.find("ranks 0, 1 of host") != std::string::npos, m);
          check(m.find("runs 2 rank(s); rank " + std::to_string(ctx.rank) +
                       " sees 1 GPU(s) (CUDA_VISIBLE_DEVICES=0)") != std::string::npos,
                m);
          check(m.find("--nproc-per-node 1") != std::string::npos, m);
          check(m.find("dist.backend: gloo") != std::string::npos, m);
        }
        return 0;
      },
      120);
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

TEST(NcclCommunicatorTest, TimeoutAbortsAndNamesTheCollective) {
  if (gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  rh::test::TempDir dir;
  const std::string done = (dir / "rank0-done").string();
  auto codes = run_ranks(
      2,
      [&](const RankContext& ctx) {
        auto world = rh::comm::create_world(nccl_options(ctx, /*timeout_s=*/3));
        world->set_step_description([] { return std::string("at train iteration 12"); });
        DeviceFloats x(1024, ctx.rank);
        world->all_reduce(x.buffer(), ReduceOp::Sum, false);
        if (ctx.rank == 1) {
          for (int i = 0; i < 3000 && !std::filesystem::exists(done); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          return 0;
        }
        try {
          world->all_reduce(x.buffer(), ReduceOp::Sum, false);
          check(false, "all_reduce without rank 1 must time out");
        } catch (const rh::host::HostError& e) {
          std::ofstream(done) << "x";
          std::string m = e.what();
          check(e.code() == RH_ERROR_TIMEOUT, m);
          check(m.find("all_reduce timed out after 3 s at train iteration 12 on rank 0") == 0, m);
        }
        return 0;
      },
      120);
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// A peer that died: NCCL's own error names no rank; the heartbeat does.
TEST(NcclCommunicatorTest, ADeadPeerIsNamedByTheHeartbeat) {
  if (gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  auto codes = run_ranks(
      2,
      [&](const RankContext& ctx) {
        auto world = rh::comm::create_world(nccl_options(ctx, /*timeout_s=*/3));
        DeviceFloats x(1024, ctx.rank);
        world->all_reduce(x.buffer(), ReduceOp::Sum, false);
        if (ctx.rank == 1) _exit(0);  // gone, heartbeat and all
        try {
          world->all_reduce(x.buffer(), ReduceOp::Sum, false);
          check(false, "all_reduce without rank 1 must fail");
        } catch (const rh::host::HostError& e) {
          std::string m = e.what();
          check(m.find("rank(s) 1 stopped (no heartbeat for") != std::string::npos, m);
        }
        return 0;
      },
      120);
  EXPECT_EQ(codes[0], 0);
}

}  // namespace
