#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "FuzzEntries.hpp"
#include "config/JobLoader.hpp"
#include "config/YamlReader.hpp"
#include "config/YamlWriter.hpp"
#include "job/JobSchema.hpp"
#include "job/JobSettings.hpp"

namespace rh::fuzz {
namespace {

const char kBase[] =
    "work_dir: work_dirs/fuzz\n"
    "seed: 1\n"
    "model: {type: mlp, in_features: 4, hidden: [8], num_classes: 2}\n"
    "train_cfg: {by_epoch: true, max_epochs: 1}\n"
    "hooks:\n"
    "  - {type: logger, interval: 10}\n";

[[noreturn]] void broken(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "fuzz job_config: %s\n%s\n", what.c_str(), detail.c_str());
  std::abort();
}

}  // namespace

void job_config(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::string job = input;
  std::vector<std::string> set_args;
  const std::string marker = "#--set\n";
  size_t at = std::string::npos;  // where the "#--set" line starts
  if (input.compare(0, marker.size(), marker) == 0) {
    at = 0;
  } else if (const size_t newline = input.find("\n" + marker); newline != std::string::npos) {
    at = newline + 1;
  }
  if (at != std::string::npos) {
    job = input.substr(0, at);
    size_t line = at + marker.size();
    while (line < input.size()) {
      size_t end = input.find('\n', line);
      if (end == std::string::npos) end = input.size();
      set_args.push_back(input.substr(line, end - line));
      line = end + 1;
    }
  }
  const std::string dir = scratch_dir();
  write_file(dir + "/base.yaml", reinterpret_cast<const uint8_t*>(kBase), sizeof kBase - 1);
  write_file(dir + "/job.yaml", reinterpret_cast<const uint8_t*>(job.data()), job.size());

  config::Job loaded;
  try {
    loaded = config::load_job(dir + "/job.yaml", set_args);
  } catch (const config::ConfigError&) {
    return;  // rejected with a located message: what the loader promises
  }
  // A job the schema passes is read into the typed settings and checked
  // against each mode: neither may throw (they read what the schema checked).
  if (config::validate_job(*loaded.root).empty()) {
    (void)config::read_settings(*loaded.root);
    for (config::RunMode mode :
         {config::RunMode::Train, config::RunMode::Val, config::RunMode::Test})
      (void)config::check_run(*loaded.root, mode);
  }

  // --print-config's output must read back to the same tree (YamlWriter.hpp).
  const std::string printed = config::to_yaml(*loaded.root);
  std::string reprinted;
  try {
    reprinted = config::to_yaml(*config::parse_yaml(printed, "printed.yaml"));
  } catch (const config::ConfigError& e) {
    broken("--print-config output does not parse: " + std::string(e.what()), printed);
  }
  if (reprinted != printed)
    broken("--print-config output reads back differently",
           printed + "\n---- vs ----\n" + reprinted);
}

}  // namespace rh::fuzz
