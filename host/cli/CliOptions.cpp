#include "cli/CliOptions.hpp"

#include <boost/program_options.hpp>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <variant>

namespace po = boost::program_options;

namespace rh::cli {
namespace {

// The value a launcher flag's field takes: int for an int, T for an
// optional<T>.
template <class Field>
struct FlagValue {
  using type = Field;
};
template <class T>
struct FlagValue<std::optional<T>> {
  using type = T;
};

po::options_description describe() {
  po::options_description d("Options");
  // clang-format off
  d.add_options()
      ("config,c", po::value<std::string>()->value_name("FILE"), "the YAML job file")
      ("set", po::value<std::vector<std::string>>()->composing()->value_name("KEY=VALUE"),
       "override a job key (repeatable); VALUE is YAML: 3e-4, [1, 2], 'text'")
      ("plugin-path", po::value<std::vector<std::string>>()->composing()->value_name("DIR"),
       "search DIR for plugins before RH_PLUGIN_PATH and the install (repeatable)")
      ("list-plugins", "list every plugin found (kind, type names, versions, tags) and why any was refused")
      ("print-config", "print the job after _base_ includes and --set overrides, then exit")
      ("print-param-groups",
       "build the model and print each trainable parameter's lr and weight decay as optim_wrapper "
       "sets them (paramwise_cfg, constructor), then exit")
      ("mode", po::value<std::string>()->value_name("MODE"),
       "train (default), val or test: val/test evaluate load_from or the resumed checkpoint, no optimizer")
      ("dry-run", "validate the job and create every plugin component, then exit; builds and writes nothing")
      ("estimate-memory",
       "print what each rank would keep (parameters, gradients, optimizer state, masters, "
       "communication buffers) for --nproc-per-node x --nnodes ranks, then exit; the model is "
       "not allocated and nothing is launched")
      ("log-level", po::value<std::string>()->value_name("LEVEL"), "trace, debug, info, warn or error");
  // clang-format on
  // The launcher's flags, from their one table (launch/LaunchFlags.hpp).
  for (const launch::LauncherFlagSpec& spec : launch::launcher_flag_specs()) {
    std::visit(
        [&](auto field) {
          using Field =
              std::remove_reference_t<decltype(field(std::declval<launch::LauncherFlags&>()))>;
          using Value = typename FlagValue<Field>::type;
          d.add_options()(spec.name, po::value<Value>()->value_name(spec.value_name), spec.help);
        },
        spec.field);
  }
  d.add_options()("version", "print the version, ABI and native tag")("help,h", "show this help");
  return d;
}

}  // namespace

std::string cli_help() {
  std::ostringstream out;
  out << "Usage: runner-host --config JOB.yaml [options]\n"
      << "       runner-host ckpt inspect|consolidate|convert DIR ... (the checkpoint tool:\n"
      << "       runner-host ckpt --help)\n"
      << "       runner-host conformance --strategy PATH.so ... (checks a strategy plugin:\n"
      << "       runner-host conformance --help)\n"
      << "       runner-host parity --config JOB.yaml --a A.yaml --b B.yaml ... (two strategies\n"
      << "       step by step: runner-host parity --help)\n\n"
      << "Trains a LibTorch model as the YAML job says; strategies, hooks and checkpoint\n"
      << "storage are plugins (shared libraries) found on the plugin search path:\n"
      << "  1. a component's `plugin:` path in the job file (relative to the job file)\n"
      << "  2. --plugin-path DIR (in order)\n"
      << "  3. RH_PLUGIN_PATH (colon-separated)\n"
      << "  4. the install's plugin directory (<prefix>/lib/runner-host/plugins)\n\n"
      << describe() << "\n"
      << "Examples:\n"
      << "  runner-host --config configs/quickstart.yaml\n"
      << "  runner-host --config job.yaml --set optim_wrapper.optimizer.lr=3e-4 --set "
         "train_cfg.max_epochs=2\n"
      << "  runner-host --config job.yaml --dry-run\n"
      << "  runner-host --config job.yaml --mode val --set load_from=work_dirs/job/epoch_10\n"
      << "  runner-host --config job.yaml --print-config\n"
      << "  runner-host --config job.yaml --estimate-memory --nproc-per-node 4\n"
      << "  runner-host --list-plugins --plugin-path ./my_plugins\n"
      << "  runner-host --config job.yaml --nproc-per-node 2\n"
      << "  runner-host --config job.yaml --nproc-per-node 8 --nnodes 2 --node-rank 0 "
         "--master-addr node0\n\n"
      << "Exit codes: 0 success, 2 invalid job or plugin (nothing was created or written), 1 run "
         "failure.\n";
  return out.str();
}

CliOptions parse_cli(int argc, const char* const* argv) {
  po::variables_map vm;
  try {
    // `parsed` points into the description: it must outlive store().
    const po::options_description description = describe();
    const po::parsed_options parsed =
        po::command_line_parser(argc, argv).options(description).run();
    // A word that is no option (`--set a=1 b=2`: b=2) would be dropped
    // without a word by boost when no positional options are declared.
    for (const std::string& word : po::collect_unrecognized(parsed.options, po::include_positional))
      throw std::runtime_error("unexpected argument '" + word +
                               "' (each --set takes one key=value: --set a=1 --set b=2)");
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw std::runtime_error(e.what());
  }
  CliOptions o;
  if (vm.count("config")) o.config = vm["config"].as<std::string>();
  if (vm.count("set")) o.set_args = vm["set"].as<std::vector<std::string>>();
  if (vm.count("plugin-path")) o.plugin_paths = vm["plugin-path"].as<std::vector<std::string>>();
  o.list_plugins = vm.count("list-plugins") > 0;
  o.print_config = vm.count("print-config") > 0;
  o.print_param_groups = vm.count("print-param-groups") > 0;
  o.dry_run = vm.count("dry-run") > 0;
  o.estimate_memory = vm.count("estimate-memory") > 0;
  if (vm.count("mode")) o.mode = vm["mode"].as<std::string>();
  if (o.mode != "train" && o.mode != "val" && o.mode != "test")
    throw std::runtime_error("--mode: expected train, val or test, got '" + o.mode + "'");
  if (vm.count("log-level")) o.log_level = vm["log-level"].as<std::string>();
  o.version = vm.count("version") > 0;
  o.help = vm.count("help") > 0;
  // The launcher's flags, each into its field (launch/LaunchFlags.hpp), and
  // their one check (launch() runs it too).
  for (const launch::LauncherFlagSpec& spec : launch::launcher_flag_specs()) {
    if (vm.count(spec.name) == 0) continue;
    std::visit(
        [&](auto field) {
          auto& value = field(o.launch);
          using Value = typename FlagValue<std::remove_reference_t<decltype(value)>>::type;
          value = vm[spec.name].as<Value>();
        },
        spec.field);
  }
  try {
    launch::check_launcher_flags(o.launch);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  if (!o.help && !o.version && !o.list_plugins && o.config.empty())
    throw std::runtime_error("--config is required (or --list-plugins, --version, --help)");
  return o;
}

}  // namespace rh::cli
