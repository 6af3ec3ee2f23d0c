#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <fstream>
#include <iostream>

#include "common/PythonTorch.hpp"
#include "common/TestUtil.hpp"
#include "config/ConfigNode.hpp"
#include "host/model/ModelTestUtil.hpp"
#include "model/ParamRegistry.hpp"

namespace rh::model::test {
namespace {

// Grouped-query attention (4 query heads, 2 key/value heads), a
// feed-forward width of floor(8 * 16 / 3) = 42 rounded up to 48.
const char* const kTinyLlama =
    "type: llama\nvocab_size: 11\ndim: 16\nn_layers: 2\nn_heads: 4\nn_kv_heads: 2\n"
    "multiple_of: 8\nmax_seq_len: 6";

std::vector<int64_t> llama_shape_of(Model& model, const std::string& name) {
  for (const auto& p : model.named_parameters())
    if (p.name == name) return p.tensor.sizes().vec();
  ADD_FAILURE() << "no parameter " << name;
  return {};
}

TEST(LlamaTest, NamesShapesAndUnitsAreMetasAndTorchtitans) {
  auto model = build(kTinyLlama);
  const std::vector<std::string> layer = {
      "attention_norm.weight",  "attention.wq.weight",    "attention.wk.weight",
      "attention.wv.weight",    "attention.wo.weight",    "ffn_norm.weight",
      "feed_forward.w1.weight", "feed_forward.w2.weight", "feed_forward.w3.weight"};
  std::vector<std::string> expected = {"tok_embeddings.weight"};
  for (const char* n : {"layers.0.", "layers.1."})
    for (const std::string& p : layer) expected.push_back(n + p);
  expected.push_back("norm.weight");
  expected.push_back("output.weight");
  EXPECT_EQ(param_names(*model), expected);
  EXPECT_EQ(unit_names(*model),
            (std::vector<std::string>{"tok_embeddings", "layers.0", "layers.1", "output"}));
  EXPECT_EQ(llama_shape_of(*model, "tok_embeddings.weight"), (std::vector<int64_t>{11, 16}));
  EXPECT_EQ(llama_shape_of(*model, "layers.1.attention.wq.weight"), (std::vector<int64_t>{16, 16}));
  EXPECT_EQ(llama_shape_of(*model, "layers.1.attention.wk.weight"), (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(llama_shape_of(*model, "layers.1.attention.wv.weight"), (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(llama_shape_of(*model, "layers.1.attention.wo.weight"), (std::vector<int64_t>{16, 16}));
  EXPECT_EQ(llama_shape_of(*model, "layers.0.feed_forward.w1.weight"),
            (std::vector<int64_t>{48, 16}));
  EXPECT_EQ(llama_shape_of(*model, "layers.0.feed_forward.w2.weight"),
            (std::vector<int64_t>{16, 48}));
  EXPECT_EQ(llama_shape_of(*model, "layers.0.feed_forward.w3.weight"),
            (std::vector<int64_t>{48, 16}));
  EXPECT_EQ(llama_shape_of(*model, "output.weight"), (std::vector<int64_t>{11, 16}));
  EXPECT_EQ(model->task(), Task::LanguageModel);
  // RMSNorm weights start at 1; the linears have no bias.
  for (const auto& p : model->named_parameters()) {
    EXPECT_EQ(p.name.find("bias"), std::string::npos) << p.name;
    if (p.name.find("norm") != std::string::npos) {
      EXPECT_TRUE(torch::equal(p.tensor, torch::ones_like(p.tensor))) << p.name;
    }
  }
}

// Llama 3 8B's published shapes (dim 4096, 32 heads, 8 key/value heads,
// ffn_dim_multiplier 1.3, multiple_of 1024: a feed-forward width of 14336),
// built on the meta device: nothing is allocated.
TEST(LlamaTest, Llama3EightBillionHasItsPublishedShapes) {
  const ParamRegistry::ShapesOnlyScope shapes_only;
  auto model = build(
      "type: llama\nvocab_size: 128256\ndim: 4096\nn_layers: 32\nn_heads: 32\nn_kv_heads: 8\n"
      "multiple_of: 1024\nffn_dim_multiplier: 1.3\nnorm_eps: 1.0e-5\nrope_theta: 500000\n"
      "max_seq_len: 8192");
  EXPECT_EQ(llama_shape_of(*model, "layers.31.attention.wk.weight"),
            (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(llama_shape_of(*model, "layers.0.feed_forward.w1.weight"),
            (std::vector<int64_t>{14336, 4096}));
  int64_t total = 0;
  for (const auto& p : model->named_parameters()) total += p.tensor.numel();
  EXPECT_EQ(total, 8030261248);  // Meta's "8B": 8,030,261,248 parameters
}

TEST(LlamaTest, LogitsAtTDoNotDependOnLaterTokens) {
  auto model = build(kTinyLlama);
  expect_causal(*model, /*vocab=*/11, /*batch=*/2, /*tokens=*/6);
}

TEST(LlamaTest, AFewStepsReduceTheLoss) {
  auto model = build(kTinyLlama);
  at::Generator gen = at::detail::createCPUGenerator(7);
  const at::Tensor ids = torch::randint(0, 11, {4, 6}, gen);
  const at::Tensor target = torch::roll(ids, -1, 1);
  const auto [first, last] = fit(*model, ids, target, /*steps=*/30, /*lr=*/1e-2);
  EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
}

TEST(LlamaTest, BadShapesAreRefusedNamingTheKey) {
  auto refused = [](const std::string& body) -> std::string {
    try {
      build(body);
    } catch (const config::ConfigError& e) {
      return e.what();
    }
    return "(built)";
  };
  EXPECT_NE(refused("type: llama\nvocab_size: 11\ndim: 18\nn_heads: 4")
                .find("model.n_heads: dim 18 is not a multiple of n_heads 4"),
            std::string::npos);
  EXPECT_NE(refused("type: llama\nvocab_size: 11\ndim: 16\nn_heads: 4\nn_kv_heads: 3")
                .find("model.n_kv_heads: n_heads 4 is not a multiple of n_kv_heads 3"),
            std::string::npos);
  EXPECT_NE(refused("type: llama\nvocab_size: 11\ndim: 12\nn_heads: 4")
                .find("model.n_heads: the head width dim / n_heads = 3 is odd"),
            std::string::npos);
  auto model = build(kTinyLlama);
  try {
    model->forward(torch::randint(0, 11, {1, 7}));
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "llama: input has T=7 tokens, more than max_seq_len=6 (raise model.max_seq_len "
                 "or feed shorter sequences)");
  }
}

// The forward against a hand-written reference (llama_reference.py: Meta's
// model.py, complex rotary embeddings and all), both in float64 on the same
// weights: the two differ only in the order of float64 operations (about
// 2^-53 relative each, on logits of magnitude < 10 after a few hundred
// operations), so 1e-10 is far above their rounding and far below a layout
// mistake: rotating halves instead of interleaved pairs moves these logits
// by 1.1e-4 (measured by breaking the reference so).
TEST(LlamaTest, EqualsAHandWrittenReferenceInFloat64) {
  RH_REQUIRE_PYTHON_TORCH(RH_INSTALL_DEPS);
  auto model = build(
      "type: llama\nvocab_size: 13\ndim: 24\nn_layers: 2\nn_heads: 6\nn_kv_heads: 2\n"
      "multiple_of: 16\nffn_dim_multiplier: 1.5\nnorm_eps: 1.0e-6\nrope_theta: 500000\n"
      "max_seq_len: 9",
      /*seed=*/3);
  model->train(false);
  torch::NoGradGuard no_grad;
  c10::Dict<std::string, at::Tensor> dump;
  for (auto& p : model->named_parameters()) {
    p.tensor.set_data(p.tensor.to(at::kDouble));
    dump.insert(p.name, p.tensor);
  }
  at::Generator gen = at::detail::createCPUGenerator(5);
  const at::Tensor ids = torch::randint(0, 13, {3, 9}, gen);
  const at::Tensor logits = model->forward(ids);
  ASSERT_EQ(logits.scalar_type(), at::kDouble);
  dump.insert("__ids__", ids);
  dump.insert("__logits__", logits);
  rh::test::TempDir dir;
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(dump));
  std::ofstream(dir / "llama.pt", std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const rh::test::CommandResult r = rh::test::run_command(
      "/usr/bin/python3 " + rh::test::quote(RH_LLAMA_REFERENCE) + " " +
      rh::test::quote((dir / "llama.pt").string()) + " 24 2 6 2 1e-6 500000 1e-10");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("max |reference - runner-host|"), std::string::npos) << r.output;
  std::cout << r.output;  // the difference, for the log
}

}  // namespace
}  // namespace rh::model::test
