// Runner overhead: runner-host's training loop against a bare LibTorch loop
// on the same model, data, optimizer and thread count, in the same run.
//
//   build/bin/rh_bench_step_overhead [--config configs/quickstart.yaml] [--iters 2000] [--repeats
//   3]
//
// The bare loop builds the job's model, dataset, loader and optimizer with the
// code runner-host uses, then runs: next batch -> forward -> loss -> backward
// -> step -> zero_grad. runner-host runs the same job iteration-based without
// validation, and reports its train loop's wall time (which includes the
// lifecycle, hook dispatch, metrics and the strategy calls): once with no
// hooks, once with the logger and metrics hooks. Each figure is the best
// (minimum) of --repeats runs, in ms per iteration; the ratio is the overhead.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
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

// ms per iteration of a bare loop over `iters` iterations.
double bare_loop(const rh::config::Node& job, const std::string& job_dir, int iters) {
  const uint64_t seed = job.find("seed") ? static_cast<uint64_t>(job.find("seed")->as_int()) : 0;
  torch::manual_seed(seed);
  auto model = rh::model::build_model(*job.find("model"), seed, job_dir);
  const rh::config::Node& train = *job.find("data")->find("train");
  auto dataset = rh::data::build_dataset(*train.find("dataset"), job_dir);
  rh::data::DataLoader loader(dataset, rh::data::loader_options(train, seed), 0, 1);
  std::vector<rh::optim::OptimParam> params;
  for (auto& p : model->named_parameters()) params.push_back({p.name, p.tensor, false});
  rh::optim::OptimWrapper optim(*job.find("optim_wrapper"), params);
  model->train(true);

  int64_t epoch = 0;
  loader.start_epoch(epoch);
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    auto batch = loader.next();
    if (!batch) {
      loader.start_epoch(++epoch);
      batch = loader.next();
    }
    at::Tensor logits = model->forward(batch->input);
    at::Tensor loss = rh::lifecycle::Evaluator::loss(model->task(), logits, batch->target);
    loss.backward();
    optim.step();
    optim.zero_grad();
  }
  return 1e3 * std::chrono::duration<double>(Clock::now() - t0).count() / iters;
}

// ms per iteration runner-host reports for its train loop.
double runner_loop(const std::string& runner, const std::string& config, const fs::path& work,
                   int iters, const std::string& hooks) {
  const std::string cmd =
      runner + " --config " + config + " --set work_dir=" + work.string() +
      " --set 'train_cfg={by_epoch: false, max_iters: " + std::to_string(iters) +
      ", val_interval: 100000000}' --set 'hooks=" + hooks + "' 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run " + cmd);
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  if (pclose(pipe) != 0) throw std::runtime_error("runner-host failed: " + cmd + "\n" + output);
  std::smatch m;
  static const std::regex kLine(
      "train loop: [0-9]+ iterations in [0-9.]+ s \\(([0-9.]+) ms/iteration");
  if (!std::regex_search(output, m, kLine))
    throw std::runtime_error("no train loop timing in:\n" + output);
  fs::remove_all(work);
  return std::stod(m[1]);
}

}  // namespace

int main(int argc, char** argv) {
  std::string config = "configs/quickstart.yaml";
  int iters = 2000, repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--config")
      config = argv[i + 1];
    else if (a == "--iters")
      iters = std::stoi(argv[i + 1]);
    else if (a == "--repeats")
      repeats = std::stoi(argv[i + 1]);
  }
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  const std::string runner = (exe.parent_path() / "runner-host").string();
  const fs::path work = fs::temp_directory_path() / ("rh-bench-" + std::to_string(::getpid()));
  try {
    rh::config::Job job = rh::config::load_job(config, {});
    const std::string job_dir = fs::absolute(config).parent_path().string();
    std::printf("%s: %d iterations per run, best of %d, %d intra-op thread(s)\n", config.c_str(),
                iters, repeats, at::get_num_threads());
    double bare = 1e30, plain = 1e30, hooked = 1e30;
    for (int r = 0; r < repeats; ++r) {  // interleaved, so drift hits all three alike
      bare = std::min(bare, bare_loop(*job.root, job_dir, iters));
      plain = std::min(plain, runner_loop(runner, config, work, iters, "[]"));
      hooked = std::min(
          hooked, runner_loop(runner, config, work, iters, "[{type: logger}, {type: metrics}]"));
    }
    std::printf("bare LibTorch loop          : %.4f ms/iter\n", bare);
    std::printf("runner-host, no hooks       : %.4f ms/iter  ratio %.3f (%+.1f%%)\n", plain,
                plain / bare, (plain / bare - 1) * 100);
    std::printf("runner-host, logger+metrics : %.4f ms/iter  ratio %.3f (%+.1f%%)\n", hooked,
                hooked / bare, (hooked / bare - 1) * 100);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
