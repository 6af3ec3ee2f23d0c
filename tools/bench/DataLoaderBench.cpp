// runner-host's data loader alone: a job's `data.train` (or `data.val`)
// loader run for a few epochs with no training step taking its batches, in
// examples/s and, for token datasets, tokens/s (issue 40, item 6;
// tools/bench/bench_data.sh sets it beside torchvision's DataLoader and the
// decode limit for images, and beside its memcpy peer for tokens).
//
//   build/bin/rh_bench_data --config job.yaml [--split train|val] [--epochs 3]
//                           [--memcpy-peer] [--set KEY=VALUE ...]
//
// The job is loaded as runner-host loads it (_base_, --set), the split's
// subtree and the data_preprocessor validated against their schemas, and
// the dataset, sampler and loader built by runner-host's own code
// (data::build_dataset, data::loader_options, DataLoader as rank 0 of 1)
// with the job's seed and the split's batch_size, shuffle, drop_last,
// num_workers, prefetch and persistent_workers. An epoch is timed from
// start_epoch() to the end of its last batch: the main thread takes each
// batch from next(), applies the job's data_preprocessor to it when there is
// one (BatchPreprocessor::input on the CPU: uint8 images to float, to_rgb,
// (x - mean) / std, where runner-host's training thread does it: its cost is
// in the figure as it is in a step) and drops it. The first epoch is a
// warm-up (the page cache, the heap, the workers' first allocations) and is
// printed but not counted; the figure is the median of the others. Not in
// the loop: the batch augments (Mixup, CutMix) and the rest of a step.
//
// --memcpy-peer (token_bin and megatron_indexed only): after every epoch of
// the loader, an epoch of its bare peer, in alternation, so slow drift on a
// shared machine moves both alike: for every example of the epoch, in the
// sampler's order (the same seed, shuffle, drop_last and batches), the bytes
// the loader delivers for it (input and target, 2 x T int64: 16 T bytes)
// copied with memcpy from the token file's mapping at the example's offset
// (index x stride tokens; the file read as a ring past its end) into a
// batch buffer, the batches claimed one by one by as many threads as the
// loader has workers (one for num_workers 0). No conversion, no vocab
// check, no tensor, no hand-over to a consumer: what moving those bytes
// costs on these cores. Printed: its tokens/s and the loader's ratio to it.
//
// Like runner-host, the process asks for passive OpenMP threads and sets
// its heap thresholds (launch/ThreadPolicy.hpp, launch/HeapPolicy.hpp).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/JobLoader.hpp"
#include "config/Schema.hpp"
#include "data/BatchPreprocessor.hpp"
#include "data/DataFiles.hpp"
#include "data/DataLoader.hpp"
#include "data/DataSchema.hpp"
#include "data/Dataset.hpp"
#include "data/DistributedSampler.hpp"
#include "launch/HeapPolicy.hpp"
#include "launch/ThreadPolicy.hpp"
#include "model/ClassifierSchema.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct EpochResult {
  double seconds = 0;
  size_t examples = 0;
  size_t tokens = 0;  // language-model datasets only
  double examples_per_s() const { return static_cast<double>(examples) / seconds; }
  double tokens_per_s() const { return static_cast<double>(tokens) / seconds; }
};

