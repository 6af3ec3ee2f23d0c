#include "cli/parity/Parity.hpp"

#include <stdlib.h>
#include <yaml-cpp/yaml.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "checkpoint/CheckpointMeta.hpp"
#include "cli/conformance/JobRunner.hpp"
#include "cli/conformance/ModelFiles.hpp"
#include "formats/Json.hpp"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace rh::cli::parity {
namespace {

using conformance::JobResult;
using conformance::JobRunner;

constexpr int kExitUsage = 2;

struct Options {
  fs::path job, a, b, keep;
  int steps = 10;
  int ranks = 2;
  double tolerance = 1e-5;
  bool help = false;
};

po::options_description describe() {
  po::options_description d("Options");
  // clang-format off
  d.add_options()
      ("config", po::value<std::string>()->value_name("JOB.yaml"), "the job both sides run (required)")
      ("a", po::value<std::string>()->value_name("A.yaml"),
       "side A's strategy: a YAML map, as under `strategy:` (required)")
      ("b", po::value<std::string>()->value_name("B.yaml"), "side B's strategy (required)")
      ("steps", po::value<int>()->value_name("N"), "optimizer steps to compare (default 10)")
      ("ranks", po::value<int>()->value_name("R"), "ranks of both runs (default 2)")
      ("tolerance", po::value<double>()->value_name("REL"),
       "largest relative difference of the parameters counted as equal (default 1e-5)")
      ("keep", po::value<std::string>()->value_name("DIR"),
       "keep both runs (job files, logs, checkpoints) under DIR")
      ("help,h", "show this help");
  // clang-format on
  return d;
}

std::string help() {
  std::ostringstream out;
  out << "Usage: runner-host parity --config JOB.yaml --a A.yaml --b B.yaml [--steps N]\n"
      << "                          [--ranks R] [--tolerance REL] [--keep DIR]\n\n"
      << "Runs JOB.yaml under strategy A and under strategy B (each file a YAML map, as under\n"
      << "`strategy:`; e.g. `{type: zero, zero_optimization: {stage: 2}}`) from the same\n"
      << "initial weights and data order, and prints per step each side's loss, grad norm and\n"
      << "loss scale and how far apart the parameters are, with the first step and tensor\n"
      << "beyond the tolerance. Exit 0: none; 1: one; 2: bad usage or a failed run.\n\n"
      << describe();
  return out.str();
}

Options parse(const std::vector<std::string>& args) {
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(describe()).run(), vm);
  po::notify(vm);
  Options o;
  if (vm.count("help")) {
    o.help = true;
    return o;
  }
  for (const char* key : {"config", "a", "b"})
    if (!vm.count(key)) throw std::runtime_error(std::string("--") + key + " is required");
  o.job = fs::absolute(vm["config"].as<std::string>());
  o.a = vm["a"].as<std::string>();
  o.b = vm["b"].as<std::string>();
  if (vm.count("steps")) o.steps = vm["steps"].as<int>();
  if (vm.count("ranks")) o.ranks = vm["ranks"].as<int>();
  if (vm.count("tolerance")) o.tolerance = vm["tolerance"].as<double>();
  if (vm.count("keep")) o.keep = vm["keep"].as<std::string>();
  if (o.steps < 1 || o.steps > 10000) throw std::runtime_error("--steps: 1 to 10000");
  if (o.ranks < 1 || o.ranks > 64) throw std::runtime_error("--ranks: 1 to 64");
  if (!(o.tolerance >= 0)) throw std::runtime_error("--tolerance: a number >= 0");
  for (const fs::path& p : {o.job, o.a, o.b})
    if (!fs::is_regular_file(p)) throw std::runtime_error(p.string() + ": no such file");
  return o;
}

// A strategy file as a flow map: its top level, or its `strategy:` key.
std::string strategy_flow(const fs::path& file) {
  YAML::Node n;
  try {
    n = YAML::LoadFile(file.string());
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(file.string() + ": " + e.what());
  }
  if (n.IsMap() && n["strategy"]) n = n["strategy"];
  if (!n.IsMap() || !n["type"])
    throw std::runtime_error(file.string() + ": expected a strategy map with a `type:`");
  YAML::Emitter e;
  e.SetMapFormat(YAML::Flow);
  e.SetSeqFormat(YAML::Flow);
  e << n;
  return e.c_str();
}

// One side's job: the user's job as its base, with the strategy, a
// by-iteration loop of `steps` and a checkpoint after every step (lists
// replace: these hooks are the run's; validation is off).
std::string side_job(const Options& o, const std::string& strategy) {
  return "_base_: " + o.job.string() + "\nstrategy: " + strategy +
         "\ntrain_cfg: {_delete_: true, by_epoch: false, max_iters: " + std::to_string(o.steps) +
         "}\nval_cfg: null\nhooks:\n  - {type: checkpoint, by_epoch: false, interval: 1}\n"
         "  - {type: metrics}\n";
}

struct Step {
  std::optional<double> loss, grad_norm, loss_scale;
};

// metrics.jsonl's train lines by iteration (1-based: the step they end).
std::map<int, Step> read_metrics(const fs::path& file) {
  std::map<int, Step> out;
  std::istringstream in(conformance::read_text(file));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const json::Value v = json::parse(line);
    const json::Value* mode = v.find("mode");
    if (mode == nullptr || mode->text != "train") continue;
    const std::optional<int64_t> iter = json::find_int64_member(v, "iter");
    if (!iter) continue;
    Step& s = out[static_cast<int>(*iter)];
    auto num = [&](const char* key) -> std::optional<double> {
      const json::Value* x = v.find(key);
      if (x == nullptr || !x->is_number()) return std::nullopt;
      return x->as_double();
    };
    s.loss = num("loss");
    s.grad_norm = num("grad_norm");
    s.loss_scale = num("loss_scale");
  }
  return out;
}

