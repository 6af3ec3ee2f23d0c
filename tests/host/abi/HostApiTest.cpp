// The host API table as plugins see it: errors, config access with lookup
// recording, run state with struct_size, state dicts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "abi/HostApi.hpp"
#include "abi/StateDict.hpp"
#include "common/TestUtil.hpp"
#include "config/ConfigNode.hpp"
#include "config/JobLoader.hpp"

using ::testing::HasSubstr;

namespace {

class HostApiTest : public ::testing::Test {
 protected:
  rh::host::HostServices services;
  const rh_HostApi* api = services.api();
  rh::test::TempDir dir;

  std::string message(rh_Error* e) {
    rh_StringView m = api->Error_Message(e);
    std::string s(m.data, m.size);
    api->Error_Destroy(e);
    return s;
  }
};

TEST_F(HostApiTest, TableAnnouncesItsVersionAndSize) {
  EXPECT_EQ(api->struct_size, RH_HOST_API_STRUCT_SIZE);
  EXPECT_EQ(api->abi_major, RH_ABI_VERSION_MAJOR);
  EXPECT_EQ(api->abi_minor, RH_ABI_VERSION_MINOR);
  EXPECT_NE(api->Error_Create, nullptr);
  EXPECT_EQ(api->Comm_World, nullptr);  // not provided until a communicator exists
}

TEST_F(HostApiTest, ErrorsCarryCodeAndMessageAndDestroyAcceptsNull) {
  rh_Error* e = api->Error_Create(RH_ERROR_IO, "disk full", 9);
  EXPECT_EQ(api->Error_Code(e), RH_ERROR_IO);
  EXPECT_EQ(message(e), "disk full");
  api->Error_Destroy(nullptr);
}

TEST_F(HostApiTest, ConfigAccessRecordsLookupsAndReportsLocations) {
  auto job = rh::config::load_job(
      dir.write("job.yaml",
                "model: {type: mlp}\nstrategy:\n  type: x\n  cap: abc\n  list: [1, 2]\n")
          .string(),
      {});
  auto* strategy = reinterpret_cast<const rh_ConfigNode*>(job.root->find("strategy"));
  EXPECT_EQ(api->Config_Kind(strategy), RH_CONFIG_MAP);
  EXPECT_EQ(api->Config_Get(strategy, "absent", 6), nullptr);
  const rh_ConfigNode* cap = api->Config_Get(strategy, "cap", 3);
  ASSERT_NE(cap, nullptr);
  int64_t v = 0;
  std::string err = message(api->Config_AsInt(cap, &v));
  EXPECT_THAT(err, HasSubstr("job.yaml:4:8: strategy.cap: expected an integer, got 'abc'"));
  rh_StringView s{};
  EXPECT_EQ(api->Config_AsString(cap, &s), nullptr);
  EXPECT_EQ(std::string(s.data, s.size), "abc");
  const rh_ConfigNode* list = api->Config_Get(strategy, "list", 4);
  EXPECT_EQ(api->Config_Size(list), 2u);
  EXPECT_EQ(api->Config_AsInt(api->Config_At(list, 1), &v), nullptr);
  EXPECT_EQ(v, 2);
  EXPECT_EQ(api->Config_At(list, 2), nullptr);
  rh_StringView path = api->Config_Path(api->Config_At(list, 0));
  EXPECT_EQ(std::string(path.data, path.size), "strategy.list.0");
  auto lookups = job.root->find("strategy")->lookups();
  EXPECT_TRUE(lookups.count("absent"));
  EXPECT_TRUE(lookups.count("cap"));
  EXPECT_THAT(message(api->Config_Error(cap, "too big", 7)),
              HasSubstr("job.yaml:4:8: strategy.cap: too big"));
}

TEST_F(HostApiTest, RunStateRespectsTheCallersStructSize) {
  rh_RunState s{};
  s.struct_size = RH_RUN_STATE_STRUCT_SIZE;
  s.epoch = 3;
  s.iter = 7;
  services.set_run_state(s);
  rh_Context* ctx = services.new_context("p", "hook p");
  // An older plugin that only knows the fields up to `iter`.
  rh_RunState old{};
  old.struct_size = RH_STRUCT_SIZE(rh_RunState, iter);
  old.world_size = -5;
  ASSERT_EQ(api->RunState_Get(ctx, &old), nullptr);
  EXPECT_EQ(old.struct_size, RH_STRUCT_SIZE(rh_RunState, iter));
  EXPECT_EQ(old.epoch, 3);
  EXPECT_EQ(old.iter, 7);
  EXPECT_EQ(old.world_size, -5);  // past its struct_size: untouched
}

TEST_F(HostApiTest, MetricsAreCollectedInOrder) {
  rh_Context* ctx = services.new_context("p", "hook p");
  EXPECT_EQ(api->Metric_Put(ctx, "loss_scale", 10, 1024.0), nullptr);
  EXPECT_EQ(api->Metric_Put(ctx, "x", 1, 2.0), nullptr);
  EXPECT_THAT(message(api->Metric_Put(ctx, "", 0, 1.0)), HasSubstr("needs a name"));
  auto m = services.take_metrics();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].first, "loss_scale");
  EXPECT_EQ(m[1].second, 2.0);
  EXPECT_TRUE(services.take_metrics().empty());
}

