// build_dataset(): the `dataset:` subtree -> a Dataset, one builder per type.
#include "data/Dataset.hpp"

#include <array>
#include <functional>
#include <map>

#include "config/ConfigNode.hpp"
#include "data/CharLmDataset.hpp"
#include "data/Cifar10Dataset.hpp"
#include "data/CsvDataset.hpp"
#include "data/DataFiles.hpp"
#include "data/MnistDataset.hpp"
#include "data/SyntheticClassificationDataset.hpp"
#include "data/TokenShardDataset.hpp"

namespace rh::data {
namespace {

using config::ConfigError;
using config::Node;

int64_t int_or(const Node& cfg, const std::string& key, int64_t fallback) {
  const Node* n = cfg.find(key);
  return n != nullptr ? n->as_int() : fallback;
}

double number_or(const Node& cfg, const std::string& key, double fallback) {
  const Node* n = cfg.find(key);
  return n != nullptr ? n->as_double() : fallback;
}

const Node& required(const Node& cfg, const std::string& key) {
  const Node* n = cfg.find(key);
  if (n == nullptr)
    throw ConfigError(cfg.location(), cfg.path(), "missing required key '" + key + "'");
  return *n;
}

// The value of `key` among `choices` (validated by the schema; checked again here).
template <typename Enum>
Enum choice(const Node& cfg, const std::string& key,
            const std::vector<std::pair<std::string, Enum>>& choices) {
  const Node* n = cfg.find(key);
  if (n == nullptr) return choices.front().second;
  std::string names;
  for (const auto& [name, value] : choices) {
    if (n->as_string() == name) return value;
    names += (names.empty() ? "" : ", ") + name;
  }
  throw ConfigError(n->location(), n->path(),
                    "expected one of " + names + ", got " + n->describe_value());
}

std::array<double, 3> per_channel(const Node& cfg, const std::string& key,
                                  std::array<double, 3> fallback) {
  const Node* n = cfg.find(key);
  if (n == nullptr) return fallback;
  if (!n->is_sequence() || n->seq_items().size() != 3) {
    throw ConfigError(n->location(), n->path(),
                      "expected a list of 3 numbers (red, green, blue), got " +
                          (n->is_sequence() ? std::to_string(n->seq_items().size()) + " items"
                                            : n->describe_value()));
  }
  std::array<double, 3> values{};
  for (size_t c = 0; c < 3; ++c) values[c] = n->seq_items()[c]->as_double();
  return values;
}

std::shared_ptr<Dataset> synthetic_classification(const Node& cfg, const std::string&) {
  using Split = SyntheticClassificationOptions::Split;
  SyntheticClassificationOptions o;
  o.num_samples = static_cast<size_t>(required(cfg, "num_samples").as_int());
  o.num_features = required(cfg, "num_features").as_int();
  o.num_classes = required(cfg, "num_classes").as_int();
  o.seed = static_cast<uint64_t>(int_or(cfg, "seed", 0));
  o.split = choice<Split>(cfg, "split",
                          {{"train", Split::Train}, {"val", Split::Val}, {"test", Split::Test}});
  o.noise = number_or(cfg, "noise", o.noise);
  return std::make_shared<SyntheticClassificationDataset>(o);
}

std::shared_ptr<Dataset> char_lm(const Node& cfg, const std::string& job_dir) {
  using Split = CharLmOptions::Split;
  const Node& path = required(cfg, "path");
  CharLmOptions o;
  o.file = resolve_data_path(path.as_string(), job_dir);
  o.key = FileKey::of(path);
  o.block_size = int_or(cfg, "block_size", o.block_size);
  o.split = choice<Split>(cfg, "split", {{"train", Split::Train}, {"val", Split::Val}});
  o.val_fraction = number_or(cfg, "val_fraction", o.val_fraction);
  return std::make_shared<CharLmDataset>(o);
}

std::shared_ptr<Dataset> token_shards(const Node& cfg, const std::string& job_dir,
                                      TokenShardOptions::Format format) {
  const bool megatron = format == TokenShardOptions::Format::Megatron;
  const Node& path = required(cfg, megatron ? "path_prefix" : "path");
  TokenShardOptions o;
  o.format = format;
  o.file = resolve_data_path(path.as_string(), job_dir);
  o.key = FileKey::of(path);
  if (const Node* dtype = cfg.find("dtype"))
    o.element_size = dtype->as_string() == "uint32" ? 4 : 2;
  o.block_size = int_or(cfg, "block_size", o.block_size);
  o.stride = int_or(cfg, "stride", 0);
  o.vocab_size = int_or(cfg, "vocab_size", 0);
  return std::make_shared<TokenShardDataset>(o);
}

std::shared_ptr<Dataset> token_bin(const Node& cfg, const std::string& job_dir) {
  return token_shards(cfg, job_dir, TokenShardOptions::Format::Bin);
}

std::shared_ptr<Dataset> megatron_indexed(const Node& cfg, const std::string& job_dir) {
  return token_shards(cfg, job_dir, TokenShardOptions::Format::Megatron);
}

std::shared_ptr<Dataset> csv(const Node& cfg, const std::string& job_dir) {
  const Node& path = required(cfg, "path");
  CsvOptions o;
  o.file = resolve_data_path(path.as_string(), job_dir);
  o.key = FileKey::of(path);
  if (const Node* label = cfg.find("label_column")) {
    o.label_key = FileKey::of(*label);
    int64_t index = 0;
    bool is_index = label->is_scalar() && !label->quoted();
    if (is_index) {
      try {
        index = label->as_int();
      } catch (const ConfigError&) {
        is_index = false;
      }
    }
    if (is_index) {
      o.label_index = index;
    } else {
      o.label_name = label->as_string();
    }
  }
  if (const Node* header = cfg.find("header")) o.header = header->as_bool();
  if (const Node* delimiter = cfg.find("delimiter")) {
    if (delimiter->as_string().size() != 1) {
      throw ConfigError(delimiter->location(), delimiter->path(),
                        "expected one character, got " + delimiter->describe_value() +
                            " (write a tab as \"\\t\")");
    }
    o.delimiter = delimiter->as_string()[0];
  }
  if (const Node* n = cfg.find("num_classes")) o.num_classes = n->as_int();
  return std::make_shared<CsvDataset>(o);
}

std::shared_ptr<Dataset> mnist(const Node& cfg, const std::string& job_dir) {
  using Split = MnistOptions::Split;
  const Node& root = required(cfg, "root");
  MnistOptions o;
  o.root = resolve_data_path(root.as_string(), job_dir);
  o.key = FileKey::of(root);
  o.split = choice<Split>(cfg, "split", {{"train", Split::Train}, {"test", Split::Test}});
  o.mean = number_or(cfg, "mean", o.mean);
  o.std_dev = number_or(cfg, "std", o.std_dev);
  return std::make_shared<MnistDataset>(o);
}

std::shared_ptr<Dataset> cifar10(const Node& cfg, const std::string& job_dir) {
  using Split = Cifar10Options::Split;
  const Node& root = required(cfg, "root");
  Cifar10Options o;
  o.root = resolve_data_path(root.as_string(), job_dir);
  o.key = FileKey::of(root);
  o.split = choice<Split>(cfg, "split", {{"train", Split::Train}, {"test", Split::Test}});
  o.mean = per_channel(cfg, "mean", o.mean);
  o.std_dev = per_channel(cfg, "std", o.std_dev);
  return std::make_shared<Cifar10Dataset>(o);
}

}  // namespace

std::shared_ptr<Dataset> build_dataset(const config::Node& cfg, const std::string& job_dir) {
  using Builder = std::function<std::shared_ptr<Dataset>(const Node&, const std::string&)>;
  static const std::map<std::string, Builder> kBuilders = {
      {"synthetic_classification", synthetic_classification},
      {"char_lm", char_lm},
      {"token_bin", token_bin},
      {"megatron_indexed", megatron_indexed},
      {"csv", csv},
      {"mnist", mnist},
      {"cifar10", cifar10},
  };
  const Node& type = required(cfg, "type");
  auto it = kBuilders.find(type.as_string());
  if (it == kBuilders.end()) {
    std::string names;
    for (const auto& [name, builder] : kBuilders) names += (names.empty() ? "" : ", ") + name;
    throw ConfigError(type.location(), type.path(),
                      "unknown dataset type " + type.describe_value() + "; choices: " + names);
  }
  return it->second(cfg, job_dir);
}

}  // namespace rh::data
