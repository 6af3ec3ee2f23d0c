// Helpers shared by the optimizer and scheduler tests: configs from YAML text
// and named parameters without a model.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/ConfigNode.hpp"
#include "config/YamlReader.hpp"
#include "optim/OptimWrapper.hpp"

namespace rh::optim::test {

// A job tree parsed from `yaml` (file name "job.yaml"), kept alive with the
// subtree a test hands to a constructor.
struct Job {
  explicit Job(const std::string& yaml) : root(config::parse_yaml(yaml, "job.yaml")) {}
  const config::Node& at(const std::string& key) const {
    const config::Node* node = root->find(key);
    EXPECT_NE(node, nullptr) << key;
    return *node;
  }
  config::NodePtr root;
};

// A leaf parameter (requires grad) holding a copy of `values`.
inline at::Tensor leaf(const at::Tensor& values) {
  return values.detach().clone().set_requires_grad(true);
}

// Deterministic, non-trivial values: sin(seed + 0.7 i), shaped `shape`.
inline at::Tensor wave(at::IntArrayRef shape, double seed, at::ScalarType dtype = at::kFloat) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return (at::arange(n, at::kDouble) * 0.7 + seed).sin().reshape(shape).to(dtype);
}

}  // namespace rh::optim::test
