// Helpers of the distributed tests (through the runner-host binary): a free
// loopback port for a rendezvous, the float32 tensors of a safetensors
// checkpoint file, two checkpoints compared within a tolerance, the lines
// of metrics.jsonl, and a small CIFAR-10-format folder.
#pragma once

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/TestUtil.hpp"

namespace rh::test {

inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// The safetensors header (JSON is YAML).
inline YAML::Node safetensors_header(const std::string& bytes, uint64_t& header_size) {
  std::memcpy(&header_size, bytes.data(), 8);
  return YAML::Load(bytes.substr(8, header_size));
}

// The float32 tensors of a safetensors file, by name.
inline std::map<std::string, std::vector<float>> read_safetensors(const std::filesystem::path& p) {
  std::string bytes = read_file(p);
  uint64_t n = 0;
  YAML::Node header = safetensors_header(bytes, n);
  std::map<std::string, std::vector<float>> out;
  for (const auto& kv : header) {
    const std::string name = kv.first.as<std::string>();
    if (name == "__metadata__" || kv.second["dtype"].as<std::string>() != "F32") continue;
    const size_t begin = kv.second["data_offsets"][0].as<size_t>(),
                 end = kv.second["data_offsets"][1].as<size_t>();
    std::vector<float> v((end - begin) / 4);
    std::memcpy(v.data(), bytes.data() + 8 + n + begin, end - begin);
    out[name] = std::move(v);
  }
  return out;
}

// Every float32 tensor of `b_file` within `rel` times the largest
// magnitude of the same tensor in `a_file` (pass the reference as `a_file`).
// `rel` has no default: 0 where both runs do the same arithmetic (then every
// float32 tensor must agree bit for bit, and a difference is reported by
// size), or a bound the caller derives beside the call. Elements `noise(name, i,
// numel)` picks are held to the absolute `noise_bound` instead.
inline void expect_close(const std::filesystem::path& a_file, const std::filesystem::path& b_file,
                         float rel,
                         const std::function<bool(const std::string&, size_t, size_t)>& noise = {},
                         float noise_bound = 0) {
  auto a = read_safetensors(a_file);
  auto b = read_safetensors(b_file);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (const auto& [name, va] : a) {
    const auto& vb = b.at(name);
    ASSERT_EQ(va.size(), vb.size()) << name;
    float max_abs = 0, max_diff = 0, noise_diff = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      max_abs = std::max(max_abs, std::fabs(va[i]));
      float& diff = noise && noise(name, i, va.size()) ? noise_diff : max_diff;
      // A NaN on one side only is a difference too (std::max would drop it).
      diff = std::isnan(va[i]) != std::isnan(vb[i]) ? std::numeric_limits<float>::infinity()
                                                    : std::max(diff, std::fabs(va[i] - vb[i]));
    }
    EXPECT_LE(max_diff, rel * max_abs)
        << name << ": max |diff| " << max_diff << " vs max |value| " << max_abs;
    EXPECT_LE(noise_diff, noise_bound) << name << " (the elements held to " << noise_bound << ")";
  }
}

// Every tensor of `b_file` within `bound` (absolute) of `a_file`'s, the
// same tensors on both sides: an effect-size bound the caller derives.
inline void expect_within(const std::filesystem::path& a_file, const std::filesystem::path& b_file,
                          double bound) {
  const auto a = read_safetensors(a_file);
  const auto b = read_safetensors(b_file);
  ASSERT_EQ(a.size(), b.size()) << a_file << " vs " << b_file;
  ASSERT_FALSE(a.empty());
  for (const auto& [name, va] : a) {
    ASSERT_EQ(b.count(name), 1u) << name;
    const auto& vb = b.at(name);
    ASSERT_EQ(va.size(), vb.size()) << name;
    double worst = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      const double diff = std::fabs(static_cast<double>(va[i]) - vb[i]);
      worst = std::isnan(diff) ? std::numeric_limits<double>::infinity() : std::max(worst, diff);
    }
    EXPECT_LE(worst, bound) << name << " in " << b_file;
  }
}

// A small llama (grouped-query attention: 4 heads, 2 key/value heads; 3
// layers) trained on the text file `text` as char_lm, AdamW with clip_grad,
// for `iters` iterations under `strategy`, saved at the end; `hooks`: more
// hook lines ("  - {type: metrics}\n").
inline std::string llama_char_job(const std::string& text, const std::string& strategy, int iters,
                                  const std::string& hooks = "") {
  return "seed: 2\n"
         "model: {type: llama, vocab_size: 96, dim: 32, n_layers: 3, n_heads: 4, n_kv_heads: 2, "
         "multiple_of: 16, max_seq_len: 16}\n"
         "data:\n"
         "  train: {dataset: {type: char_lm, path: " +
         text +
         ", block_size: 16, split: train},\n"
         "          batch_size: 4, shuffle: true, num_workers: 0}\n"
         "optim_wrapper:\n"
         "  optimizer: {type: AdamW, lr: 0.003, weight_decay: 0.1}\n"
         "  clip_grad: {max_norm: 0.5}\n"
         "train_cfg: {by_epoch: false, max_iters: " +
         std::to_string(iters) + "}\nstrategy: " + strategy +
         "\nhooks:\n  - {type: checkpoint, by_epoch: false, interval: " + std::to_string(iters) +
         "}\n" + hooks + "dist: {timeout_s: 30}\n";
}

