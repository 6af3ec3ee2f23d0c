// Runner overhead: runner-host's training loop, without hooks, with each
// shipped hook alone and with them together, against a bare LibTorch loop on
// the same model, data, optimizer and thread count.
//
//   build/bin/rh_bench_step_overhead [--config configs/quickstart.yaml] [--epochs 16]
//                                    [--rounds 7]
//
// The bare loop builds the job's model, dataset, loader and optimizer with the
// code runner-host uses, then runs, for every epoch: next batch -> forward ->
// loss -> backward -> step -> zero_grad, and one validation pass at the end
// (runner-host validates once at the end of training, which its timing
// includes). runner-host runs the same job for the same epochs and reports
// its train loop's wall time (lifecycle, hook dispatch, metrics, strategy
// calls, and for the checkpoint hook its saves). Every figure comes from a
// fresh process (the bare loop too: this binary runs itself with --bare), so
// both sides start alike.
//
// The machine drifts (other load, frequency), so each round runs every
// variant once, in an order rotated by one each round, and a variant's ratio
// is taken against the bare loop of the same round. Printed: the median over
// rounds of ms/iteration and of the ratio, each with its spread (min-max).
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "config/JobLoader.hpp"
#include "data/DataLoader.hpp"
#include "lifecycle/Evaluator.hpp"
#include "model/Model.hpp"
#include "optim/OptimWrapper.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// ms per iteration of a bare loop over `epochs` epochs (and one validation).
double bare_loop(const rh::config::Node& job, const std::string& job_dir, int64_t epochs) {
  const uint64_t seed = job.find("seed") ? static_cast<uint64_t>(job.find("seed")->as_int()) : 0;
  torch::manual_seed(seed);
  auto model = rh::model::build_model(*job.find("model"), seed, job_dir);
  const rh::config::Node& train = *job.find("data")->find("train");
  rh::data::DataLoader loader(rh::data::build_dataset(*train.find("dataset"), job_dir),
                              rh::data::loader_options(train, seed), 0, 1);
  const rh::config::Node* val = job.find("data")->find("val");
  std::unique_ptr<rh::data::DataLoader> val_loader;
  if (val != nullptr)
    val_loader = std::make_unique<rh::data::DataLoader>(
        rh::data::build_dataset(*val->find("dataset"), job_dir),
        rh::data::loader_options(*val, seed), 0, 1);
  std::vector<rh::optim::OptimParam> params;
  for (auto& p : model->named_parameters()) params.push_back({p.name, p.tensor, false});
  rh::optim::OptimWrapper optim(*job.find("optim_wrapper"), params);

  int64_t iters = 0;
  const auto t0 = Clock::now();
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    model->train(true);
    loader.start_epoch(epoch);
    while (auto batch = loader.next()) {
      at::Tensor logits = model->forward(batch->input);
      at::Tensor loss = rh::lifecycle::Evaluator::loss(model->task(), logits, batch->target);
      loss.backward();
      optim.step();
      optim.zero_grad();
      ++iters;
    }
  }
  if (val_loader) {
    model->train(false);
    torch::NoGradGuard no_grad;
    rh::lifecycle::Evaluator evaluator(model->task(), val_loader->dataset().num_classes());
    val_loader->start_epoch(0);
    while (auto batch = val_loader->next())
      evaluator.add(model->forward(batch->input), batch->target);
    (void)evaluator.metrics();
  }
  return 1e3 * std::chrono::duration<double>(Clock::now() - t0).count() /
         static_cast<double>(iters);
}

std::string run_and_capture(const std::string& cmd) {
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run " + cmd);
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  if (pclose(pipe) != 0) throw std::runtime_error("failed: " + cmd + "\n" + output);
  return output;
}

double parse_ms(const std::string& output, const std::regex& line, const std::string& cmd) {
  std::smatch m;
  if (!std::regex_search(output, m, line))
    throw std::runtime_error("no timing line in the output of " + cmd + ":\n" + output);
  return std::stod(m[1]);
}

struct Variant {
  std::string name;
  std::string hooks;  // YAML list; empty: the bare loop
  std::vector<double> ms, ratio;
};