// One epoch of the loader, its batches taken, preprocessed (`pre`, when not
// null) and dropped.
EpochResult loader_epoch(rh::data::DataLoader& loader, const rh::data::BatchPreprocessor* pre,
                         int64_t epoch) {
  const bool lm = loader.dataset().task() == rh::model::Task::LanguageModel;
  EpochResult r;
  const auto start = Clock::now();
  loader.start_epoch(epoch);
  while (std::optional<rh::data::Batch> batch = loader.next()) {
    r.examples += static_cast<size_t>(batch->input.size(0));
    if (lm) r.tokens += static_cast<size_t>(batch->input.numel());
    if (pre != nullptr) pre->input(batch->input, at::kCPU);
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

// The token file of a token_bin / megatron_indexed dataset and where its
// examples start: what the memcpy peer copies from.
struct TokenSource {
  std::unique_ptr<rh::data::MappedFile> file;
  size_t element_size = 2;  // bytes per token in the file
  size_t block_size = 64;   // T
  size_t stride = 64;       // tokens between examples' starts
};

// Megatron-LM's dtype code (byte 17 of the .idx) -> bytes per token.
size_t megatron_element_size(const std::string& idx) {
  const rh::data::MappedFile m(idx, "Megatron index", rh::data::FileKey{});
  if (m.size() < 18) throw std::runtime_error(idx + ": too short for a Megatron index");
  switch (m.data()[17]) {
    case 1:  // uint8
    case 2:  // int8
      return 1;
    case 3:  // int16
    case 8:  // uint16
      return 2;
    case 4:  // int32
      return 4;
    case 5:  // int64
      return 8;
    default:
      throw std::runtime_error(idx + ": dtype code " + std::to_string(m.data()[17]) +
                               " is not an integer token type");
  }
}

TokenSource token_source(const rh::config::Node& dataset, const std::string& job_dir) {
  const std::string type = dataset.find("type")->as_string();
  TokenSource s;
  std::string bin;
  if (type == "token_bin") {
    bin = rh::data::resolve_data_path(dataset.find("path")->as_string(), job_dir);
    const rh::config::Node* dtype = dataset.find("dtype");
    s.element_size = dtype != nullptr && dtype->as_string() == "uint32" ? 4 : 2;
  } else {
    const std::string prefix =
        rh::data::resolve_data_path(dataset.find("path_prefix")->as_string(), job_dir);
    bin = prefix + ".bin";
    s.element_size = megatron_element_size(prefix + ".idx");
  }
  s.file = std::make_unique<rh::data::MappedFile>(bin, "token file", rh::data::FileKey{});
  if (const rh::config::Node* n = dataset.find("block_size"))
    s.block_size = static_cast<size_t>(n->as_int());
  s.stride = s.block_size;
  if (const rh::config::Node* n = dataset.find("stride"))
    s.stride = static_cast<size_t>(n->as_int());
  return s;
}

// One epoch of the memcpy peer (see the top of the file).
EpochResult memcpy_epoch(const TokenSource& src, size_t dataset_size,
                         const rh::data::LoaderOptions& o, int64_t epoch) {
  const size_t example_bytes = 2 * src.block_size * sizeof(int64_t);  // input + target
  const uint8_t* ring = src.file->data();
  const size_t ring_bytes = src.file->size();
  const int threads = std::max(1, o.num_workers);
  std::atomic<size_t> next{0};
  std::atomic<unsigned> sink{0};  // keeps the copies observable
  EpochResult r;
  const auto start = Clock::now();
  rh::data::DistributedSampler sampler(dataset_size, 0, 1, o.shuffle, o.seed, o.drop_last);
  sampler.set_epoch(epoch);
  const std::vector<size_t> indices = sampler.indices();
  const size_t batches = o.drop_last ? indices.size() / o.batch_size
                                     : (indices.size() + o.batch_size - 1) / o.batch_size;
  auto work = [&] {
    std::vector<uint8_t> batch(o.batch_size * example_bytes);
    for (size_t b = next++; b < batches; b = next++) {
      const size_t first = b * o.batch_size;
      const size_t last = std::min(first + o.batch_size, indices.size());
      for (size_t i = first; i < last; ++i) {
        uint8_t* dst = batch.data() + (i - first) * example_bytes;
        size_t at = (indices[i] * src.stride * src.element_size) % ring_bytes;
        for (size_t left = example_bytes; left > 0;) {
          const size_t n = std::min(left, ring_bytes - at);
          std::memcpy(dst, ring + at, n);
          dst += n;
          left -= n;
          at = 0;
        }
      }
      sink += batch[b % batch.size()];
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.examples = o.drop_last ? batches * o.batch_size : indices.size();
  r.tokens = r.examples * src.block_size;
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  // OpenMP's threads wait as runner-host's do: libgomp read OMP_WAIT_POLICY
  // when this program (linked with LibTorch) started, so a change takes a
  // fresh start of the program.
  if (!rh::launch::apply_thread_policy().empty()) {
    ::execv("/proc/self/exe", argv);
    std::perror("rh_bench_data: execv /proc/self/exe");
    return 1;
  }
  rh::launch::apply_heap_policy();
  std::string config;
  std::string split = "train";
  int64_t epochs = 3;
  bool memcpy_peer = false;
  std::vector<std::string> sets;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--config" && has_value) {
      config = argv[++i];
    } else if (a == "--split" && has_value) {
      split = argv[++i];
    } else if (a == "--epochs" && has_value) {
      epochs = std::atoll(argv[++i]);
    } else if (a == "--memcpy-peer") {
      memcpy_peer = true;
    } else if (a == "--set" && has_value) {
      sets.push_back(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s --config job.yaml [--split train|val] [--epochs N] "
                   "[--memcpy-peer] [--set KEY=VALUE ...]\n"
                   "unknown or incomplete argument '%s'\n",
                   argv[0], a.c_str());
      return 2;
    }
  }
  if (config.empty() || (split != "train" && split != "val") || epochs < 2) {
    std::fprintf(stderr,
                 "%s: --config job.yaml is required, --split is train or val, --epochs >= 2 "
                 "(the first is a warm-up)\n",
                 argv[0]);
    return 2;
  }
  try {
    const rh::config::Job job = rh::config::load_job(config, sets);
    const std::string job_dir = fs::absolute(config).parent_path().string();
    const rh::config::Node* data = job.root->find("data");
    const rh::config::Node* cfg = data != nullptr ? data->find(split) : nullptr;
    if (cfg == nullptr || cfg->is_null()) {
      std::fprintf(stderr, "%s: %s has no data.%s\n", argv[0], config.c_str(), split.c_str());
      return 1;
    }
    std::vector<rh::config::ConfigError> errors =
        rh::config::validate(*cfg, rh::data::loader_schema());
    if (const rh::config::Node* p = job.root->find("data_preprocessor"))
      for (auto& e : rh::config::validate(*p, rh::model::preprocessor_schema()))
        errors.push_back(std::move(e));
    for (const rh::config::ConfigError& e : errors) std::fprintf(stderr, "%s\n", e.what());
    if (!errors.empty()) return 1;
    const rh::config::Node& dataset_cfg = *cfg->find("dataset");
    const std::string type = dataset_cfg.find("type")->as_string();
    if (memcpy_peer && type != "token_bin" && type != "megatron_indexed") {
      std::fprintf(stderr, "%s: --memcpy-peer is for token_bin and megatron_indexed, not %s\n",
                   argv[0], type.c_str());
      return 2;
    }
    const uint64_t seed =
        job.root->find("seed") ? static_cast<uint64_t>(job.root->find("seed")->as_int()) : 0;
    std::shared_ptr<rh::data::Dataset> dataset = rh::data::build_dataset(dataset_cfg, job_dir);
    const rh::data::LoaderOptions options = rh::data::loader_options(*cfg, seed);
    rh::data::DataLoader loader(dataset, options, 0, 1);
    TokenSource source;
    if (memcpy_peer) source = token_source(dataset_cfg, job_dir);
    const bool lm = dataset->task() == rh::model::Task::LanguageModel;

    std::printf("data.%s of %s: %s, %zu examples, batch %zu, %d workers, prefetch %d%s%s\n",
                split.c_str(), config.c_str(), type.c_str(), dataset->size(), options.batch_size,
                options.num_workers, options.prefetch, options.shuffle ? ", shuffle" : "",
                options.drop_last ? ", drop_last" : "");
    const std::unique_ptr<rh::data::BatchPreprocessor> pre =
        rh::data::BatchPreprocessor::from_job(*job.root, dataset->num_classes(), seed, 0);
    if (pre != nullptr)
      std::printf(
          "note: the job's data_preprocessor is applied to every batch in the timed loop, in the "
          "main thread\n");
    std::vector<double> examples_per_s, tokens_per_s, peer_tokens_per_s;
    for (int64_t e = 0; e < epochs; ++e) {
      const EpochResult r = loader_epoch(loader, pre.get(), e);
      std::printf("epoch %lld%s: loader %.1f examples/s", static_cast<long long>(e + 1),
                  e == 0 ? " (warm-up)" : "", r.examples_per_s());
      if (lm) std::printf(", %.0f tokens/s", r.tokens_per_s());
      if (e > 0) {
        examples_per_s.push_back(r.examples_per_s());
        tokens_per_s.push_back(r.tokens_per_s());
      }
      if (memcpy_peer) {
        const EpochResult p = memcpy_epoch(source, dataset->size(), options, e);
        std::printf("; memcpy peer %.0f tokens/s", p.tokens_per_s());
        if (e > 0) peer_tokens_per_s.push_back(p.tokens_per_s());
      }
      std::printf("\n");
    }
    std::printf("runner-host loader: %.1f examples/s", median(examples_per_s));
    if (lm) std::printf(", %.0f tokens/s", median(tokens_per_s));
    const char* over = epochs == 2 ? "the epoch after the warm-up" : "the epochs after the warm-up";
    std::printf(" (median of %s)\n", over);
    if (memcpy_peer) {
      std::printf("memcpy peer: %.0f tokens/s (median of %s)\n", median(peer_tokens_per_s), over);
      std::printf("loader / memcpy peer: %.3f\n", median(tokens_per_s) / median(peer_tokens_per_s));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
}