// metrics.jsonl lines of `mode` ("train", "val"), each as a map of its numbers.
inline std::vector<std::map<std::string, double>> metric_lines(const std::filesystem::path& file,
                                                               const std::string& mode) {
  std::vector<std::map<std::string, double>> out;
  std::istringstream lines(read_file(file));
  for (std::string line; std::getline(lines, line);) {
    YAML::Node node = YAML::Load(line);
    if (node["mode"].as<std::string>() != mode) continue;
    std::map<std::string, double> values;
    for (const auto& kv : node)
      if (kv.first.as<std::string>() != "mode" && !kv.second.IsNull())
        values[kv.first.as<std::string>()] = kv.second.as<double>();
    out.push_back(std::move(values));
  }
  return out;
}

// Writes `<name>.yaml` into `dir` (work_dir `dir/<name>` prepended) and runs
// it through the runner-host binary: on `ranks` processes of the built-in
// launcher when > 1 or `launcher` (one rank through it: a real world of
// one, with its rendezvous and communicator), with `env` (VAR=value ...) set.
// The launcher picks the rendezvous port and holds it until rank 0's store
// has it: a port picked here and passed as --master-port could be taken by
// another test's job before this one's launcher binds it.
inline CommandResult run_job(const TempDir& dir, const std::string& name, const std::string& yaml,
                             int ranks, const std::string& env = "", bool launcher = false) {
  dir.write(name + ".yaml", "work_dir: " + (dir / name).string() + "\n" + yaml);
  const std::string launch =
      ranks > 1 || launcher ? " --nproc-per-node " + std::to_string(ranks) : "";
  return run_command("cd " + quote(dir.path().string()) + " && env -u RH_PLUGIN_PATH " + env + " " +
                     quote(RH_RUNNER_HOST) + " --config " + name + ".yaml" + launch);
}

// `resume:` for a run named `to`, from a copy of run `from`'s checkpoint
// `iter` in its own work_dir (dir / to), holding only that checkpoint.
inline std::string resume_from_copy(const TempDir& dir, const std::string& from, int iter,
                                    const std::string& to) {
  std::filesystem::create_directories(dir / to);
  const std::string name = "iter_" + std::to_string(iter);
  std::filesystem::copy(dir / from / name, dir / to / name,
                        std::filesystem::copy_options::recursive);
  return "resume: " + (dir / to / name).string() + "\n";
}

// The attention's key bias (elements [D, 2D) of attn.qkv.bias) gets a
// gradient that is zero in exact arithmetic (softmax does not change when
// every logit of a query moves by q·b), so what it receives is rounding
// noise, and AdamW's normalisation turns that noise into steps of up to
// about lr: two runs that sum in another order (ddp on 2 ranks against 1
// rank, too) move it differently, by as much as adamw_max_divergence. Runs
// with the same arithmetic need no such exception (the same noise on both
// sides).
inline bool is_key_bias(const std::string& name, size_t i, size_t size) {
  const std::string suffix = "attn.qkv.bias";
  if (name.size() < suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix))
    return false;
  return i >= size / 3 && i < 2 * size / 3;
}

// How far apart two AdamW runs can end after `steps` steps at learning rate
// at most `lr`, whatever their gradients: an element's step is lr·m̂_t /
// (sqrt(v̂_t) + eps) with m̂_t = Σ_s a_s g_s, v̂_t = Σ_s b_s g_s²,
// a_s = (1−β1)β1^(t−s)/(1−β1^t), b_s = (1−β2)β2^(t−s)/(1−β2^t) (bias
// corrected). Cauchy–Schwarz: |Σ a_s g_s| ≤ sqrt(Σ a_s²/b_s)·sqrt(Σ b_s g_s²),
// so |step_t| ≤ lr·R_t, R_t = sqrt(Σ_{s≤t} a_s²/b_s) (R_1 = 1; R_t grows as
// β1 forgets faster than β2: 1.03 at t = 8, 1.61 at t = 50 for (0.9,
// 0.999)). Weight decay multiplies both runs by the same 1 − lr·wd, which
// only shrinks their difference; two runs stepping in opposite directions
// end at most 2·lr·Σ_{t≤T} R_t apart: 16.2·lr at 8 steps, 42.3·lr at 20,
// 125.8·lr at 50. A schedule that lowers lr keeps this a bound (lr = its
// largest value).
inline float adamw_max_divergence(double lr, double beta1, double beta2, int steps) {
  double sum = 0;
  for (int t = 1; t <= steps; ++t) {
    double r2 = 0;
    for (int s = 1; s <= t; ++s) {
      const double a = (1 - beta1) * std::pow(beta1, t - s) / (1 - std::pow(beta1, t));
      const double b = (1 - beta2) * std::pow(beta2, t - s) / (1 - std::pow(beta2, t));
      r2 += a * a / b;
    }
    sum += std::sqrt(r2);
  }
  return static_cast<float>(2 * lr * sum);
}

