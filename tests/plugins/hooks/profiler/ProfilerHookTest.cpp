// Hook `profiler` and the throughput / memory / communication metrics, end
// to end through runner-host: a 2-rank ddp run's Chrome traces (read back
// as JSON) show the runner's phases and ddp's all-reduces overlapping
// backward; metrics.jsonl carries plausible throughput, memory and ddp
// communication figures.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/TestUtil.hpp"

namespace rh::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// MLP 32 -> 64 -> 64 -> 10: 6922 float32 parameters in 6 tensors.
constexpr double kGradBytes = (32 * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10) * 4.0;
constexpr int kParamTensors = 6;

std::string job(
    const fs::path& work, const std::string& strategy, const std::string& hooks,
    const std::string& model = "{type: mlp, in_features: 32, hidden: [64, 64], num_classes: 10}",
    const std::string& dataset =
        "{type: synthetic_classification, num_samples: 512, "
        "num_features: 32, num_classes: 10}") {
  return "work_dir: " + work.string() + "\nseed: 1\nmodel: " + model +
         "\ndata:\n  train: {dataset: " + dataset +
         ", batch_size: 8, num_workers: 0}\n"
         "optim_wrapper: {optimizer: {type: SGD, lr: 0.01}}\n"
         "train_cfg: {by_epoch: false, max_iters: 6}\n"
         "strategy: " +
         strategy + "\nhooks:\n" + hooks;
}

CommandResult run_job(const TempDir& dir, const std::string& yaml, const std::string& args = "") {
  dir.write("job.yaml", yaml);
  return run_command("cd " + quote(dir.path().string()) + " && " + quote(RH_RUNNER_HOST) +
                     " --config job.yaml --master-port 0 " + args);
}

std::vector<YAML::Node> train_lines(const fs::path& metrics) {
  std::vector<YAML::Node> out;
  std::istringstream in(read_file(metrics));
  for (std::string line; std::getline(in, line);) out.push_back(YAML::Load(line));  // JSON is YAML
  return out;
}

struct Range {
  std::string name;
  double begin, end;
};

TEST(ProfilerHookTest, TwoRankDdpTracesShowPhasesAndAllReducesOverlappingBackward) {
  TempDir dir;
  const fs::path work = dir / "work";
  const CommandResult r =
      run_job(dir,
              job(work, "{type: ddp, first_bucket_mb: 0.001, bucket_cap_mb: 0.01}",
                  "  - {type: metrics}\n  - {type: profiler, begin: 2, end: 5}\n"),
              "--nproc-per-node 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path trace = work / "profile" / ("rank" + std::to_string(rank) + ".json");
    ASSERT_TRUE(fs::exists(trace)) << r.output;
    // Strict JSON (what Perfetto and chrome://tracing load), not just YAML.
    const CommandResult valid =
        run_command("/usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' " +
                    quote(trace.string()));
    ASSERT_EQ(valid.exit_code, 0) << valid.output;
    const YAML::Node events = YAML::Load(read_file(trace))["traceEvents"];
    std::vector<Range> slices, async;
    std::vector<double> async_begin_ts;
    std::map<uint64_t, double> async_open;
    for (const auto& e : events) {
      const std::string ph = e["ph"].as<std::string>();
      if (ph == "M") continue;
      EXPECT_EQ(e["pid"].as<int>(), rank);
      const std::string name = e["name"].as<std::string>();
      const double ts = e["ts"].as<double>();
      if (ph == "X") {
        slices.push_back({name, ts, ts + e["dur"].as<double>()});
      } else if (ph == "b") {
        async_open[e["id"].as<uint64_t>()] = ts;
      } else if (ph == "e") {
        const auto id = e["id"].as<uint64_t>();
        ASSERT_EQ(async_open.count(id), 1u) << "async end without a begin: " << name;
        async.push_back({name, async_open[id], ts});
        async_open.erase(id);
      } else {
        ADD_FAILURE() << "unexpected phase " << ph;
      }
    }
    EXPECT_TRUE(async_open.empty());
    auto named = [](const std::vector<Range>& v, const std::string& name) {
      std::vector<Range> out;
      for (const auto& x : v)
        if (x.name == name) out.push_back(x);
      return out;
    };
    // Iterations 2, 3, 4 and their phases (iteration 2's data loading too:
    // the profiler starts at the end of iteration 1).
    for (int it = 2; it < 5; ++it)
      EXPECT_EQ(named(slices, "rh::train_iter " + std::to_string(it)).size(), 1u) << it;
    for (const char* phase : {"rh::data", "rh::forward", "rh::backward", "rh::sync",
                              "rh::optimizer_step", "rh::zero_grad"})
      EXPECT_EQ(named(slices, phase).size(), 3u) << phase << " in rank " << rank;
    const auto backward = named(slices, "rh::backward");
    const auto issued = named(slices, "ddp::all_reduce");
    const auto in_flight = [&] {
      std::vector<Range> out;
      for (const auto& a : async)
        if (a.name.rfind("ddp::all_reduce bucket ", 0) == 0) out.push_back(a);
      return out;
    }();
    EXPECT_GE(issued.size(), 3u * 2);  // several buckets per step
    EXPECT_EQ(in_flight.size(), issued.size());
    EXPECT_GE(named(slices, "ddp::wait").size(), issued.size());
    // Overlap: some bucket is issued inside backward, and is still in flight
    // when backward ends (its wait is in sync).
    bool issued_in_backward = false, in_flight_across_backward_end = false;
    for (const auto& b : backward) {
      for (const auto& i : issued)
        if (i.begin >= b.begin && i.end <= b.end) issued_in_backward = true;
      for (const auto& f : in_flight)
        if (f.begin < b.end && f.end > b.end) in_flight_across_backward_end = true;
    }
    EXPECT_TRUE(issued_in_backward) << "rank " << rank;
    EXPECT_TRUE(in_flight_across_backward_end) << "rank " << rank;
  }
  // ddp's communication per step: the gradients (plus, in the first step,
  // the bucket order broadcast once: one int64 per parameter tensor).
  const auto lines = train_lines(work / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 6u);
  for (const auto& line : lines) {
    const int iter = line["iter"].as<int>();
    const double expected = kGradBytes + (iter == 1 ? 8.0 * kParamTensors : 0.0);
    EXPECT_EQ(line["ddp/comm_bytes"].as<double>(), expected) << "iter " << iter;
    EXPECT_GT(line["ddp/comm_ms"].as<double>(), 0.0);
    EXPECT_LT(line["ddp/comm_ms"].as<double>(), 1e3 * line["time"].as<double>());
    EXPECT_DOUBLE_EQ(line["job_samples_per_s"].as<double>(),
                     2 * line["samples_per_s"].as<double>());
  }
}