// "params F32, masters F32" from a checkpoint's table.
std::string dtypes(const fs::path& checkpoint) {
  const checkpoint::CheckpointMeta meta = checkpoint::read_meta(checkpoint);
  std::map<std::string, int> params, masters;
  for (const auto& [name, t] : meta.tensors) {
    if (name.rfind("model.", 0) == 0) ++params[t.dtype];
    if (name.rfind("master.", 0) == 0) ++masters[t.dtype];
  }
  auto list = [](const std::map<std::string, int>& m) {
    std::string out;
    for (const auto& [dtype, n] : m) out += (out.empty() ? "" : "+") + dtype;
    return out.empty() ? std::string("none") : out;
  };
  return "parameters " + list(params) + ", fp32 masters " + list(masters);
}

// What the side's log says of its strategy's own precision (the host logs
// the precision_keys trait, ABI 1.8: zero's bf16/fp16, fsdp's
// mixed_precision param and reduce dtypes); a strategy without one computes
// and reduces in the parameters' dtype.
std::string precision(const std::string& log) {
  const std::string marker = "computes in a precision of its own: ";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return "none of its own (computes and reduces in the parameters')";
  const size_t from = at + marker.size();
  return log.substr(from, log.find('\n', from) - from);
}

std::string cell(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", *v);
  return buf;
}

}  // namespace

int run_parity(const std::vector<std::string>& args) {
  Options o;
  std::string a_strategy, b_strategy;
  try {
    o = parse(args);
    if (o.help) {
      std::cout << help();
      return 0;
    }
    a_strategy = strategy_flow(o.a);
    b_strategy = strategy_flow(o.b);
  } catch (const std::exception& e) {
    std::cerr << "runner-host parity: error: " << e.what() << " (see runner-host parity --help)\n";
    return kExitUsage;
  }
  std::error_code ec;
  const fs::path program = fs::read_symlink("/proc/self/exe", ec);
  fs::path root = o.keep;
  if (root.empty()) {
    std::string templ = (fs::temp_directory_path() / "rh-parity.XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) {
      std::cerr << "runner-host parity: error: cannot create " << templ << "\n";
      return kExitUsage;
    }
    root = templ;
  } else {
    fs::create_directories(root, ec);
  }
  JobRunner jobs(program, root, std::chrono::seconds(1800));
  const JobResult& ra = jobs.run("a", side_job(o, a_strategy), o.ranks);
  const JobResult& rb = jobs.run("b", side_job(o, b_strategy), o.ranks);
  auto cleanup = [&] {
    if (o.keep.empty()) fs::remove_all(root, ec);
  };
  for (const auto& [side, r] : {std::pair<const char*, const JobResult*>{"A", &ra}, {"B", &rb}})
    if (r->exit_code != 0) {
      std::cerr << "runner-host parity: error: side " << side << " failed: " << r->summary()
                << r->tail() << "\n";
      if (!o.keep.empty()) std::cerr << "(kept in " << root.string() << ")\n";
      return kExitUsage;
    }

  int status = 0;
  try {
    const auto ma = read_metrics(ra.work_dir / "metrics.jsonl");
    const auto mb = read_metrics(rb.work_dir / "metrics.jsonl");
    std::cout << "A: " << a_strategy << "\n   " << dtypes(ra.work_dir / "iter_1")
              << "; precision: " << precision(ra.log) << "\n"
              << "B: " << b_strategy << "\n   " << dtypes(rb.work_dir / "iter_1")
              << "; precision: " << precision(rb.log) << "\n"
              << o.ranks << " ranks, " << o.steps << " steps, tolerance " << o.tolerance << "\n\n";
    std::printf("%5s  %12s %12s  %12s %12s  %10s %10s  %s\n", "step", "loss A", "loss B",
                "grad_norm A", "grad_norm B", "scale A", "scale B", "params: max rel diff");
    std::string first;
    for (int step = 1; step <= o.steps; ++step) {
      const fs::path fa = ra.work_dir / ("iter_" + std::to_string(step)) / "model.safetensors";
      const fs::path fb = rb.work_dir / ("iter_" + std::to_string(step)) / "model.safetensors";
      const conformance::ModelDifference d = conformance::compare_models(fb, fa, true);
      const Step sa = ma.count(step) ? ma.at(step) : Step{};
      const Step sb = mb.count(step) ? mb.at(step) : Step{};
      const bool beyond = d.max_relative > o.tolerance;
      std::printf("%5d  %12s %12s  %12s %12s  %10s %10s  %.3g (%s)%s\n", step,
                  cell(sa.loss).c_str(), cell(sb.loss).c_str(), cell(sa.grad_norm).c_str(),
                  cell(sb.grad_norm).c_str(), cell(sa.loss_scale).c_str(),
                  cell(sb.loss_scale).c_str(), d.max_relative, d.worst_tensor.c_str(),
                  beyond && first.empty() ? "  <- first beyond the tolerance" : "");
      if (beyond && first.empty()) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.3g", d.max_relative);
        first = "step " + std::to_string(step) + ", tensor " + d.worst_tensor + " (" + buf + ")";
      }
    }
    if (first.empty()) {
      std::cout << "\nparity: A and B agree within " << o.tolerance << " at every step\n";
    } else {
      std::cout << "\nparity: first difference beyond " << o.tolerance << ": " << first << "\n";
      status = 1;
    }
  } catch (const std::exception& e) {
    std::cerr << "runner-host parity: error: " << e.what() << "\n";
    status = kExitUsage;
  }
  cleanup();
  return status;
}

}  // namespace rh::cli::parity
