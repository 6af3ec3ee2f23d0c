// install_comm_api: the Comm_* / CommWork_* entries of rh_HostApi, driven
// through the C table on DLPack tensors, on 2 forked ranks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "abi/HostApi.hpp"
#include "comm/Communicator.hpp"
#include "host/comm/MultiProcess.hpp"

namespace {

using rh::test::check;
using rh::test::RankContext;

// A CPU DLPack tensor over caller-owned memory (no deleter: borrowed).
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // empty: compact (strides == NULL)
  DLManagedTensor managed{};

  Tensor(void* data, std::vector<int64_t> shape_, DLDataType dtype,
         std::vector<int64_t> strides_ = {})
      : shape(std::move(shape_)), strides(std::move(strides_)) {
    managed.dl_tensor.data = data;
    managed.dl_tensor.device = DLDevice{kDLCPU, 0};
    managed.dl_tensor.ndim = static_cast<int32_t>(shape.size());
    managed.dl_tensor.dtype = dtype;
    managed.dl_tensor.shape = shape.data();
    managed.dl_tensor.strides = strides.empty() ? nullptr : strides.data();
    managed.dl_tensor.byte_offset = 0;
  }
  DLManagedTensor* get() { return &managed; }
};

constexpr DLDataType kF32{kDLFloat, 32, 1};
constexpr DLDataType kI64{kDLInt, 64, 1};

// Takes an error (may be NULL): its code, or RH_ERROR_OK.
rh_ErrorCode code_of(const rh_HostApi* api, rh_Error* e, std::string* message = nullptr) {
  if (e == nullptr) return RH_ERROR_OK;
  rh_ErrorCode c = api->Error_Code(e);
  if (message) {
    rh_StringView m = api->Error_Message(e);
    *message = std::string(m.data, m.size);
  }
  api->Error_Destroy(e);
  return c;
}

void ok(const rh_HostApi* api, rh_Error* e, const std::string& what) {
  std::string m;
  rh_ErrorCode c = code_of(api, e, &m);
  check(c == RH_ERROR_OK, what + ": " + m);
}