TEST(ProfilerHookTest, ThroughputAndMemoryMetricsArePlausible) {
  TempDir dir;
  const fs::path work = dir / "work";
  const CommandResult r = run_job(dir, job(work, "{type: single}", "  - {type: metrics}\n"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = train_lines(work / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 6u);
  for (const auto& line : lines) {
    const double rate = line["samples_per_s"].as<double>();
    EXPECT_GT(rate, 0.0);
    // Samples (batch 8) over the iteration's `time`.
    // rate = 8 / time in double, both printed as their shortest round trip
    // (exact): (8 / t)·t is within 2 ulp of 8 (3.6e-15).
    EXPECT_NEAR(rate * line["time"].as<double>(), 8.0, 1e-9);
    EXPECT_EQ(line["job_samples_per_s"].as<double>(), rate);  // one rank
    const double rss = line["rss_mb"].as<double>();
    EXPECT_GT(rss, 10.0);                                  // LibTorch alone is more
    EXPECT_LE(rss, line["memory_mb"].as<double>() + 1.0);  // current <= peak
    EXPECT_FALSE(line["tokens_per_s"]);
    EXPECT_FALSE(line["cuda_allocated_mb"]);  // on the CPU
  }
}

TEST(ProfilerHookTest, LanguageModelsReportTokensPerSecond) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  dir.write("text.txt", text);
  const fs::path work = dir / "work";
  const CommandResult r =
      run_job(dir, job(work, "{type: single}", "  - {type: metrics}\n",
                       "{type: gpt, vocab_size: 256, block_size: 16, dim: 32, depth: 1, heads: 2}",
                       "{type: char_lm, path: text.txt, block_size: 16, split: train}"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& line : train_lines(work / "metrics.jsonl")) {
    // As above: within 2 ulp of 128 (5.7e-14).
    EXPECT_NEAR(line["tokens_per_s"].as<double>() * line["time"].as<double>(), 8.0 * 16, 1e-9);
    EXPECT_FALSE(line["samples_per_s"]);
  }
}

TEST(ProfilerHookTest, AnEmptyIterationRangeIsRejected) {
  TempDir dir;
  const CommandResult r =
      run_job(dir, job(dir / "work", "{type: single}", "  - {type: profiler, begin: 4, end: 4}\n"),
              "--dry-run");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("the profiled iterations [begin, end) are empty: begin 4, end 4"));
}

}  // namespace
}  // namespace rh::test
