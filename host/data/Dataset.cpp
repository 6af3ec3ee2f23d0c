// build_dataset(): the `dataset:` subtree -> a Dataset, one builder per type.
#include "data/Dataset.hpp"

#include <array>
#include <cctype>
#include <filesystem>
#include <functional>
#include <map>

#include "config/ConfigNode.hpp"
#include "data/CharLmDataset.hpp"
#include "data/Cifar10Dataset.hpp"
#include "data/CsvDataset.hpp"
#include "data/DataFiles.hpp"
#include "data/DataLoader.hpp"
#include "data/ImageFolderDataset.hpp"
#include "data/MnistDataset.hpp"
#include "data/SyntheticClassificationDataset.hpp"
#include "data/TokenShardDataset.hpp"
#include "data/image/Pipeline.hpp"

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

// `key` a literal: a std::string temporary would make GCC 14 warn that the
// reference returned may dangle (-Wdangling-reference).
const Node& required(const Node& cfg, const char* key) {
  const Node* n = cfg.find(key);
  if (n == nullptr)
    throw ConfigError(cfg.location(), cfg.path(),
                      std::string("missing required key '") + key + "'");
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

// An image dataset's forms runner-host does not implement.
void check_image_folder(const Node& cfg) {
  if (const Node* w = cfg.find("with_label"); w != nullptr && !w->as_bool())
    throw ConfigError(w->location(), w->path(),
                      "false (unlabelled images) is not implemented: runner-host trains and "
                      "evaluates classifiers on labelled images");
  if (const Node* split = cfg.find("split"); split != nullptr && split->as_string() == "test")
    throw ConfigError(split->location(), split->path(),
                      "test has no labels (MMPretrain sets with_label false for it): use val to "
                      "evaluate");
}

// MMPretrain's CustomDataset / ImageNet: data_root joins data_prefix and
// ann_file (each kept when absolute), data_root the job directory.
std::shared_ptr<Dataset> image_folder(const Node& cfg, const std::string& job_dir, bool imagenet) {
  ImageFolderOptions o;
  const Node* root = cfg.find("data_root");
  const std::string data_root =
      resolve_data_path(root != nullptr ? root->as_string() : std::string("."), job_dir);
  std::string prefix;
  const Node* prefix_node = cfg.find("data_prefix");
  if (prefix_node != nullptr && prefix_node->is_map()) prefix_node = prefix_node->find("img_path");
  if (prefix_node != nullptr) prefix = prefix_node->as_string();
  std::string ann;
  const Node* ann_node = cfg.find("ann_file");
  if (ann_node != nullptr) ann = ann_node->as_string();
  check_image_folder(cfg);
  if (imagenet) {
    if (const Node* split = cfg.find("split")) {
      if (prefix.empty()) prefix = split->as_string();
      const std::string meta = "meta/" + split->as_string() + ".txt";
      std::error_code ec;
      if (ann.empty() && std::filesystem::exists(resolve_data_path(meta, data_root), ec))
        ann = meta;
    }
    o.default_classes = 1000;
  }
  o.images = prefix.empty() ? data_root : resolve_data_path(prefix, data_root);
  o.images_key = FileKey::of(prefix_node != nullptr ? *prefix_node : root != nullptr ? *root : cfg);
  if (!ann.empty()) {
    o.ann_file = resolve_data_path(ann, data_root);
    o.ann_key = FileKey::of(ann_node != nullptr ? *ann_node : *cfg.find("split"));
  }
  if (const Node* classes = cfg.find("classes")) {
    o.classes_key = FileKey::of(*classes);
    if (classes->is_sequence()) {
      for (const auto& c : classes->seq_items()) o.classes.push_back(c->as_string());
    } else {
      const std::vector<uint8_t> text = read_data_file(
          resolve_data_path(classes->as_string(), job_dir), "classes file", o.classes_key);
      std::string line;
      for (uint8_t b : text) {
        if (b != '\n') {
          line += static_cast<char>(b);
          continue;
        }
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        if (!line.empty()) o.classes.push_back(line);
        line.clear();
      }
      if (!line.empty()) o.classes.push_back(line);
    }
    if (o.classes.empty())
      throw ConfigError(classes->location(), classes->path(), "no class names");
  }
  if (const Node* ext = cfg.find("extensions")) {
    o.extensions.clear();
    for (const auto& e : ext->seq_items()) {
      std::string lower = e->as_string();
      for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      o.extensions.push_back(lower);
    }
  }
  auto pipeline = std::make_shared<const image::Pipeline>(required(cfg, "pipeline"));
  return std::make_shared<ImageFolderDataset>(o, std::move(pipeline));
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
      {"CustomDataset",
       [](const Node& cfg, const std::string& dir) { return image_folder(cfg, dir, false); }},
      {"ImageNet",
       [](const Node& cfg, const std::string& dir) { return image_folder(cfg, dir, true); }},
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

void check_loaders(const config::Node& job) {
  const Node* data = job.find("data");
  if (data == nullptr) return;
  for (const char* split : {"train", "val", "test"}) {
    const Node* loader = data->find(split);
    if (loader == nullptr || loader->is_null()) continue;
    loader_options(*loader, 0);
    const Node* dataset = loader->find("dataset");
    const Node* pipeline = dataset != nullptr ? dataset->find("pipeline") : nullptr;
    if (pipeline == nullptr) continue;
    check_image_folder(*dataset);
    image::Pipeline check(*pipeline);
  }
}

}  // namespace rh::data
