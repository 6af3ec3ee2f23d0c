// load_into (host/checkpoint/TensorDict.cpp), which copies a checkpoint's
// tensors into the model at resume and load_from: a tensor of another dtype
// is a mismatch naming the tensor and both dtypes, never a silent conversion.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "abi/StateDict.hpp"
#include "checkpoint/TensorDict.hpp"

namespace rh::checkpoint {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TensorDictTest, MatchingTensorsAreCopied) {
  rh_StateDict dict;
  put_tensor(dict, "w", torch::tensor({1.5f, 2.5f}));
  at::Tensor w = torch::zeros({2});
  LoadReport r = load_into(dict, "", {{"w", w}});
  EXPECT_TRUE(r.ok()) << r.str();
  EXPECT_TRUE(torch::equal(w, torch::tensor({1.5f, 2.5f})));
}

TEST(TensorDictTest, ADtypeDifferenceIsAMismatchNotAConversion) {
  rh_StateDict dict;
  put_tensor(dict, "w", torch::tensor({1.5, 2.5}, torch::kDouble));
  put_tensor(dict, "h", torch::tensor({1, 2}, torch::kHalf));
  put_tensor(dict, "n", torch::tensor({int64_t{7}}, torch::kLong));
  at::Tensor w = torch::zeros({2});
  at::Tensor h = torch::zeros({2});
  at::Tensor n = torch::zeros({1}, torch::kInt);
  LoadReport r = load_into(dict, "", {{"w", w}, {"h", h}, {"n", n}});
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.mismatched, ElementsAre("w: checkpoint dtype Double vs model Float",
                                        "h: checkpoint dtype Half vs model Float",
                                        "n: checkpoint dtype Long vs model Int"));
  EXPECT_THAT(r.str(), HasSubstr("mismatched (shape or dtype) (3): w: checkpoint dtype Double"));
  // Nothing was copied.
  EXPECT_TRUE(torch::equal(w, torch::zeros({2})));
  EXPECT_TRUE(torch::equal(n, torch::zeros({1}, torch::kInt)));
}

TEST(TensorDictTest, ADtypeLibTorchCannotRepresentIsAMismatch) {
  // A 24-bit integer tensor: DLPack can describe it, no LibTorch has it
  // (U16, which 1.13 lacked, is a LibTorch dtype from 2.3 on).
  rh_StateDict dict;
  uint8_t data[6] = {1, 0, 0, 2, 0, 0};
  int64_t shape[1] = {2};
  DLManagedTensor t{};
  t.dl_tensor = DLTensor{data, {kDLCPU, 0}, 1, {kDLInt, 24, 1}, shape, nullptr, 0};
  dict.entries["w"] = host::copy_tensor_entry(t, "w");
  at::Tensor w = torch::zeros({2});
  LoadReport r = load_into(dict, "", {{"w", w}});
  EXPECT_THAT(r.mismatched,
              ElementsAre("w: checkpoint dtype DLPack code 0 bits 24 vs model Float"));
}

TEST(TensorDictTest, ShapeMismatchesAndMissingAndUnexpectedAreReported) {
  rh_StateDict dict;
  put_tensor(dict, "w", torch::zeros({2, 3}));
  put_tensor(dict, "extra", torch::zeros({1}));
  at::Tensor w = torch::zeros({3, 2});
  at::Tensor b = torch::zeros({2});
  LoadReport r = load_into(dict, "", {{"w", w}, {"b", b}});
  EXPECT_THAT(r.mismatched, ElementsAre("w: checkpoint [2, 3] vs model [3, 2]"));
  EXPECT_THAT(r.missing, ElementsAre("b"));
  EXPECT_THAT(r.unexpected, ElementsAre("extra"));
}

// A tensor the checkpoint-IO plugin read into the place registered for it
// (place_into) is already in the model: load_into copies nothing, and only
// the model's CPU, contiguous tensors are places.
TEST(TensorDictTest, ATensorReadInPlaceIsNotCopiedAgain) {
  at::Tensor w = torch::zeros({2, 3});
  at::Tensor strided = torch::zeros({3, 2}).t();
  rh_StateDict dict;
  place_into(dict, "model.", {{"w", w}, {"s", strided}});
  ASSERT_EQ(dict.destinations.count("model.w"), 1u);
  EXPECT_EQ(dict.destinations.count("model.s"), 0u);  // not contiguous: no place
  float* data = reinterpret_cast<float*>(
      host::alloc_tensor_entry(dict, "model.w", {kDLFloat, 32, 1}, {2, 3}, 24));
  ASSERT_EQ(data, w.data_ptr<float>());
  for (int i = 0; i < 6; ++i) data[i] = static_cast<float>(i);
  LoadReport r = load_into(dict, "model.", {{"w", w}});
  EXPECT_TRUE(r.ok()) << r.str();
  EXPECT_TRUE(torch::equal(w, torch::arange(6, torch::kFloat).view({2, 3})));
  // Another shape than the place's gets a buffer of its own and is reported.
  host::alloc_tensor_entry(dict, "model.w", {kDLFloat, 32, 1}, {3, 2}, 24);
  EXPECT_NE(dict.entries.at("model.w").data(), reinterpret_cast<const uint8_t*>(w.data_ptr()));
  EXPECT_FALSE(load_into(dict, "model.", {{"w", w}}).ok());
}

// take_tensor hands the entry's memory over: no copy, the entry is gone,
// and the memory lives as long as the tensor (not the dict).
TEST(TensorDictTest, TakeTensorKeepsTheMemoryWithoutACopy) {
  at::Tensor taken;
  const uint8_t* where = nullptr;
  {
    rh_StateDict dict;
    float* data = reinterpret_cast<float*>(
        host::alloc_tensor_entry(dict, "m", {kDLFloat, 32, 1}, {1 << 20}, 4 << 20));
    for (int i = 0; i < (1 << 20); ++i) data[i] = 0.5f;
    where = dict.entries.at("m").data();
    put_tensor(dict, "v", torch::tensor({1.0f, 2.0f}));
    taken = take_tensor(dict, "m");
    EXPECT_EQ(dict.entries.count("m"), 0u);
    EXPECT_EQ(static_cast<const void*>(taken.data_ptr()), static_cast<const void*>(where));
    at::Tensor v = take_tensor(dict, "v");
    EXPECT_TRUE(torch::equal(v, torch::tensor({1.0f, 2.0f})));
  }  // the dict is gone
  EXPECT_EQ(taken.sizes(), at::IntArrayRef({1 << 20}));
  EXPECT_EQ(taken.sum().item<float>(), 0.5f * (1 << 20));
}

}  // namespace
}  // namespace rh::checkpoint