TEST_F(HostApiTest, StateDictCopiesStridedTensorsAndBytes) {
  // A 2x3 float tensor viewed transposed (3x2, strides {1, 3}).
  float data[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[2] = {3, 2};
  int64_t strides[2] = {1, 3};
  DLManagedTensor t{};
  t.dl_tensor = DLTensor{data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, strides, 0};
  rh_StateDict dict;
  ASSERT_EQ(api->StateDict_PutTensor(&dict, "w", 1, &t), nullptr);
  data[0] = 99;  // the dict holds a copy
  ASSERT_EQ(api->StateDict_PutBytes(&dict, "blob", 4, "abc", 3), nullptr);
  EXPECT_EQ(api->StateDict_Size(&dict), 2u);
  rh_StringView k0 = api->StateDict_KeyAt(&dict, 0);
  EXPECT_EQ(std::string(k0.data, k0.size), "blob");
  const DLManagedTensor* out = nullptr;
  ASSERT_EQ(api->StateDict_GetTensor(&dict, "w", 1, &out), nullptr);
  ASSERT_EQ(out->dl_tensor.ndim, 2);
  EXPECT_EQ(out->dl_tensor.shape[0], 3);
  const float* f = static_cast<const float*>(out->dl_tensor.data);
  EXPECT_EQ(std::vector<float>(f, f + 6), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  rh_StringView blob{};
  ASSERT_EQ(api->StateDict_GetBytes(&dict, "blob", 4, &blob), nullptr);
  EXPECT_EQ(std::string(blob.data, blob.size), "abc");
  rh_Error* e = api->StateDict_GetTensor(&dict, "blob", 4, &out);
  EXPECT_EQ(api->Error_Code(e), RH_ERROR_NOT_FOUND);
  api->Error_Destroy(e);
  DLManagedTensor gpu = t;
  gpu.dl_tensor.device = {kDLCUDA, 0};
  EXPECT_THAT(message(api->StateDict_PutTensor(&dict, "g", 1, &gpu)),
              HasSubstr("host-memory tensors"));
}

// A plugin's tensor description is checked before anything is allocated or
// copied: a shape whose byte size overflows would otherwise allocate a short
// buffer and copy past it.
TEST_F(HostApiTest, StateDictRefusesBadTensorShapes) {
  float data[4] = {1, 2, 3, 4};
  struct Case {
    std::vector<int64_t> shape;
    int32_t ndim;  // -1: shape.size()
    DLDataType dtype;
    std::string message;
  };
  const int64_t big = int64_t{1} << 62;
  const std::vector<Case> cases = {
      {{big, big}, -1, {kDLFloat, 32, 1}, "the element count of its shape overflows"},
      {{big, 4}, -1, {kDLFloat, 32, 1}, "the element count of its shape overflows"},
      {{int64_t{1} << 61, 1},
       -1,
       {kDLFloat, 64, 1},
       "its size in bytes (2305843009213693952 elements of 8 bytes) overflows"},
      {{int64_t{1} << 62},
       -1,
       {kDLFloat, 32, 1},
       "its size in bytes (4611686018427387904 elements of 4 bytes) overflows"},
      {{2, -3}, -1, {kDLFloat, 32, 1}, "dimension 1 is -3"},
      {{2},
       -1,
       {kDLFloat, 4, 1},
       "dtype has 4 bits and 1 lanes; only whole bytes per element can be stored"},
      {{2},
       -1,
       {kDLFloat, 32, 0},
       "dtype has 32 bits and 0 lanes; only whole bytes per element can be stored"},
      {std::vector<int64_t>(65, 1), -1, {kDLFloat, 32, 1}, "ndim is 65, expected 0..64"},
      {{2}, -1, {kDLFloat, 32, 1}, ""},  // fine (a control)
      {{2}, 1 << 30, {kDLFloat, 32, 1}, "ndim is 1073741824, expected 0..64"},
      {{2}, -5, {kDLFloat, 32, 1}, "ndim is -5, expected 0..64"},
  };
  rh_StateDict dict;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    std::vector<int64_t> shape = c.shape;
    DLManagedTensor t{};
    const int32_t ndim = c.ndim == -1 ? static_cast<int32_t>(shape.size()) : c.ndim;
    t.dl_tensor = DLTensor{data, {kDLCPU, 0}, ndim, c.dtype, shape.data(), nullptr, 0};
    rh_Error* e = api->StateDict_PutTensor(&dict, "w", 1, &t);
    if (c.message.empty()) {
      EXPECT_EQ(e, nullptr);
      continue;
    }
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(api->Error_Code(e), RH_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(message(e), "StateDict_PutTensor: tensor 'w': " + c.message);
  }
  // The refused puts left the good entry as it was.
  const DLManagedTensor* out = nullptr;
  ASSERT_EQ(api->StateDict_GetTensor(&dict, "w", 1, &out), nullptr);
  EXPECT_EQ(out->dl_tensor.ndim, 1);
  EXPECT_EQ(out->dl_tensor.shape[0], 2);

  DLManagedTensor no_shape{};
  no_shape.dl_tensor = DLTensor{data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, nullptr, nullptr, 0};
  EXPECT_EQ(message(api->StateDict_PutTensor(&dict, "v", 1, &no_shape)),
            "StateDict_PutTensor: tensor 'v': shape is NULL");
  int64_t two[1] = {2};
  DLManagedTensor no_data{};
  no_data.dl_tensor = DLTensor{nullptr, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, two, nullptr, 0};
  EXPECT_EQ(message(api->StateDict_PutTensor(&dict, "v", 1, &no_data)),
            "StateDict_PutTensor: tensor 'v': data is NULL");
  EXPECT_EQ(message(api->StateDict_PutTensor(&dict, nullptr, 3, &no_data)),
            "StateDict_PutTensor: NULL argument");
}

// ABI 1.7: a checkpoint-IO plugin reads a tensor straight into memory the
// host gives it, which is the registered destination when dtype and shape
// are exactly its, and a fresh buffer otherwise.
TEST_F(HostApiTest, AllocTensorHandsOutTheDestinationOrAFreshBuffer) {
  rh_StateDict dict;
  std::vector<float> param(6, 0.0f);
  dict.destinations["w"] = {param.data(), {kDLFloat, 32, 1}, {2, 3}};
  int64_t shape[2] = {2, 3};
  void* data = nullptr;
  ASSERT_EQ(api->StateDict_AllocTensor(&dict, "w", 1, {kDLFloat, 32, 1}, shape, 2, &data), nullptr);
  EXPECT_EQ(data, param.data());
  static_cast<float*>(data)[5] = 7.0f;
  const DLManagedTensor* out = nullptr;
  ASSERT_EQ(api->StateDict_GetTensor(&dict, "w", 1, &out), nullptr);
  EXPECT_EQ(out->dl_tensor.data, param.data());
  EXPECT_EQ(param[5], 7.0f);

  // Another shape or dtype than the destination's: a buffer of its own,
  // which the entry owns (it outlives a copy of the dict's entry map).
  int64_t other[2] = {3, 2};
  ASSERT_EQ(api->StateDict_AllocTensor(&dict, "w", 1, {kDLFloat, 32, 1}, other, 2, &data), nullptr);
  EXPECT_NE(data, param.data());
  ASSERT_EQ(api->StateDict_AllocTensor(&dict, "w", 1, {kDLFloat, 64, 1}, shape, 2, &data), nullptr);
  EXPECT_NE(data, param.data());
  std::memset(data, 0xab, 6 * 8);
  ASSERT_EQ(api->StateDict_GetTensor(&dict, "w", 1, &out), nullptr);
  EXPECT_EQ(out->dl_tensor.data, data);
  EXPECT_EQ(out->dl_tensor.dtype.bits, 64);
  EXPECT_EQ(static_cast<const unsigned char*>(out->dl_tensor.data)[47], 0xab);

  // Buffers of 2 MiB and more (huge-page aligned) and of 0 bytes.
  int64_t big[1] = {1 << 20};
  ASSERT_EQ(api->StateDict_AllocTensor(&dict, "big", 3, {kDLFloat, 32, 1}, big, 1, &data), nullptr);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % (2u << 20), 0u);
  static_cast<float*>(data)[(1 << 20) - 1] = 1.0f;
  int64_t none[1] = {0};
  ASSERT_EQ(api->StateDict_AllocTensor(&dict, "empty", 5, {kDLFloat, 32, 1}, none, 1, &data),
            nullptr);
  EXPECT_EQ(data, nullptr);
  EXPECT_EQ(dict.entries.at("empty").size(), 0u);
}

TEST_F(HostApiTest, AllocTensorRefusesWhatPutTensorRefuses) {
  rh_StateDict dict;
  void* data = nullptr;
  int64_t bad[2] = {2, -3};
  EXPECT_EQ(message(api->StateDict_AllocTensor(&dict, "w", 1, {kDLFloat, 32, 1}, bad, 2, &data)),
            "StateDict_AllocTensor: tensor 'w': dimension 1 is -3");
  const int64_t huge = int64_t{1} << 62;
  int64_t overflow[2] = {huge, huge};
  EXPECT_EQ(
      message(api->StateDict_AllocTensor(&dict, "w", 1, {kDLFloat, 32, 1}, overflow, 2, &data)),
      "StateDict_AllocTensor: tensor 'w': the element count of its shape overflows");
  EXPECT_EQ(
      message(api->StateDict_AllocTensor(&dict, "w", 1, {kDLFloat, 32, 1}, nullptr, 2, &data)),
      "StateDict_AllocTensor: tensor 'w': shape is NULL");
  EXPECT_EQ(message(api->StateDict_AllocTensor(&dict, "w", 1, {kDLFloat, 32, 1}, bad, 70, &data)),
            "StateDict_AllocTensor: tensor 'w': ndim is 70, expected 0..64");
  EXPECT_EQ(message(api->StateDict_AllocTensor(&dict, "w", 1, {kDLFloat, 32, 1}, bad, 1, nullptr)),
            "StateDict_AllocTensor: NULL argument");
  EXPECT_TRUE(dict.entries.empty());
}

// ABI 1.7: the checksum a plugin computed while writing is what the host
// keeps for meta.json; blobs and absent keys have none to set.
TEST_F(HostApiTest, SetChecksumRecordsTheWritersChecksumOfATensor) {
  rh_StateDict dict;
  float data[2] = {1, 2};
  int64_t shape[1] = {2};
  DLManagedTensor t{};
  t.dl_tensor = DLTensor{data, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
  ASSERT_EQ(api->StateDict_PutTensor(&dict, "w", 1, &t), nullptr);
  ASSERT_EQ(api->StateDict_PutBytes(&dict, "blob", 4, "abc", 3), nullptr);
  EXPECT_FALSE(dict.entries.at("w").crc32.has_value());
  ASSERT_EQ(api->StateDict_SetChecksum(&dict, "w", 1, 0x12345678u), nullptr);
  EXPECT_EQ(dict.entries.at("w").crc32, 0x12345678u);
  rh_Error* e = api->StateDict_SetChecksum(&dict, "blob", 4, 1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(api->Error_Code(e), RH_ERROR_NOT_FOUND);
  EXPECT_EQ(message(e), "StateDict_SetChecksum: no tensor named 'blob'");
  EXPECT_EQ(message(api->StateDict_SetChecksum(&dict, "x", 1, 1)),
            "StateDict_SetChecksum: no tensor named 'x'");
}

}  // namespace