std::string shell_quoted(const std::string& s) { return "'" + s + "'"; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::string config = "configs/quickstart.yaml";
  int64_t epochs = 16;
  int rounds = 7;
  bool bare_child = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--bare") {
      bare_child = true;
    } else if (a == "--config" && has_value) {
      config = argv[++i];
    } else if (a == "--epochs" && has_value) {
      epochs = std::stoll(argv[++i]);
    } else if (a == "--rounds" && has_value) {
      rounds = std::stoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--config job.yaml] [--epochs N] [--rounds N]\n"
                   "unknown or incomplete argument '%s'\n",
                   argv[0], a.c_str());
      return 2;
    }
  }
  if (epochs < 1 || rounds < 1) {
    std::fprintf(stderr, "--epochs and --rounds must be >= 1\n");
    return 2;
  }
  try {
    rh::config::Job job = rh::config::load_job(config, {});
    const std::string job_dir = fs::absolute(config).parent_path().string();
    if (bare_child) {
      std::printf("bare loop: %.6f ms/iteration\n", bare_loop(*job.root, job_dir, epochs));
      return 0;
    }
    const fs::path exe = fs::read_symlink("/proc/self/exe");
    const std::string runner = (exe.parent_path() / "runner-host").string();
    const fs::path work = fs::temp_directory_path() / ("rh-bench-" + std::to_string(::getpid()));
    const std::string ckpt = "{type: checkpoint, interval: 5}";
    std::vector<Variant> variants = {
        {"bare LibTorch loop", "", {}, {}},
        {"runner-host, no hooks", "[]", {}, {}},
        {"logger (interval 50)", "[{type: logger, interval: 50}]", {}, {}},
        {"metrics", "[{type: metrics}]", {}, {}},
        {"checkpoint (interval 5)", "[" + ckpt + "]", {}, {}},
        {"trace", "[{type: trace}]", {}, {}},
        {"logger+metrics+checkpoint",
         "[{type: logger, interval: 50}, {type: metrics}, " + ckpt + "]",
         {},
         {}},
        {"all four",
         "[{type: logger, interval: 50}, {type: metrics}, " + ckpt + ", {type: trace}]",
         {},
         {}},
    };
    static const std::regex kBare("bare loop: ([0-9.]+) ms/iteration");
    static const std::regex kRunner(
        "train loop: [0-9]+ iterations in [0-9.]+ s \\(([0-9.]+) ms/iteration");
    std::printf("%s: %lld epochs per run, %d alternating rounds, %d intra-op thread(s)%s\n",
                config.c_str(), static_cast<long long>(epochs), rounds, at::get_num_threads(),
                std::getenv("OMP_NUM_THREADS") ? "" : " (OMP_NUM_THREADS unset)");
    std::fflush(stdout);
    const size_t n = variants.size();
    for (int r = 0; r < rounds; ++r) {
      std::vector<double> ms(n);
      for (size_t k = 0; k < n; ++k) {
        const size_t v = (k + static_cast<size_t>(r)) % n;  // rotated order
        std::string cmd;
        if (variants[v].hooks.empty()) {
          cmd = shell_quoted(exe.string()) + " --bare --config " + shell_quoted(config) +
                " --epochs " + std::to_string(epochs);
          ms[v] = parse_ms(run_and_capture(cmd), kBare, cmd);
        } else {
          cmd = shell_quoted(runner) + " --config " + shell_quoted(config) + " --set " +
                shell_quoted("work_dir=" + work.string()) + " --set " +
                shell_quoted("train_cfg={by_epoch: true, max_epochs: " + std::to_string(epochs) +
                             ", val_interval: 100000000}") +
                " --set " + shell_quoted("hooks=" + variants[v].hooks);
          ms[v] = parse_ms(run_and_capture(cmd), kRunner, cmd);
          fs::remove_all(work);
        }
      }
      for (size_t v = 0; v < n; ++v) {
        variants[v].ms.push_back(ms[v]);
        variants[v].ratio.push_back(ms[v] / ms[0]);
      }
      std::printf("round %d/%d:", r + 1, rounds);
      for (size_t v = 1; v < n; ++v) std::printf(" %.3f", ms[v] / ms[0]);
      std::printf("\n");
      std::fflush(stdout);
    }
    std::printf("%-27s %-28s %s\n", "", "ms/iteration median (min-max)",
                "ratio to bare median (min-max)");
    for (const Variant& v : variants) {
      const auto [lo, hi] = std::minmax_element(v.ms.begin(), v.ms.end());
      std::printf("%-27s %.4f (%.4f-%.4f)", v.name.c_str(), median(v.ms), *lo, *hi);
      if (v.hooks.empty()) {
        std::printf("\n");
        continue;
      }
      const auto [rlo, rhi] = std::minmax_element(v.ratio.begin(), v.ratio.end());
      std::printf("      %.3f (%.3f-%.3f)\n", median(v.ratio), *rlo, *rhi);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
