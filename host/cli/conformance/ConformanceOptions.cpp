#include "cli/conformance/ConformanceOptions.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <sstream>
#include <stdexcept>

#include "cli/conformance/Checks.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace rh::cli::conformance {
namespace {

po::options_description describe() {
  po::options_description d("Options");
  // clang-format off
  d.add_options()
      ("strategy", po::value<std::string>()->value_name("PATH.so"),
       "the strategy plugin to check (required)")
      ("type", po::value<std::string>()->value_name("NAME"),
       "its strategy type, when the library provides several")
      ("config", po::value<std::string>()->value_name("FILE"),
       "a YAML map of the strategy's own keys, merged under `strategy:` in every job")
      ("ranks", po::value<std::string>()->value_name("N,M"),
       "world sizes for equivalence and exact_resume (default: 2 for equivalence, 2,3 for "
       "exact_resume); the first for lifecycle and checkpoints")
      ("only", po::value<std::string>()->value_name("CHECK"), "run this check alone")
      ("keep", po::value<std::string>()->value_name("DIR"),
       "keep every job's files (job file, log, work_dir) under DIR; default: a temporary "
       "directory, removed at the end")
      ("expect-divergence", po::value<std::string>()->value_name("REASON"),
       "the strategy is lossy by design (local SGD, compression): equivalence reports the "
       "difference with REASON instead of failing")
      ("tolerance", po::value<double>()->value_name("REL"),
       "equivalence's largest relative difference from ddp (default 1e-5)")
      ("help,h", "show this help");
  // clang-format on
  return d;
}

std::vector<int> parse_ranks(const std::string& text) {
  std::vector<int> out;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || n < 1 || n > 64)
      throw std::runtime_error(
          "--ranks: expected world sizes of 1 to 64 separated by commas "
          "(2,3), got '" +
          text + "'");
    out.push_back(n);
  }
  if (out.empty()) throw std::runtime_error("--ranks: empty");
  return out;
}

}  // namespace

std::string conformance_help() {
  std::ostringstream out;
  out << "Usage: runner-host conformance --strategy PATH.so [--type NAME] [--config FILE]\n"
      << "                               [--ranks 2,3] [--only CHECK] [--keep DIR]\n\n"
      << "Runs a strategy plugin through the checks runner-host's own strategies pass, as\n"
      << "real multi-process jobs of this program on tiny built-in models, and prints one\n"
      << "line per check: PASS|FAIL|SKIP <check>: <what was measured>. Exit 0 when every\n"
      << "check passes, 1 when one fails, 2 on bad usage. docs/plugins.md, \"Conformance\".\n\n"
      << "Checks:\n";
  size_t width = 0;  // the longest name, plus two spaces
  for (const CheckEntry& c : all_checks()) width = std::max(width, std::string(c.name).size() + 2);
  for (const CheckEntry& c : all_checks())
    out << "  " << c.name << std::string(width - std::string(c.name).size(), ' ') << c.summary
        << "\n";
  out << "\n"
      << describe() << "\n"
      << "Examples:\n"
      << "  runner-host conformance --strategy ./librh_strategy_mine.so\n"
      << "  runner-host conformance --strategy lib/runner-host/abi/librh_strategy_zero.so "
         "--config zero2.yaml\n"
      << "  runner-host conformance --strategy ./librh_strategy_local_sgd.so --expect-divergence "
         "\"local SGD averages every 4 steps\"\n"
      << "  runner-host conformance --strategy ./librh_strategy_mine.so --only exact_resume "
         "--keep /tmp/conf\n";
  return out.str();
}

ConformanceOptions parse_conformance_options(const std::vector<std::string>& args) {
  po::variables_map vm;
  try {
    const po::options_description description = describe();
    const po::parsed_options parsed = po::command_line_parser(args).options(description).run();
    for (const std::string& word : po::collect_unrecognized(parsed.options, po::include_positional))
      throw std::runtime_error("unexpected argument '" + word + "'");
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw std::runtime_error(e.what());
  }
  ConformanceOptions o;
  o.help = vm.count("help") > 0;
  if (o.help) return o;
  if (!vm.count("strategy")) throw std::runtime_error("--strategy PATH.so is required");
  o.strategy = fs::absolute(vm["strategy"].as<std::string>()).lexically_normal();
  if (!fs::is_regular_file(o.strategy))
    throw std::runtime_error("--strategy " + o.strategy.string() + ": no such file");
  if (vm.count("type")) o.type = vm["type"].as<std::string>();
  if (vm.count("config")) {
    o.config = fs::absolute(vm["config"].as<std::string>()).lexically_normal();
    if (!fs::is_regular_file(o.config))
      throw std::runtime_error("--config " + o.config.string() + ": no such file");
  }
  if (vm.count("ranks")) o.ranks = parse_ranks(vm["ranks"].as<std::string>());
  if (vm.count("only")) {
    o.only = vm["only"].as<std::string>();
    std::string names;
    bool known = false;
    for (const CheckEntry& c : all_checks()) {
      known = known || o.only == c.name;
      names += (names.empty() ? "" : ", ") + std::string(c.name);
    }
    if (!known)
      throw std::runtime_error("--only: no check '" + o.only + "' (checks: " + names + ")");
  }
  if (vm.count("keep")) o.keep = fs::absolute(vm["keep"].as<std::string>()).lexically_normal();
  if (vm.count("expect-divergence")) {
    o.expect_divergence = vm["expect-divergence"].as<std::string>();
    if (o.expect_divergence.empty())
      throw std::runtime_error("--expect-divergence: give the reason the strategy differs");
  }
  if (vm.count("tolerance")) {
    o.tolerance = vm["tolerance"].as<double>();
    if (!(o.tolerance >= 0)) throw std::runtime_error("--tolerance: expected 0 or more");
  }
  return o;
}

}  // namespace rh::cli::conformance
