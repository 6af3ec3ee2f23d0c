#include "cli/CliOptions.hpp"

#include <boost/program_options.hpp>
#include <sstream>
#include <stdexcept>

namespace po = boost::program_options;

namespace rh::cli {
namespace {

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
      ("log-level", po::value<std::string>()->value_name("LEVEL"), "trace, debug, info, warn or error")
      ("nproc-per-node", po::value<int>()->value_name("N"),
       "start N worker processes on this node, one per local rank (default 1)")
      ("nnodes", po::value<int>()->value_name("N"), "the number of nodes (default 1)")
      ("node-rank", po::value<int>()->value_name("R"), "this node's rank, 0 to nnodes-1 (default 0)")
      ("master-addr", po::value<std::string>()->value_name("ADDR"),
       "the address of rank 0's node (default: MASTER_ADDR, else the job's dist.master_addr, "
       "else 127.0.0.1)")
      ("master-port", po::value<int>()->value_name("PORT"),
       "the rendezvous port on the master (default: MASTER_PORT, else the job's "
       "dist.master_port, else a free one on one node and 29500 on several; 0 picks a free one, "
       "single node only)")
      ("max-restarts", po::value<int>()->value_name("N"),
       "elastic: after a failure (a node lost, a worker failed) restart the workers up to N "
       "times on the nodes left, resuming from the newest valid checkpoint (default 0)")
      ("min-nodes", po::value<int>()->value_name("M"),
       "elastic: go on while at least M nodes are left (default: --nnodes; needs --max-restarts)")
      ("version", "print the version, ABI and native tag")
      ("help,h", "show this help");
  // clang-format on
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
  if (vm.count("nproc-per-node")) o.nproc_per_node = vm["nproc-per-node"].as<int>();
  if (vm.count("nnodes")) o.nnodes = vm["nnodes"].as<int>();
  if (vm.count("node-rank")) o.node_rank = vm["node-rank"].as<int>();
  if (vm.count("master-addr")) o.master_addr = vm["master-addr"].as<std::string>();
  if (vm.count("master-port")) o.master_port = vm["master-port"].as<int>();
  if (vm.count("max-restarts")) o.max_restarts = vm["max-restarts"].as<int>();
  if (vm.count("min-nodes")) o.min_nodes = vm["min-nodes"].as<int>();
  if (o.max_restarts < 0)
    throw std::runtime_error("--max-restarts: expected 0 or more, got " +
                             std::to_string(o.max_restarts));
  if (o.min_nodes < 0 || o.min_nodes > o.nnodes)
    throw std::runtime_error("--min-nodes: expected 1 to --nnodes " + std::to_string(o.nnodes) +
                             ", got " + std::to_string(o.min_nodes));
  if (o.min_nodes > 0 && o.max_restarts == 0)
    throw std::runtime_error(
        "--min-nodes needs --max-restarts: without restarts a lost node "
        "ends the job whatever the minimum");
  if (o.nproc_per_node < 1)
    throw std::runtime_error("--nproc-per-node: expected 1 or more, got " +
                             std::to_string(o.nproc_per_node));
  if (o.nnodes < 1)
    throw std::runtime_error("--nnodes: expected 1 or more, got " + std::to_string(o.nnodes));
  if (o.node_rank < 0 || o.node_rank >= o.nnodes)
    throw std::runtime_error("--node-rank: expected 0 to " + std::to_string(o.nnodes - 1) +
                             " (--nnodes " + std::to_string(o.nnodes) + "), got " +
                             std::to_string(o.node_rank));
  if (o.master_port && (*o.master_port < 0 || *o.master_port > 65535))
    throw std::runtime_error("--master-port: expected 0 to 65535, got " +
                             std::to_string(*o.master_port));
  if (o.master_port == 0 && o.nnodes > 1)
    throw std::runtime_error(
        "--master-port 0 (pick a free port) needs --nnodes 1: every node must be given the same "
        "port");
  if (o.master_addr && o.master_addr->empty()) throw std::runtime_error("--master-addr: empty");
  if (!o.help && !o.version && !o.list_plugins && o.config.empty())
    throw std::runtime_error("--config is required (or --list-plugins, --version, --help)");
  return o;
}

}  // namespace rh::cli
