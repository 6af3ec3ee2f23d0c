// Helpers shared by the model tests: model configs from YAML text, building,
// parameter snapshots and a few optimisation steps.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/ConfigNode.hpp"
#include "model/Model.hpp"

namespace rh::model::test {

// <RH_TEST_DATA_DIR>/model/<relative>
std::string data_path(const std::string& relative);

// The `model:` node of a job file whose model map is `body` (block YAML,
// e.g. "type: mlp\nin_features: 8\nnum_classes: 3"). Paths: "model.<key>";
// `body` starts on line 2, column 3 of that file.
config::NodePtr model_config(const std::string& body);

std::unique_ptr<Model> build(const std::string& body, uint64_t seed = 0,
                             const std::string& job_dir = ".");

std::vector<std::string> param_names(Model& model);
std::vector<std::string> unit_names(const Model& model);

// Deep copies of the parameters, in order.
std::vector<at::Tensor> snapshot(Model& model);

// Cross entropy of the model's logits: classification (B, C) vs (B), language
// model (B, T, V) vs (B, T).
at::Tensor loss_of(Model& model, const at::Tensor& input, const at::Tensor& target);

// A language model's logits at position t depend on tokens 0..t only: for
// every t, changing token t + 1 of random (batch, tokens) ids below `vocab`
// leaves the logits of positions 0..t bit for bit and changes t + 1's.
void expect_causal(Model& model, int64_t vocab, int64_t batch, int64_t tokens);

// Runs `steps` Adam steps on one fixed batch; returns the loss before the
// first step and after the last.
std::pair<double, double> fit(Model& model, const at::Tensor& input, const at::Tensor& target,
                              int steps, double lr);

}  // namespace rh::model::test