int api_body(const RankContext& ctx) {
  auto world = rh::comm::create_world(ctx.options());
  rh::host::HostServices services;
  rh::comm::install_comm_api(services, world.get());
  const rh_HostApi* api = services.api();
  rh_Context* context = services.new_context("rh_test", "comm");
  check(api->Comm_World != nullptr && api->CommWork_Destroy != nullptr, "entries filled");
  rh_Comm* comm = api->Comm_World(context);
  check(comm != nullptr, "Comm_World");
  check(api->Comm_Rank(comm) == ctx.rank && api->Comm_Size(comm) == 2, "Comm_Rank/Comm_Size");

  // Synchronous all_reduce on a 2x3 tensor.
  std::vector<float> a(6);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i + 10 * ctx.rank);
  Tensor ta(a.data(), {2, 3}, kF32);
  ok(api, api->Comm_AllReduce(comm, ta.get(), RH_REDUCE_SUM, nullptr), "Comm_AllReduce");
  for (size_t i = 0; i < a.size(); ++i)
    check(a[i] == static_cast<float>(2 * i + 10), "Comm_AllReduce result");

  // Asynchronous, with explicit (compact) strides, then Avg.
  Tensor tb(a.data(), {2, 3}, kF32, {3, 1});
  rh_CommWork* work = nullptr;
  ok(api, api->Comm_AllReduce(comm, tb.get(), RH_REDUCE_AVG, &work), "async Comm_AllReduce");
  check(work != nullptr, "a work handle");
  ok(api, api->CommWork_Wait(work), "CommWork_Wait");
  check(api->CommWork_IsCompleted(work) == 1, "CommWork_IsCompleted");
  api->CommWork_Destroy(work);
  for (size_t i = 0; i < a.size(); ++i)
    check(a[i] == static_cast<float>(2 * i + 10), "avg of equal tensors");

  // reduce_scatter [2, 2] -> [1, 2], all_gather back, broadcast from rank 1.
  std::vector<int64_t> in{1 + ctx.rank, 2, 3, 4 * (ctx.rank + 1)};
  std::vector<int64_t> part(2), whole(4);
  Tensor tin(in.data(), {2, 2}, kI64), tpart(part.data(), {1, 2}, kI64),
      twhole(whole.data(), {2, 2}, kI64);
  ok(api, api->Comm_ReduceScatter(comm, tin.get(), tpart.get(), RH_REDUCE_SUM, nullptr),
     "Comm_ReduceScatter");
  const std::vector<int64_t> sums{3, 4, 6, 12};
  check(part[0] == sums[2 * ctx.rank] && part[1] == sums[2 * ctx.rank + 1], "reduce_scatter");
  rh_CommWork* gather = nullptr;
  ok(api, api->Comm_AllGather(comm, tpart.get(), twhole.get(), &gather), "Comm_AllGather");
  api->CommWork_Destroy(gather);  // waits
  check(whole == sums, "all_gather");
  std::vector<int64_t> b{ctx.rank == 1 ? 42 : 0};
  Tensor tbc(b.data(), {1}, kI64);
  ok(api, api->Comm_Broadcast(comm, tbc.get(), 1, nullptr), "Comm_Broadcast");
  check(b[0] == 42, "broadcast");
  ok(api, api->Comm_Barrier(comm), "Comm_Barrier");

  // Groups.
  int32_t both[] = {0, 1};
  rh_Comm* group = nullptr;
  ok(api, api->Comm_NewGroup(comm, both, 2, &group), "Comm_NewGroup");
  check(group != nullptr && api->Comm_Size(group) == 2, "group of both");
  int32_t only_zero[] = {0};
  rh_Comm* zero = reinterpret_cast<rh_Comm*>(&zero);  // must be overwritten
  ok(api, api->Comm_NewGroup(comm, only_zero, 1, &zero), "Comm_NewGroup {0}");
  check(ctx.rank == 0 ? zero != nullptr : zero == nullptr, "*out NULL outside the group");
  ok(api, api->Comm_AllReduce(group, ta.get(), RH_REDUCE_MAX, nullptr), "group Comm_AllReduce");

  // Errors carry codes and say what is wrong.
  std::string m;
  int32_t descending[] = {1, 0};
  check(code_of(api, api->Comm_NewGroup(comm, descending, 2, &group), &m) ==
            RH_ERROR_INVALID_ARGUMENT,
        "descending group");
  check(m.find("ascending") != std::string::npos, m);
  int32_t out_of_range[] = {0, 5};
  check(code_of(api, api->Comm_NewGroup(comm, out_of_range, 2, &group), &m) ==
            RH_ERROR_INVALID_ARGUMENT,
        "rank 5 of 2");
  Tensor strided(a.data(), {3}, kF32, {2});
  check(code_of(api, api->Comm_AllReduce(comm, strided.get(), RH_REDUCE_SUM, nullptr), &m) ==
            RH_ERROR_INVALID_ARGUMENT,
        "non-contiguous tensor");
  check(m.find("not contiguous") != std::string::npos, m);
  check(code_of(api, api->Comm_AllReduce(comm, tin.get(), RH_REDUCE_AVG, nullptr), &m) ==
            RH_ERROR_INVALID_ARGUMENT,
        "avg on int64");
  check(m.find("avg") != std::string::npos && m.find("int64") != std::string::npos, m);
  check(code_of(api, api->Comm_ReduceScatter(comm, tin.get(), twhole.get(), RH_REDUCE_SUM, nullptr),
                &m) == RH_ERROR_INVALID_ARGUMENT,
        "reduce_scatter sizes");
  check(code_of(api, api->Comm_AllReduce(comm, nullptr, RH_REDUCE_SUM, nullptr), &m) ==
            RH_ERROR_INVALID_ARGUMENT,
        "NULL tensor");
  check(api->CommWork_IsCompleted(nullptr) == 1, "NULL work is completed");
  api->CommWork_Destroy(nullptr);

  ok(api, api->Comm_Barrier(comm), "final barrier");
  rh::comm::install_comm_api(services, nullptr);  // drops the groups before the world
  check(api->Comm_World == nullptr && api->Comm_AllReduce == nullptr, "entries cleared");
  return 0;
}

TEST(CommApiTest, CollectivesThroughTheCTableOnTwoRanks) {
  auto codes = rh::test::run_ranks(2, api_body);
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

TEST(CommApiTest, EntriesAreNullWithoutAWorld) {
  rh::host::HostServices services;
  rh::comm::install_comm_api(services, nullptr);
  EXPECT_EQ(services.api()->Comm_World, nullptr);
  EXPECT_EQ(services.api()->Comm_AllReduce, nullptr);
  EXPECT_EQ(services.api()->CommWork_Wait, nullptr);
}

}  // namespace
