// Activation checkpointing (model/ActivationCheckpoint.cpp) on every model
// type: with every unit recomputed (full), every other (selective 2) and
// none, one forward and backward from the same generator state give the same
// loss, the same gradients and the same batch-norm statistics bit for bit,
// and leave the generator where it was without checkpointing (dropout is on:
// the recompute must draw the forward's numbers and put the generator back).
// The graph of a recomputed unit holds nothing of its inside: only a
// RecomputeBackward node per unit, which is what frees its activations.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>

#include "host/model/ModelTestUtil.hpp"
#include "model/ActivationCheckpointConfig.hpp"

namespace rh::model::test {
namespace {

struct Case {
  std::string name, body;
  bool language_model;
};

std::vector<Case> cases() {
  return {
      {"gpt",
       "type: gpt\nvocab_size: 13\nblock_size: 8\ndim: 16\ndepth: 3\nheads: 2\ndropout: 0.2\n"
       "tie_weights: true",
       true},
      {"mlp", "type: mlp\nin_features: 6\nhidden: [16, 16, 16]\nnum_classes: 4\ndropout: 0.3",
       false},
      {"vit",
       "type: vit\nimage_size: 8\npatch_size: 4\ndim: 16\ndepth: 2\nheads: 2\nnum_classes: 4\n"
       "dropout: 0.2",
       false},
      {"convnet", "type: convnet\nnum_classes: 4\nwidth: 4\nblocks: [1, 1]", false},
      {"torchscript", "type: torchscript\npath: " + data_path("tiny_mlp_scripted.pt"), false},
  };
}

struct Pass {
  double loss = 0;
  std::vector<at::Tensor> grads, buffers;
  at::Tensor rng_after;
};

std::pair<at::Tensor, at::Tensor> batch(const Case& c) {
  torch::manual_seed(3);
  if (c.language_model) return {torch::randint(0, 13, {3, 8}), torch::randint(0, 13, {3, 8})};
  if (c.name == "vit" || c.name == "convnet")
    return {torch::randn({3, 3, 8, 8}), torch::randint(0, 4, {3})};
  if (c.name == "mlp") return {torch::randn({3, 6}), torch::randint(0, 4, {3})};
  return {torch::randn({3, 4}), torch::randint(0, 2, {3})};  // tiny_mlp_scripted.pt: 4 -> 2
}

Pass one_pass(const Case& c, std::vector<bool> recomputed) {
  auto model = build(c.body, /*seed=*/1, ".");
  model->train(true);
  model->set_recomputed_units(std::move(recomputed));
  auto [input, target] = batch(c);
  torch::manual_seed(11);  // dropout's numbers
  at::Tensor loss = loss_of(*model, input, target);
  loss.backward();
  Pass p;
  p.loss = loss.item<double>();
  for (const NamedTensor& t : model->named_parameters())
    p.grads.push_back(t.tensor.grad().defined() ? t.tensor.grad().clone() : at::Tensor());
  for (const NamedTensor& b : model->named_buffers()) p.buffers.push_back(b.tensor.clone());
  p.rng_after = at::globalContext().defaultGenerator(at::kCPU).get_state();
  return p;
}

void expect_same(const Pass& a, const Pass& b, const std::string& what) {
  EXPECT_EQ(a.loss, b.loss) << what;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    ASSERT_EQ(a.grads[i].defined(), b.grads[i].defined()) << what << " param " << i;
    if (a.grads[i].defined()) {
      EXPECT_TRUE(torch::equal(a.grads[i], b.grads[i])) << what << " param " << i;
    }
  }
  for (size_t i = 0; i < a.buffers.size(); ++i)
    EXPECT_TRUE(torch::equal(a.buffers[i], b.buffers[i])) << what << " buffer " << i;
  EXPECT_TRUE(torch::equal(a.rng_after, b.rng_after)) << what << ": the generator moved";
}

TEST(ActivationCheckpointTest, RecomputingGivesTheSameGradientsBitForBit) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const size_t units = build(c.body, 1, ".")->units().size();
    const Pass plain = one_pass(c, {});
    expect_same(plain, one_pass(c, std::vector<bool>(units, true)), "full");
    ActivationCheckpointConfig every_other;
    every_other.mode = ActivationCheckpointConfig::Mode::Selective;
    every_other.every = 2;
    expect_same(plain, one_pass(c, every_other.recomputed(units)), "selective 2");
  }
}

// Every node reachable from the loss, by name.
std::multiset<std::string> graph_nodes(const at::Tensor& loss) {
  std::multiset<std::string> names;
  std::set<torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> todo{loss.grad_fn().get()};
  while (!todo.empty()) {
    torch::autograd::Node* n = todo.back();
    todo.pop_back();
    if (n == nullptr || !seen.insert(n).second) continue;
    names.insert(n->name());
    for (const auto& e : n->next_edges()) todo.push_back(e.function.get());
  }
  return names;
}

TEST(ActivationCheckpointTest, ARecomputedUnitKeepsOneNodeAndNothingOfItsInside) {
  const Case c = cases().front();  // gpt: embed, 3 blocks, head
  auto model = build(c.body, 1, ".");
  model->train(true);
  auto [input, target] = batch(c);
  const std::multiset<std::string> plain = graph_nodes(loss_of(*model, input, target));
  model->set_recomputed_units({false, true, true, true, false});
  const std::multiset<std::string> ac = graph_nodes(loss_of(*model, input, target));
  EXPECT_EQ(ac.count("rh::RecomputeBackward"), 3u);
  EXPECT_EQ(plain.count("rh::RecomputeBackward"), 0u);
  // A block's inside (layer norms, attention, MLP) is gone from the graph;
  // the head's layer norm is not recomputed and stays.
  const auto norms = [](const std::multiset<std::string>& g) {
    size_t n = 0;
    for (const std::string& s : g) n += s.find("LayerNorm") != std::string::npos;
    return n;
  };
  EXPECT_EQ(norms(plain), 2u * 3 + 1);
  EXPECT_EQ(norms(ac), 1u);
  EXPECT_LT(ac.size() * 3, plain.size())
      << "nodes with / without: " << ac.size() << " / " << plain.size();
}

TEST(ActivationCheckpointTest, WithoutGradModeNothingIsRecomputed) {
  const Case c = cases().front();
  auto model = build(c.body, 1, ".");
  model->train(false);
  auto [input, target] = batch(c);
  const at::Tensor plain = model->forward(input);
  model->set_recomputed_units(std::vector<bool>(5, true));
  torch::NoGradGuard no_grad;
  const at::Tensor ac = model->forward(input);
  EXPECT_FALSE(ac.requires_grad());
  EXPECT_TRUE(torch::equal(plain.detach(), ac));
}

TEST(ActivationCheckpointTest, SelectiveCountsUnitsFromOneAsTorchtitanCountsBlocks) {
  ActivationCheckpointConfig c;
  c.mode = ActivationCheckpointConfig::Mode::Selective;
  c.every = 2;
  EXPECT_EQ(c.recomputed(5), (std::vector<bool>{false, true, false, true, false}));
  c.mode = ActivationCheckpointConfig::Mode::Full;
  c.every = 1;
  EXPECT_EQ(c.recomputed(3), (std::vector<bool>{true, true, true}));
  c.mode = ActivationCheckpointConfig::Mode::None;
  EXPECT_EQ(c.recomputed(2), (std::vector<bool>{false, false}));
}

}  // namespace
}  // namespace rh::model::test
