// Runner overhead: runner-host's train step time against a bare LibTorch loop
// on the same model, data, optimizer and thread count, in the same run.
//
//   build/bin/rh_bench_step_overhead [--config configs/quickstart.yaml] [--iters 300] [--warmup 30]
//
// The bare loop builds the job's model, dataset, loader and optimizer with
// the same code runner-host uses, then runs next batch -> forward -> loss ->
// backward -> step -> zero_grad and times each iteration. The runner runs the
// same job (iteration-based, the metrics hook recording each iteration's
// wall time, which also covers data waiting and hooks). Both report the median
// iteration time; the ratio is the runner's overhead.
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<double> bare_loop(const rh::config::Node& job, const std::string& job_dir, int iters,
                              int warmup) {
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

  std::vector<double> times;
  int64_t epoch = 0;
  loader.start_epoch(epoch);
  for (int i = 0; i < iters + warmup; ++i) {
    auto t0 = Clock::now();
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
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i >= warmup) times.push_back(dt);
  }
  return times;
}

std::vector<double> runner_loop(const std::string& runner, const std::string& config,
                                const fs::path& work, int iters, int warmup) {
  const std::string cmd =
      runner + " --config " + config + " --log-level warn" + " --set work_dir=" + work.string() +
      " --set train_cfg={by_epoch: false, max_iters: " + std::to_string(iters + warmup) +
      ", val_interval: 1000000}" + " --set 'hooks=[{type: metrics, file: metrics.jsonl}]'";
  if (std::system(("cd " + fs::current_path().string() + " && " + cmd + " > /dev/null").c_str()) !=
      0)
    throw std::runtime_error("runner-host failed: " + cmd);
  std::vector<double> times;
  std::ifstream in(work / "metrics.jsonl");
  int i = 0;
  for (std::string line; std::getline(in, line);) {
    YAML::Node rec = YAML::Load(line);
    if (!rec["time"] || rec["mode"].as<std::string>() != "train") continue;
    if (i++ >= warmup) times.push_back(rec["time"].as<double>());
  }
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config = "configs/quickstart.yaml";
  int iters = 300, warmup = 30;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--config")
      config = argv[i + 1];
    else if (a == "--iters")
      iters = std::stoi(argv[i + 1]);
    else if (a == "--warmup")
      warmup = std::stoi(argv[i + 1]);
  }
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  const std::string runner = (exe.parent_path() / "runner-host").string();
  const fs::path work = fs::temp_directory_path() / ("rh-bench-" + std::to_string(::getpid()));
  try {
    rh::config::Job job = rh::config::load_job(config, {});
    const std::string job_dir = fs::absolute(config).parent_path().string();
    std::printf("config %s, %d timed iterations after %d warm-up, %d intra-op threads\n",
                config.c_str(), iters, warmup, at::get_num_threads());
    std::vector<double> bare = bare_loop(*job.root, job_dir, iters, warmup);
    std::vector<double> ran = runner_loop(runner, config, work, iters, warmup);
    fs::remove_all(work);
    const double b = median(bare), r = median(ran);
    std::printf("bare LibTorch loop : median %.3f ms/iter (%zu iterations)\n", b * 1e3,
                bare.size());
    std::printf("runner-host        : median %.3f ms/iter (%zu iterations)\n", r * 1e3, ran.size());
    std::printf("ratio runner/bare  : %.3f  (overhead %+.1f%%)\n", r / b, (r / b - 1) * 100);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