inline void expect_equal_bytes(const std::filesystem::path& a, const std::filesystem::path& b) {
  EXPECT_TRUE(read_file(a) == read_file(b)) << a << " and " << b << " differ";
}

// A CIFAR-10-format folder: 5 training files of 16 images and a test file of
// 32, pixels from a fixed sequence, labels by brightness.
inline void write_cifar(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  fs::create_directories(root);
  uint32_t state = 12345;
  auto next = [&]() {
    state = state * 1664525u + 1013904223u;
    return static_cast<uint8_t>(state >> 24);
  };
  auto file = [&](const fs::path& p, int records) {
    std::string bytes;
    for (int r = 0; r < records; ++r) {
      std::string pixels(3072, '\0');
      const uint8_t base = next();
      for (char& c : pixels) c = static_cast<char>((base + next() / 4) & 0xff);
      bytes.push_back(static_cast<char>(base % 10));
      bytes += pixels;
    }
    std::ofstream(p, std::ios::binary) << bytes;
  };
  for (int i = 1; i <= 5; ++i) file(root / ("data_batch_" + std::to_string(i) + ".bin"), 16);
  file(root / "test_batch.bin", 32);
}

// A job without its `  clip_grad: {max_norm: 0.5}` line, `optim` in its
// place under optim_wrapper.
inline std::string without_clip(std::string yaml, const std::string& optim = "") {
  const std::string clip = "  clip_grad: {max_norm: 0.5}\n";
  return yaml.replace(yaml.find(clip), clip.size(), optim);
}

inline const std::string kProfileTwoSteps =
    "  - {type: profiler, begin: 2, end: 4, dir: profile}\n";

// The checkpoint `one` of a sharded strategy on one rank holds what
// `single`'s holds, bit for bit: the model file byte for byte, every
// optimizer state tensor of `single` in rank 0's shard, and there its
// masters (`<name>.param`) equal to the model's values.
inline void expect_single_bit_for_bit(const std::filesystem::path& single,
                                      const std::filesystem::path& one) {
  expect_equal_bytes(single / "model.safetensors", one / "model.safetensors");
  const auto state = read_safetensors(single / "optimizer.safetensors");
  const auto shard = read_safetensors(one / "optimizer.rank0.safetensors");
  const auto model = read_safetensors(one / "model.safetensors");
  ASSERT_FALSE(state.empty());
  for (const auto& [name, values] : state) {
    ASSERT_EQ(shard.count(name), 1u) << name << " not in rank 0's optimizer shard";
    EXPECT_TRUE(values == shard.at(name)) << name << " differs from single's";
  }
  int masters = 0;
  for (const auto& [name, values] : shard) {
    if (name.size() < 6 || name.compare(name.size() - 6, 6, ".param") != 0) continue;
    ++masters;
    EXPECT_TRUE(values == model.at(name.substr(0, name.size() - 6))) << name;
  }
  EXPECT_GT(masters, 0);
}

// No train metric of `run_dir`'s metrics.jsonl starts with `prefix` but
// `allowed`; a profiler trace of two of its steps (kProfileTwoSteps) has
// the step's phases and no range of `prefix` (the strategy issues every
// collective inside one).
inline void expect_no_communication(const std::filesystem::path& run_dir, const std::string& prefix,
                                    const std::string& allowed = "") {
  const auto lines = metric_lines(run_dir / "metrics.jsonl", "train");
  ASSERT_FALSE(lines.empty());
  for (const auto& line : lines)
    for (const auto& [name, value] : line)
      if (name != allowed) {
        EXPECT_NE(name.rfind(prefix, 0), 0u) << name;
      }
  const std::string trace = read_file(run_dir / "profile" / "rank0.json");
  EXPECT_THAT(trace, ::testing::HasSubstr("\"rh::sync\""));
  EXPECT_THAT(trace, ::testing::HasSubstr("\"rh::optimizer_step\""));
  EXPECT_THAT(trace, ::testing::Not(
                         ::testing::HasSubstr("\"" + prefix.substr(0, prefix.size() - 1) + "::")));
}

// Adam's step counter of every parameter in an optimizer file (".step"
// entries, int64).
inline std::vector<int64_t> adam_steps(const std::filesystem::path& file) {
  const std::string bytes = read_file(file);
  uint64_t n = 0;
  const YAML::Node header = safetensors_header(bytes, n);
  std::vector<int64_t> steps;
  for (const auto& kv : header) {
    const std::string key = kv.first.as<std::string>();
    if (key.size() < 5 || key.compare(key.size() - 5, 5, ".step") != 0) continue;
    int64_t s = 0;
    std::memcpy(&s, bytes.data() + 8 + n + kv.second["data_offsets"][0].as<size_t>(), 8);
    steps.push_back(s);
  }
  return steps;
}

}  // namespace rh::test
