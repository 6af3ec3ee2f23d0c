#include "host/model/ModelTestUtil.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/TestUtil.hpp"
#include "config/JobLoader.hpp"

namespace rh::model::test {

std::string data_path(const std::string& relative) {
  return std::string(RH_TEST_DATA_DIR) + "/model/" + relative;
}

config::NodePtr model_config(const std::string& body) {
  rh::test::TempDir dir;
  std::string text = "model:\n";
  size_t start = 0;
  while (start < body.size()) {
    const size_t end = body.find('\n', start);
    text += "  " + body.substr(start, end == std::string::npos ? std::string::npos : end - start) +
            "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  config::Job job = config::load_job(dir.write("job.yaml", text).string(), {});
  return job.root->get("model");
}

std::unique_ptr<Model> build(const std::string& body, uint64_t seed, const std::string& job_dir) {
  return build_model(*model_config(body), seed, job_dir);
}

std::vector<std::string> param_names(Model& model) {
  std::vector<std::string> names;
  for (const NamedTensor& p : model.named_parameters()) names.push_back(p.name);
  return names;
}

std::vector<std::string> unit_names(const Model& model) {
  std::vector<std::string> names;
  for (const Unit& u : model.units()) names.push_back(u.name);
  return names;
}

std::vector<at::Tensor> snapshot(Model& model) {
  std::vector<at::Tensor> copies;
  for (const NamedTensor& p : model.named_parameters()) copies.push_back(p.tensor.detach().clone());
  return copies;
}

at::Tensor loss_of(Model& model, const at::Tensor& input, const at::Tensor& target) {
  at::Tensor logits = model.forward(input);
  return torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}));
}

std::pair<double, double> fit(Model& model, const at::Tensor& input, const at::Tensor& target,
                              int steps, double lr) {
  std::vector<at::Tensor> params;
  for (const NamedTensor& p : model.named_parameters()) params.push_back(p.tensor);
  torch::optim::Adam adam(params, torch::optim::AdamOptions(lr));
  double first = 0;
  for (int step = 0; step < steps; ++step) {
    adam.zero_grad();
    at::Tensor loss = loss_of(model, input, target);
    if (step == 0) first = loss.item<double>();
    loss.backward();
    adam.step();
  }
  torch::NoGradGuard no_grad;
  return {first, loss_of(model, input, target).item<double>()};
}

void expect_causal(Model& model, int64_t vocab, int64_t batch, int64_t tokens) {
  model.train(false);
  torch::NoGradGuard no_grad;
  at::Tensor ids = torch::randint(0, vocab, {batch, tokens});
  const at::Tensor before = model.forward(ids);
  ASSERT_EQ(before.sizes(), at::IntArrayRef({batch, tokens, vocab}));
  for (int64_t t = 0; t + 1 < tokens; ++t) {
    at::Tensor changed = ids.clone();
    changed.index_put_({torch::indexing::Slice(), t + 1}, (ids.select(1, t + 1) + 1) % vocab);
    const at::Tensor after = model.forward(changed);
    EXPECT_TRUE(torch::equal(after.slice(1, 0, t + 1), before.slice(1, 0, t + 1))) << "t=" << t;
    EXPECT_FALSE(torch::allclose(after.select(1, t + 1), before.select(1, t + 1))) << "t=" << t;
  }
}

}  // namespace rh::model::test
