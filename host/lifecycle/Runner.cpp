// The lifecycle (DESIGN.md §3), owned by the host, the same for every
// strategy. Read Runner::State::train() top to bottom: it is the order.
//
// Shapes: B = batch, C = classes, T = tokens, V = vocabulary.
#include "lifecycle/Runner.hpp"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "checkpoint/CheckpointStore.hpp"
#include "checkpoint/TensorDict.hpp"
#include "comm/Communicator.hpp"
#include "comm/RankDevice.hpp"
#include "config/ConfigNode.hpp"
#include "data/DataLoader.hpp"
#include "launch/Launcher.hpp"
#include "launch/StopSignal.hpp"
#include "launch/WorkerEnv.hpp"
#include "lifecycle/Evaluator.hpp"
#include "lifecycle/HookDispatcher.hpp"
#include "lifecycle/ModelAccess.hpp"
#include "model/Model.hpp"
#include "optim/OptimWrapper.hpp"
#include "optim/ParamScheduler.hpp"
#include "plugins/HostApi.hpp"
#include "plugins/HostError.hpp"
#include "plugins/PluginCall.hpp"
#include "plugins/StateDict.hpp"
#include "rh/cpp/torch.hpp"
#include "torch/TorchServices.hpp"

namespace fs = std::filesystem;

namespace rh::lifecycle {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

const config::Node* find(const config::Node& node, const std::string& path) {
  const config::Node* n = &node;
  std::stringstream parts(path);
  std::string key;
  while (n != nullptr && std::getline(parts, key, '.')) n = n->find(key);
  return n;
}
template <class T>
T get(const config::Node& job, const std::string& path, T fallback) {
  const config::Node* n = find(job, path);
  if (n == nullptr || n->is_null()) return fallback;
  if constexpr (std::is_same_v<T, bool>)
    return n->as_bool();
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(n->as_int());
  else if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(n->as_double());
  else
    return n->as_string();
}

// train_cfg, with MMEngine's defaults.
struct TrainConfig {
  bool by_epoch = true;
  int64_t max_epochs = 0;
  int64_t max_iters = 0;
  int64_t val_interval = 1;
  int64_t val_begin = 1;
};

TrainConfig read_train_cfg(const config::Node& job) {
  TrainConfig t;
  const config::Node* cfg = job.find("train_cfg");
  if (cfg == nullptr)
    throw config::ConfigError(job.location(), "",
                              "train mode needs train_cfg (max_epochs or max_iters)");
  t.max_epochs = get<int64_t>(job, "train_cfg.max_epochs", 0);
  t.max_iters = get<int64_t>(job, "train_cfg.max_iters", 0);
  t.by_epoch = get<bool>(job, "train_cfg.by_epoch", t.max_epochs > 0);
  t.val_interval = get<int64_t>(job, "train_cfg.val_interval", t.by_epoch ? 1 : 1000);
  t.val_begin = get<int64_t>(job, "train_cfg.val_begin", 1);
  if (t.by_epoch && t.max_epochs <= 0)
    throw config::ConfigError(cfg->location(), cfg->path(), "by_epoch training needs max_epochs");
  if (!t.by_epoch && t.max_iters <= 0)
    throw config::ConfigError(cfg->location(), cfg->path(),
                              "iteration-based training needs max_iters");
  return t;
}

// Peak resident memory of the process (getrusage: one syscall, cheap enough
// for every iteration, unlike reading /proc).
double peak_memory_mb() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

// Normalisation-layer parameters (paramwise norm_decay_mult): in the
// built-in models a dotted segment of their name starts with "norm".
bool is_norm_param(const std::string& name) {
  for (size_t pos = 0; pos < name.size();) {
    if (name.compare(pos, 4, "norm") == 0) return name.find('.', pos) != std::string::npos;
    size_t dot = name.find('.', pos);
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return false;
}

// Checks a strategy's call and names it in the error.
void check(const host::StrategyInstance& s, const char* step, rh_Error* err) {
  host::throw_if_error(err, s.what() + " " + step);
}

}  // namespace

struct Runner::State {
  State(const config::Node& job_, RunnerOptions opt_, host::HostServices& services_,
        JobComponents c_)
      : job(job_),
        opt(std::move(opt_)),
        services(services_),
        c(std::move(c_)),
        hooks(services_, std::move(c.hooks)),
        store(opt.work_dir, *c.checkpoint_io) {}

  const config::Node& job;
  RunnerOptions opt;
  host::HostServices& services;
  JobComponents c;
  HookDispatcher hooks;
  checkpoint::CheckpointStore store;

  uint64_t seed = 0;
  at::Device device = at::kCPU;
  // Distributed: the world communicator (absent in a single-process run of
  // a strategy that needs none).
  std::unique_ptr<comm::Communicator> world;
  at::Device comm_device = at::kCPU;  // where the world communicator takes tensors
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  DLDevice rank_device{kDLCPU, 0};  // comm::rank_cuda_device's choice, or the CPU
  std::unique_ptr<model::Model> model;
  std::unique_ptr<ModelAccess> model_access;
  std::unique_ptr<data::DataLoader> train_loader, val_loader, test_loader;
  std::unique_ptr<optim::OptimWrapper> optim;
  std::unique_ptr<optim::ParamSchedulers> schedulers;
  TrainConfig train_cfg;

  // Progress: what has been done, which is what a checkpoint records.
  int64_t iters_done = 0;   // train iterations
  int64_t epochs_done = 0;  // finished (data) epochs
  int64_t inner_done = 0;   // batches done in the current epoch

  // Gradient accumulation: true between the first and the last batch of a
  // window, when gradients are accumulated but not applied. A checkpoint
  // cannot hold them (under ddp each rank has its own), so a save asked for
  // then is deferred to the window's end (with removals after it, in order).
  bool mid_window = false;
  struct DeferredCheckpointOp {
    bool save;  // else remove
    std::string name;
  };
  std::vector<DeferredCheckpointOp> deferred;
  int64_t last_saved_iter = -1;
  // A stop signal (SIGTERM/SIGUSR1) seen by any rank, agreed through the
  // per-iteration loss average, so that every rank stops at the same boundary.
  int stop_signal = 0;

  ~State() {
    // Teardown order: the strategy (its Destroy may still use the
    // communicator), then the communicator API with its groups, then the
    // world communicator itself.
    c.strategy.reset();
    hooks.destroy_hooks();
    if (world) {
      comm::install_comm_api(services, nullptr);
      world.reset();
    }
  }

  // ---- The lifecycle --------------------------------------------------------

  void train() {
    train_cfg = read_train_cfg(job);
    // 2. Environment: the strategy picks the device; seeds.
    setup_env();
    // 3. Model, initialised from the seed (the same weights on every rank).
    build_model();
    train_loader = make_loader("train", true);
    if (job.find("data") && job.find("data")->find("val")) val_loader = make_loader("val", false);
    // 4-6. Weights (load_from / resume), before or after the strategy wraps.
    std::optional<fs::path> resume_dir = find_resume_checkpoint();
    const rh_StrategyTraits traits = c.strategy->traits();
    if (traits.load_phase == RH_LOAD_BEFORE_WRAP) load_weights(resume_dir);
    wrap_model();
    if (traits.load_phase == RH_LOAD_AFTER_WRAP) load_weights(resume_dir);
    // 7. Optimizer over the strategy's parameters.
    build_optimizer();
    // 8. auto_scale_lr: always before the schedulers take their base lrs.
    auto_scale_lr();
    // 9. Parameter schedulers.
    const auto batches = static_cast<int64_t>(train_loader->batches_per_epoch());
    schedulers = std::make_unique<optim::ParamSchedulers>(
        job.find("param_scheduler"), *optim, batches,
        optim::TrainLength{
            train_cfg.by_epoch ? train_cfg.max_epochs : 0,
            train_cfg.by_epoch ? train_cfg.max_epochs * batches : train_cfg.max_iters});
    schedulers->apply(0, 0);
    // 10. Resume the rest: optimizer, schedulers, counters, RNG, data position.
    if (resume_dir) resume_from(*resume_dir);
    // 11-13. Hooks around the loops.
    enable_checkpoints();
    set_state(RH_MODE_TRAIN, epochs_done, iters_done, inner_done);
    hooks.fire(RH_EVENT_BEFORE_RUN);
    train_loop();
    hooks.fire(RH_EVENT_AFTER_RUN);
    services.set_checkpoint_handlers(nullptr, nullptr);
    teardown();
  }

  // val / test without train: no optimizer; weights from load_from or resume.
  void evaluate_only(RunMode mode) {
    const char* split = mode == RunMode::Val ? "val" : "test";
    if (!job.find("data") || !job.find("data")->find(split))
      throw config::ConfigError(job.location(), "data",
                                std::string("--mode ") + split + " needs data." + split);
    setup_env();
    build_model();
    auto& loader = mode == RunMode::Val ? val_loader : test_loader;
    loader = make_loader(split, false);
    std::optional<fs::path> resume_dir = find_resume_checkpoint();
    if (!resume_dir && !job.find("load_from"))
      spdlog::warn(
          "--mode {}: no load_from and no checkpoint to resume; evaluating the initial weights",
          split);
    const rh_StrategyTraits traits = c.strategy->traits();
    if (traits.load_phase == RH_LOAD_BEFORE_WRAP) load_weights(resume_dir);
    wrap_model();
    if (traits.load_phase == RH_LOAD_AFTER_WRAP) load_weights(resume_dir);
    set_state(mode == RunMode::Val ? RH_MODE_VAL : RH_MODE_TEST, 0, 0, 0);
    hooks.fire(RH_EVENT_BEFORE_RUN);
    eval_loop(mode, *loader);
    hooks.fire(RH_EVENT_AFTER_RUN);
    teardown();
  }

  // ---- Loops ----------------------------------------------------------------

  bool train_done() const {
    return train_cfg.by_epoch ? epochs_done >= train_cfg.max_epochs
                              : iters_done >= train_cfg.max_iters;
  }

  void train_loop() {
    hooks.fire(RH_EVENT_BEFORE_TRAIN);
    const auto loop_start = Clock::now();
    const int64_t first_iter = iters_done;
    const int64_t batches = static_cast<int64_t>(train_loader->batches_per_epoch());
    launch::StopSignalScope accept_stop_signals;  // SIGTERM/SIGUSR1: stop at a boundary
    while (!train_done()) {
      if (train_cfg.by_epoch) hooks.fire(RH_EVENT_BEFORE_TRAIN_EPOCH);
      train_loader->start_epoch(epochs_done, static_cast<size_t>(inner_done));
      while (!train_done()) {
        auto t0 = Clock::now();
        std::optional<data::Batch> batch = train_loader->next();
        if (!batch) break;
        const double data_time = seconds_since(t0);
        set_state(RH_MODE_TRAIN, epochs_done, iters_done, inner_done);
        hooks.fire(RH_EVENT_BEFORE_TRAIN_ITER);
        const double lr = optim->lrs().at(0);  // the lr this iteration uses
        Metrics metrics = train_step(*batch, batches);
        ++iters_done;
        ++inner_done;
        if (!mid_window) run_deferred_checkpoint_ops();
        schedulers->apply(iters_done, epochs_done);  // the next iteration's lr
        metrics.insert(metrics.begin() + 1, {"lr", lr});
        metrics.push_back({"time", seconds_since(t0)});
        metrics.push_back({"data_time", data_time});
        metrics.push_back({"memory_mb", peak_memory_mb()});
        for (auto& m : services.take_metrics()) metrics.push_back(std::move(m));
        set_state(RH_MODE_TRAIN, epochs_done, iters_done - 1,
                  inner_done - 1);  // the iteration that ran
        hooks.fire(RH_EVENT_AFTER_TRAIN_ITER, metrics);
        if (!train_cfg.by_epoch && val_due(iters_done, train_cfg.max_iters)) run_val();
        if (stop_signal != 0 && !mid_window) stop_for_signal();
      }
      if (inner_done < batches) continue;  // stopped by max_iters mid-epoch: the loop ends
      ++epochs_done;
      inner_done = 0;
      schedulers->apply(iters_done, epochs_done);
      if (train_cfg.by_epoch) {
        set_state(RH_MODE_TRAIN, epochs_done - 1, iters_done, batches);  // the epoch that ended
        hooks.fire(RH_EVENT_AFTER_TRAIN_EPOCH);
        if (val_due(epochs_done, train_cfg.max_epochs)) run_val();
      }
      set_state(RH_MODE_TRAIN, epochs_done, iters_done, inner_done);
    }
    const double loop_s = seconds_since(loop_start);
    const int64_t ran = iters_done - first_iter;
    spdlog::info("train loop: {} iterations in {:.3f} s ({:.4f} ms/iteration, validation included)",
                 ran, loop_s, ran > 0 ? 1e3 * loop_s / static_cast<double>(ran) : 0.0);
    set_state(RH_MODE_TRAIN, epochs_done, iters_done, inner_done);
    hooks.fire(RH_EVENT_AFTER_TRAIN);
  }

  // MMEngine's rule: from val_begin on, every val_interval, and at the end.
  bool val_due(int64_t done, int64_t max) const {
    return val_loader && done >= train_cfg.val_begin &&
           (done % train_cfg.val_interval == 0 || done == max);
  }

  void run_val() { eval_loop(RunMode::Val, *val_loader); }

  // One optimisation step: batch -> forward -> loss -> backward (the
  // strategy's gradient hooks run inside) -> strategy sync -> optimizer step.
  Metrics train_step(const data::Batch& batch, int64_t batches_per_epoch) {
    // Gradient accumulation: a window of N batches, shorter when the epoch
    // or (iteration-based) max_iters ends first; the loss is divided by the
    // window's real length (MMEngine's rule).
    const int64_t n = optim->accumulative_counts();
    const int64_t window_start = inner_done - inner_done % n;  // within the epoch
    int64_t window = std::min<int64_t>(n, batches_per_epoch - window_start);
    if (!train_cfg.by_epoch)
      window = std::min<int64_t>(window, train_cfg.max_iters - (iters_done - inner_done % n));
    const bool step = inner_done + 1 == window_start + window;

    model->train(true);
    at::Tensor input = batch.input.to(device);    // (B, F) / (B, 3, H, W) / (B, T)
    at::Tensor target = batch.target.to(device);  // (B) / (B, T)
    at::Tensor logits = model->forward(input);    // (B, C) / (B, T, V)
    at::Tensor loss = Evaluator::loss(model->task(), logits, target);
    // The logged loss is the mean over ranks: its all-reduce runs while we
    // do backward and the step (read at the end, no round trip of its own;
    // every rank issues it here, before the strategy's collectives). It also
    // carries this rank's stop signal, so all ranks learn of one together.
    PendingAverage mean_loss = start_average(loss, launch::stop_signal());
    const auto& vt = c.strategy->vtable();
    if (vt.BeforeBackward)
      check(*c.strategy, "BeforeBackward", vt.BeforeBackward(c.strategy->handle(), step ? 1 : 0));
    (window == 1 ? loss : loss / static_cast<double>(window)).backward();
    if (vt.SyncGradients)
      check(*c.strategy, "SyncGradients", vt.SyncGradients(c.strategy->handle(), step ? 1 : 0));
    double grad_norm = -1;
    if (step) {
      grad_norm = optim->step();
      if (vt.AfterOptimizerStep)
        check(*c.strategy, "AfterOptimizerStep", vt.AfterOptimizerStep(c.strategy->handle()));
      optim->zero_grad();
    }
    mid_window = !step;
    const auto [mean, ranks_signalled] = mean_loss.get();
    if (stop_signal == 0 && ranks_signalled > 0) {
      // This rank's own signal, or SIGTERM's number when only others got one.
      stop_signal = launch::stop_signal() != 0 ? launch::stop_signal() : SIGTERM;
      spdlog::warn("stop signal received by {} rank(s): stopping at the next iteration boundary{}",
                   ranks_signalled, hooks.has_type("checkpoint") ? " after a checkpoint" : "");
    }
    Metrics metrics{{"loss", mean}};
    if (grad_norm >= 0) metrics.push_back({"grad_norm", grad_norm});
    return metrics;
  }

  // The val or test loop; its metrics go to after_{val,test}_epoch.
  Metrics eval_loop(RunMode mode, data::DataLoader& loader) {
    const bool val = mode == RunMode::Val;
    auto event = [val](rh_HookEvent v, rh_HookEvent t) { return val ? v : t; };
    const rh_RunMode run_mode = val ? RH_MODE_VAL : RH_MODE_TEST;
    set_state(run_mode, epochs_done, iters_done, 0);
    hooks.fire(event(RH_EVENT_BEFORE_VAL, RH_EVENT_BEFORE_TEST));
    hooks.fire(event(RH_EVENT_BEFORE_VAL_EPOCH, RH_EVENT_BEFORE_TEST_EPOCH));
    model->train(false);
    Evaluator evaluator(model->task(), loader.dataset().num_classes());
    loader.start_epoch(0);
    int64_t i = 0;
    while (std::optional<data::Batch> batch = loader.next()) {
      set_state(run_mode, epochs_done, iters_done, i);
      hooks.fire(event(RH_EVENT_BEFORE_VAL_ITER, RH_EVENT_BEFORE_TEST_ITER));
      {
        torch::NoGradGuard no_grad;
        // Every rank runs the same number of forwards (a sharding strategy
        // communicates in them); the sampler's padding is not counted.
        at::Tensor logits = model->forward(batch->input.to(device));
        const auto real = static_cast<int64_t>(batch->num_real);
        if (real > 0)
          evaluator.add(logits.narrow(0, 0, real), batch->target.to(device).narrow(0, 0, real));
      }
      hooks.fire(event(RH_EVENT_AFTER_VAL_ITER, RH_EVENT_AFTER_TEST_ITER));
      ++i;
    }
    if (world_size > 1) {  // exact global metrics: sum every rank's totals
      std::vector<double> totals = evaluator.totals();
      at::Tensor t = on_comm_device(torch::tensor(totals, torch::kDouble));
      world->all_reduce(buffer(t), comm::ReduceOp::Sum, false)->wait();
      t = t.cpu();
      evaluator.set_totals(
          std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel()));
    }
    Metrics metrics = evaluator.metrics();
    set_state(run_mode, epochs_done, iters_done, i);
    hooks.fire(event(RH_EVENT_AFTER_VAL_EPOCH, RH_EVENT_AFTER_TEST_EPOCH), metrics);
    hooks.fire(event(RH_EVENT_AFTER_VAL, RH_EVENT_AFTER_TEST));
    std::string line;
    for (const auto& [name, value] : metrics) line += " " + name + ": " + std::to_string(value);
    spdlog::debug("{}{}", val ? "val" : "test", line);
    return metrics;
  }

  // ---- Setup steps ----------------------------------------------------------

  void setup_env() {
    rh_Comm* world_handle = rendezvous();
    // Ranks sharing a node share its cores (OMP_NUM_THREADS wins when set).
    host::set_torch_threads(launch::default_intra_op_threads());
    seed = get<uint64_t>(job, "seed", 0);
    if (get<bool>(job, "diff_rank_seed", false)) seed += static_cast<uint64_t>(rank);
    if (get<bool>(job, "deterministic", false))
      at::globalContext().setDeterministicAlgorithms(true, false);
    torch::manual_seed(seed);
    rh_SetupEnvArgs args{RH_SETUP_ENV_ARGS_STRUCT_SIZE, world_handle, local_rank,       seed,
                         DLDevice{kDLCPU, 0},           rank_device,  local_world_size, node_rank};
    check(*c.strategy, "SetupEnv", c.strategy->vtable().SetupEnv(c.strategy->handle(), &args));
    services.set_device(args.device);
    device = args.device.device_type == kDLCUDA
                 ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(args.device.device_id))
                 : at::Device(at::kCPU);
    spdlog::info("strategy {} on {}, seed {}, rank {} of {}", c.strategy->type(), device.str(),
                 seed, rank, world_size);
  }

  // Joins the other ranks when the environment says there are some (the
  // built-in launcher, torchrun, srun, mpirun), or when the strategy needs a
  // communicator even alone. Returns the world handle for the strategy.
  rh_Comm* rendezvous() {
    const launch::DistEnv env = launch::dist_env_from_environment();
    local_rank = env.local_rank;
    local_world_size = env.local_world_size;
    node_rank = env.node_rank;
    // The one rule for this rank's GPU (comm/RankDevice.hpp), shared with the
    // nccl communicator and handed to the strategy.
    const int visible =
        torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
    try {
      const int cuda_index = comm::rank_cuda_device(env.rank, env.local_rank, visible);
      if (cuda_index >= 0) rank_device = DLDevice{kDLCUDA, cuda_index};
    } catch (const std::runtime_error& e) {
      throw host::HostError(RH_ERROR_FAILED_PRECONDITION, e.what());
    }
    const bool needs_comm = c.strategy->traits().needs_comm != 0;
    if (env.world_size <= 1 && !needs_comm) return nullptr;
    comm::RendezvousOptions o;
    if (env.source != "none") {
      o.rank = env.rank;
      o.world_size = env.world_size;
      o.local_rank = env.local_rank;
      o.master_addr = env.master_addr;
      o.master_port = env.master_port;
    } else {
      o.master_port = launch::pick_free_port(o.master_addr);  // one process: any free port
    }
    o.timeout_s = get<double>(job, "dist.timeout_s", 300.0);
    const std::string backend = get<std::string>(job, "dist.backend", "auto");
    o.backend = backend == "auto" ? (torch::cuda::is_available() ? "nccl" : "gloo") : backend;
    o.shared_memory = get<bool>(job, "dist.shared_memory", true);
    world = comm::create_world(o);
    comm_device = o.backend == "nccl" && rank_device.device_type == kDLCUDA
                      ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(rank_device.device_id))
                      : at::Device(at::kCPU);
    rank = world->rank();
    world_size = world->size();
    world->set_step_description([this] {
      rh_RunState s = services.run_state();
      const char* mode = s.mode == RH_MODE_TRAIN ? "train" : s.mode == RH_MODE_VAL ? "val" : "test";
      return "at " + std::string(mode) + " epoch " + std::to_string(s.epoch) + " iteration " +
             std::to_string(s.iter);
    });
    comm::install_comm_api(services, world.get());
    launch::configure_rank_logging(rank);  // only rank 0 logs at info unless RH_LOG_ALL_RANKS=1
    spdlog::info("rendezvous: rank {} of {} ({} backend, all_reduce through {})", rank, world_size,
                 o.backend, world->all_reduce_transport());
    return services.api()->Comm_World(services.new_context("runner-host", "runner"));
  }

  // Lifecycle step 3 for every strategy: all ranks must have built the same
  // parameters; then every rank starts from rank 0's weights.
  void sync_initial_weights() {
    if (world_size <= 1) return;
    std::vector<model::NamedTensor> tensors = model->named_parameters();
    for (auto& b : model->named_buffers()) tensors.push_back(b);
    std::string signature;
    for (const auto& t : tensors) {
      std::ostringstream line;
      line << t.name << " " << c10::toString(t.tensor.scalar_type()) << " " << t.tensor.sizes()
           << "\n";
      signature += line.str();
    }
    // Gather every rank's signature: lengths first, then the padded bytes.
    at::Tensor length =
        on_comm_device(torch::tensor({static_cast<int64_t>(signature.size())}, torch::kLong));
    at::Tensor lengths = on_comm_device(torch::empty({world_size}, torch::kLong));
    world->all_gather(buffer(length), buffer(lengths), false)->wait();
    lengths = lengths.cpu();
    const int64_t max_len = lengths.max().item<int64_t>();
    at::Tensor mine = torch::zeros({max_len}, torch::kUInt8);
    std::memcpy(mine.data_ptr(), signature.data(), signature.size());
    mine = on_comm_device(mine);
    at::Tensor all = on_comm_device(torch::empty({world_size * max_len}, torch::kUInt8));
    world->all_gather(buffer(mine), buffer(all), false)->wait();
    all = all.cpu();
    auto text_of = [&](int r) {
      const char* p = static_cast<const char*>(all.data_ptr()) + r * max_len;
      return std::string(p, static_cast<size_t>(lengths[r].item<int64_t>()));
    };
    const std::string reference = text_of(0);
    for (int r = 1; r < world_size; ++r) {
      const std::string other = text_of(r);
      if (other == reference) continue;
      std::istringstream a(reference), b(other);
      std::string la, lb;
      while (true) {
        const bool ha = static_cast<bool>(std::getline(a, la));
        const bool hb = static_cast<bool>(std::getline(b, lb));
        if (!ha || !hb || la != lb)
          throw host::HostError(
              RH_ERROR_FAILED_PRECONDITION,
              "rank " + std::to_string(r) +
                  " built a different model than rank 0; first difference: rank 0 has '" +
                  (ha ? la : std::string("(no more tensors)")) + "', rank " + std::to_string(r) +
                  " has '" + (hb ? lb : std::string("(no more tensors)")) + "'");
      }
    }
    torch::NoGradGuard no_grad;
    for (const auto& t : tensors) world->broadcast(buffer(t.tensor), 0, false)->wait();
  }

  // The runner's own small collectives (model signatures, logged metrics,
  // checkpoint status) run on the communicator's device: NCCL takes only
  // CUDA tensors, gloo only CPU ones.
  at::Tensor on_comm_device(const at::Tensor& t) const { return t.to(comm_device); }

  static comm::Buffer buffer(const at::Tensor& t) {
    const DLDevice dev =
        t.is_cuda() ? DLDevice{kDLCUDA, static_cast<int32_t>(t.get_device())} : DLDevice{kDLCPU, 0};
    return comm::Buffer{t.data_ptr(), static_cast<size_t>(t.numel()), at::getDLDataType(t), dev};
  }

  // Every rank's 1-D uint8 `bytes` (the same length on all ranks) as the rows
  // of a (world_size, n) CPU tensor, on every rank.
  at::Tensor gather_to_rows(const at::Tensor& bytes) {
    at::Tensor mine = bytes.contiguous().reshape({1, -1});
    if (world_size <= 1) return mine.clone();
    at::Tensor send = on_comm_device(mine);
    at::Tensor all = on_comm_device(at::empty({world_size, mine.size(1)}, mine.options()));
    world->all_gather(buffer(send), buffer(all), false)->wait();
    return all.cpu();
  }

  // Rank 0's string on every rank.
  std::string broadcast_string(const std::string& text) {
    if (world_size <= 1) return text;
    at::Tensor length =
        on_comm_device(torch::tensor({static_cast<int64_t>(text.size())}, torch::kLong));
    world->broadcast(buffer(length), 0, false)->wait();
    const int64_t n = length.cpu().item<int64_t>();
    if (n == 0) return "";
    at::Tensor bytes = torch::zeros({n}, torch::kUInt8);
    if (rank == 0) std::memcpy(bytes.data_ptr(), text.data(), text.size());
    bytes = on_comm_device(bytes);
    world->broadcast(buffer(bytes), 0, false)->wait();
    bytes = bytes.cpu();
    return std::string(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(n));
  }

  // Every rank's status string ("" = fine), gathered on every rank.
  std::vector<std::string> gather_failures(const std::string& mine) {
    if (world_size <= 1) return {mine};
    at::Tensor flags =
        gather_to_rows(torch::tensor({static_cast<uint8_t>(mine.empty() ? 0 : 1)}, torch::kUInt8));
    std::vector<std::string> out(static_cast<size_t>(world_size));
    for (int r = 0; r < world_size; ++r)
      if (flags[r][0].item<uint8_t>() != 0)
        out[static_cast<size_t>(r)] = r == rank ? mine : "failed";
    return out;
  }

  // The mean of a scalar over the ranks (logged metrics), started now and
  // read later so that it overlaps backward and the optimizer step instead of
  // adding a round trip to every iteration.
  class PendingAverage {
   public:
    PendingAverage(at::Tensor value, std::shared_ptr<comm::Work> work)
        : value_(std::move(value)), work_(std::move(work)) {}
    PendingAverage(PendingAverage&&) = default;
    // Left unread (the step threw): the collective still writes into value_.
    ~PendingAverage() {
      if (!work_) return;
      try {
        work_->wait();
      } catch (...) {  // the step's own error is the one to report
      }
    }
    // The mean loss, and how many ranks had a stop signal.
    std::pair<double, int> get() {
      if (work_) std::exchange(work_, nullptr)->wait();
      at::Tensor v = value_.cpu();
      return {v[0].item<double>(), static_cast<int>(std::lround(v[1].item<double>()))};
    }

   private:
    at::Tensor value_;
    std::shared_ptr<comm::Work> work_;  // null in one process, or once read
  };
  PendingAverage start_average(const at::Tensor& scalar, int signal) {
    // A copy (the collective writes it in place), read without a device sync
    // until get(); alone, it stays where it is (a move to the CPU here would
    // wait for the GPU before backward is even queued). Whether this rank
    // has a stop signal rides in a second element as world_size (or 0): its
    // average is the number of ranks that have one, exact in double.
    at::Tensor t = at::empty({2}, scalar.options().dtype(at::kDouble));
    t.narrow(0, 0, 1).copy_(scalar.detach().reshape({1}));
    t.narrow(0, 1, 1).fill_(signal != 0 ? static_cast<double>(world_size) : 0.0);
    if (world_size <= 1) return {t, nullptr};
    t = on_comm_device(t);
    auto work = world->all_reduce(buffer(t), comm::ReduceOp::Avg, true);
    return {std::move(t), std::move(work)};
  }

  void build_model() {
    // From the job's seed, not the rank's: every rank builds the same weights
    // (and then takes rank 0's anyway).
    model =
        model::build_model(*job.find("model"), get<uint64_t>(job, "seed", 0), opt.job_dir.string());
    model->to(device);
    sync_initial_weights();
  }

  void wrap_model() {
    model_access = std::make_unique<ModelAccess>(*model);
    const auto& vt = c.strategy->vtable();
    if (vt.Wrap == nullptr) return;
    rh_WrapArgs args{RH_WRAP_ARGS_STRUCT_SIZE, model_access->handle(), model_access->api()};
    check(*c.strategy, "Wrap", vt.Wrap(c.strategy->handle(), &args));
  }

  std::unique_ptr<data::DataLoader> make_loader(const std::string& split, bool train) {
    const config::Node* cfg = find(job, "data." + split);
    if (cfg == nullptr) throw config::ConfigError(job.location(), "data", "missing data." + split);
    auto dataset = data::build_dataset(*cfg->find("dataset"), opt.job_dir.string());
    // The job's seed, never the rank-offset one: every rank must shuffle the
    // same permutation, or ranks would share and miss samples.
    data::LoaderOptions o = data::loader_options(*cfg, get<uint64_t>(job, "seed", 0));
    if (!train) o.shuffle = false;
    return std::make_unique<data::DataLoader>(dataset, o, rank, world_size);
  }

  void build_optimizer() {
    std::vector<optim::OptimParam> params;
    for (auto& p : model->named_parameters()) {
      if (!p.tensor.requires_grad()) continue;
      params.push_back({p.name, p.tensor, is_norm_param(p.name)});
    }
    if (params.empty())
      throw host::HostError(RH_ERROR_FAILED_PRECONDITION,
                            "the model has no trainable parameter (every parameter has "
                            "requires_grad false): nothing to train; use --mode val or test");
    optim = std::make_unique<optim::OptimWrapper>(*job.find("optim_wrapper"), std::move(params));
  }

  void auto_scale_lr() {
    if (!get<bool>(job, "auto_scale_lr.enable", false)) return;
    const int64_t base = get<int64_t>(job, "auto_scale_lr.base_batch_size", 0);
    const config::Node* cfg = find(job, "auto_scale_lr");
    if (base <= 0)
      throw config::ConfigError(cfg->location(), cfg->path(), "enable: true needs base_batch_size");
    const int64_t world = world_size;
    const double batch = static_cast<double>(train_loader->options().batch_size);
    const double factor = world * batch / static_cast<double>(base);
    optim->scale_lr(factor);
    spdlog::info("auto_scale_lr: lr x {} ({} ranks x batch {} / base_batch_size {})", factor, world,
                 batch, base);
  }

  void teardown() {
    const auto& vt = c.strategy->vtable();
    if (vt.Teardown) check(*c.strategy, "Teardown", vt.Teardown(c.strategy->handle()));
  }

  // The run state hooks see (rh_RunState documents what each field means at
  // which event).
  void set_state(rh_RunMode mode, int64_t epoch, int64_t iter, int64_t inner) {
    rh_RunState s{};
    s.struct_size = RH_RUN_STATE_STRUCT_SIZE;
    s.mode = mode;
    s.epoch = epoch;
    s.iter = iter;
    s.inner_iter = inner;
    s.max_epochs = train_cfg.by_epoch ? train_cfg.max_epochs : 0;
    s.max_iters =
        train_cfg.by_epoch && train_loader
            ? train_cfg.max_epochs * static_cast<int64_t>(train_loader->batches_per_epoch())
            : train_cfg.max_iters;
    s.rank = rank;
    s.world_size = world_size;
    services.set_run_state(s);
  }

  // ---- Checkpoints ----------------------------------------------------------

  void enable_checkpoints() {
    services.set_checkpoint_handlers(
        [this](const std::string& name) {
          check_checkpoint_call(name);
          if (mid_window) {
            spdlog::info(
                "checkpoint {} asked for inside a gradient-accumulation window (after iteration "
                "{}): saved at the window's end, where no accumulated gradient is lost",
                name, iters_done);
            deferred.push_back({true, name});
            return;
          }
          save_checkpoint(name);
        },
        [this](const std::string& name) {
          if (mid_window && !deferred.empty()) {  // after the saves it follows
            deferred.push_back({false, name});
            return;
          }
          if (rank == 0) store.remove(name);
        });
  }

  // The checkpoint operations deferred to the end of an accumulation window,
  // in the order they were asked for. A deferred removal that fails only
  // warns: its checkpoint stays on disk, nothing is lost.
  void run_deferred_checkpoint_ops() {
    std::vector<DeferredCheckpointOp> ops = std::exchange(deferred, {});
    for (const auto& op : ops) {
      if (op.save) {
        save_checkpoint(op.name);
      } else if (rank == 0) {
        try {
          store.remove(op.name);
        } catch (const std::exception& e) {
          spdlog::warn("deferred removal of checkpoint {}: {}", op.name, e.what());
        }
      }
    }
  }

  // SIGTERM / SIGUSR1 agreed by the ranks, at an iteration boundary outside
  // any accumulation window: save (when the job checkpoints) and stop.
  [[noreturn]] void stop_for_signal() {
    std::string saved;
    if (hooks.has_type("checkpoint") && last_saved_iter != iters_done) {
      saved = "iter_" + std::to_string(iters_done);
      set_state(RH_MODE_TRAIN, epochs_done, iters_done - 1, inner_done - 1);
      save_checkpoint(saved);
    }
    throw StopRequested(stop_signal,
                        "stopped by signal " + std::to_string(stop_signal) + " after iteration " +
                            std::to_string(iters_done) +
                            (saved.empty() ? std::string(hooks.has_type("checkpoint")
                                                             ? " (its checkpoint was just saved)"
                                                             : " (the job has no checkpoint hook)")
                                           : " (checkpoint " + saved + " saved)") +
                            "; resume: auto continues from there");
  }

  void check_checkpoint_call(const std::string& name) const {
    const rh_HookEvent ev = hooks.current_event();
    if (ev != RH_EVENT_AFTER_TRAIN_ITER && ev != RH_EVENT_AFTER_TRAIN_EPOCH &&
        ev != RH_EVENT_AFTER_VAL_EPOCH)
      throw host::HostError(
          RH_ERROR_FAILED_PRECONDITION,
          std::string("Checkpoint_Save may be called from after_train_iter, after_train_epoch "
                      "or after_val_epoch, not from ") +
              event_name(ev));
    const std::string problem = checkpoint::CheckpointStore::name_problem(name);
    if (!problem.empty())
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            "invalid checkpoint name '" + name + "': " + problem);
  }

  // Every rank calls this (hooks fire on every rank); rank 0 writes.
  void save_checkpoint(const std::string& name) {
    const fs::path dir = store.work_dir() / name;
    rh_StateDict model_dict, optim_dict, state_dict;
    std::string tensors_json;
    const bool writer = rank == 0;  // only the writer builds CPU copies
    auto add_model = [&](const std::vector<model::NamedTensor>& list) {
      for (const auto& t : list) {
        checkpoint::put_tensor(model_dict, t.name, t.tensor);
        std::ostringstream shape;
        shape << t.tensor.sizes();
        tensors_json += (tensors_json.empty() ? "" : ", ") + std::string("\"") +
                        json_escape(t.name) + "\": {\"shape\": \"" + shape.str() +
                        "\", \"dtype\": \"" + std::string(c10::toString(t.tensor.scalar_type())) +
                        "\"}";
      }
    };
    if (writer) {
      add_model(model->named_parameters());
      add_model(model->named_buffers());
      for (const auto& t : optim->state_tensors())
        checkpoint::put_tensor(optim_dict, t.name, t.tensor);
    }
    checkpoint::put_text(state_dict, "loop",
                         "{\"epochs_done\": " + std::to_string(epochs_done) +
                             ", \"iters_done\": " + std::to_string(iters_done) +
                             ", \"inner_done\": " + std::to_string(inner_done) +
                             ", \"world_size\": " + std::to_string(world_size) + "}");
    // Every rank's generators (they differ with diff_rank_seed, and dropout
    // draws from them): rows of (world_size, state bytes).
    at::Tensor cpu_rng = gather_to_rows(at::detail::getDefaultCPUGenerator().get_state());
    if (writer) checkpoint::put_tensor(state_dict, "rng.cpu", cpu_rng);
    if (device.is_cuda()) {
      at::Tensor cuda_rng =
          gather_to_rows(at::globalContext().defaultGenerator(device).get_state());
      if (writer) checkpoint::put_tensor(state_dict, "rng.cuda", cuda_rng);
    }
    const auto& vt = c.strategy->vtable();
    if (vt.StateExport) {
      rh_StateDict own;
      check(*c.strategy, "StateExport", vt.StateExport(c.strategy->handle(), &own));
      for (auto& [key, e] : own.entries) state_dict.entries["strategy." + key] = std::move(e);
    }
    hooks.before_save(state_dict, dir.string());
    const std::string meta =
        "{\n  \"format_version\": 1,\n  \"runner\": \"runner-host " + opt.runner_version +
        "\",\n  \"name\": \"" + json_escape(name) +
        "\",\n  \"epoch\": " + std::to_string(epochs_done) +
        ",\n  \"iter\": " + std::to_string(iters_done) +
        ",\n  \"world_size\": " + std::to_string(world_size) + ",\n  \"strategy\": \"" +
        json_escape(c.strategy->type()) + "\",\n  \"checkpoint_io\": \"" +
        json_escape(c.checkpoint_io->type()) +
        "\",\n  \"files\": [\"model\", \"optimizer\", \"state\"],\n  \"tensors\": {" +
        tensors_json + "},\n  \"config\": \"" + json_escape(opt.config_yaml) + "\"\n}\n";
    // Rank 0 writes (every rank holds the same state under ddp); all ranks
    // learn whether it worked, so none goes on past a failed save.
    rh_ErrorCode code = RH_ERROR_OK;
    std::string failure;
    if (rank == 0) {
      try {
        store.save(name,
                   {{"model", &model_dict}, {"optimizer", &optim_dict}, {"state", &state_dict}},
                   meta);
      } catch (const host::HostError& e) {
        code = e.code();
        failure = e.what();
      } catch (const std::exception& e) {
        code = RH_ERROR_IO;
        failure = e.what();
      }
    }
    if (world_size > 1) {
      at::Tensor status = on_comm_device(torch::tensor({static_cast<int64_t>(code)}, torch::kLong));
      world->broadcast(buffer(status), 0, false)->wait();
      code = static_cast<rh_ErrorCode>(status.cpu().item<int64_t>());
      if (rank != 0 && code != RH_ERROR_OK)
        failure = "rank 0 failed to save checkpoint '" + name + "' (its log says why)";
    }
    if (code != RH_ERROR_OK) throw host::HostError(code, failure);
    last_saved_iter = iters_done;
    spdlog::info("saved checkpoint {}", dir.string());
    hooks.after_save(dir.string());
  }

  // Every rank resumes from the checkpoint rank 0 chose: rank 0 verifies it
  // (checksums, once) and broadcasts its path and the digest of its
  // meta.json; each other rank checks that it sees exactly that checkpoint
  // (a node-local work_dir or a stale network file system would show it
  // another one, or none). Any rank that cannot stops the job, named.
  std::optional<fs::path> find_resume_checkpoint() {
    std::optional<fs::path> dir;
    std::string message;  // rank 0 -> all: "" (none), "ok\n<digest>\n<path>", "error"
    std::exception_ptr rank0_error;
    if (rank == 0) {
      try {
        dir = choose_resume_checkpoint();
        if (dir) message = "ok\n" + store.meta_digest(*dir) + "\n" + dir->string();
      } catch (...) {
        rank0_error = std::current_exception();
        message = "error";
      }
    }
    if (world_size <= 1) {
      if (rank0_error) std::rethrow_exception(rank0_error);
      return dir;
    }
    message = broadcast_string(message);
    if (rank0_error) std::rethrow_exception(rank0_error);
    if (message == "error")
      throw host::HostError(
          RH_ERROR_FAILED_PRECONDITION,
          "rank 0 could not choose a checkpoint to resume from (its log says why)");
    if (message.empty()) return std::nullopt;
    const size_t a = message.find('\n'), b = message.find('\n', a + 1);
    const std::string digest = message.substr(a + 1, b - a - 1);
    const fs::path chosen = message.substr(b + 1);
    std::string mine;
    if (rank != 0) {
      try {
        const std::string seen = store.meta_digest(chosen);
        if (seen != digest)
          mine = "rank " + std::to_string(rank) + " sees a different checkpoint at " +
                 chosen.string() + " than rank 0 (meta.json digest " + seen + ", rank 0 has " +
                 digest + ")";
      } catch (const std::exception& e) {
        mine = "rank " + std::to_string(rank) +
               " cannot read the checkpoint rank 0 resumes from, " + chosen.string() + ": " +
               e.what();
      }
    }
    std::vector<std::string> failures = gather_failures(mine);
    std::string failed_ranks;
    for (int r = 0; r < world_size; ++r)
      if (!failures[static_cast<size_t>(r)].empty())
        failed_ranks += (failed_ranks.empty() ? "" : ", ") + std::to_string(r);
    if (!failed_ranks.empty())
      throw host::HostError(
          RH_ERROR_FAILED_PRECONDITION,
          (mine.empty() ? "rank(s) " + failed_ranks + " cannot resume from " + chosen.string() +
                              " (their logs say why)"
                        : mine) +
              "; every rank must see rank 0's work_dir (a shared file system) to resume");
    return chosen;
  }

  // `resume:` true/'auto' -> the newest valid checkpoint of work_dir; a path
  // -> that checkpoint, which must be valid. Rank 0 only.
  std::optional<fs::path> choose_resume_checkpoint() {
    const config::Node* r = job.find("resume");
    if (r == nullptr || r->is_null()) return std::nullopt;
    const std::string value = r->as_string();
    if (value == "false" || value == "False") return std::nullopt;
    if (value == "true" || value == "True" || value == "auto") {
      std::vector<std::string> skipped;
      auto dir = store.find_resumable(&skipped);
      for (const auto& s : skipped) spdlog::warn("resume: skipping invalid checkpoint {}", s);
      if (!dir)
        spdlog::info("resume: no checkpoint in {}; starting from scratch",
                     store.work_dir().string());
      return dir;
    }
    fs::path dir = fs::path(value).is_relative() ? opt.job_dir / value : fs::path(value);
    std::string why = store.verify(dir);
    if (!why.empty())
      throw config::ConfigError(r->location(), r->path(),
                                "cannot resume from " + dir.string() + ": " + why);
    return dir;
  }

  // Model weights from the resume checkpoint (strict), else from load_from.
  void load_weights(const std::optional<fs::path>& resume_dir) {
    std::vector<model::NamedTensor> targets = model->named_parameters();
    for (auto& b : model->named_buffers()) targets.push_back(b);
    if (resume_dir) {
      rh_StateDict dict;
      store.load(*resume_dir, "model", dict);
      checkpoint::LoadReport report = checkpoint::load_into(dict, "", targets);
      if (!report.ok())
        throw host::HostError(
            RH_ERROR_FAILED_PRECONDITION,
            "checkpoint " + resume_dir->string() + " does not match the model:" + report.str());
      spdlog::info("resume: loaded model weights from {}", resume_dir->string());
      return;
    }
    const config::Node* lf = job.find("load_from");
    if (lf == nullptr || lf->is_null()) return;
    const config::Node* path_node = lf->is_map() ? lf->find("path") : lf;
    const bool strict = lf->is_map() && lf->find("strict") ? lf->find("strict")->as_bool() : true;
    fs::path path = path_node->as_string();
    if (path.is_relative()) path = opt.job_dir / path;
    // A checkpoint directory (its model file) or a single weights file.
    fs::path dir = path, stem = "model";
    if (!fs::is_directory(path)) {
      dir = path.parent_path();
      stem = path.stem();
    }
    if (!fs::exists(path))
      throw config::ConfigError(path_node->location(), path_node->path(),
                                "no such file or directory: " + path.string());
    rh_StateDict dict;
    store.load(dir, stem.string(), dict);
    checkpoint::LoadReport report = checkpoint::load_into(dict, "", targets);
    if (!report.ok()) {
      if (strict || !report.mismatched.empty())
        throw host::HostError(
            RH_ERROR_FAILED_PRECONDITION,
            "load_from " + path.string() + " does not match the model:" + report.str());
      spdlog::warn("load_from {} (strict: false):{}", path.string(), report.str());
    }
    spdlog::info("loaded weights from {}", path.string());
  }

  void resume_from(const fs::path& dir) {
    rh_StateDict optim_dict, state_dict;
    store.load(dir, "optimizer", optim_dict);
    store.load(dir, "state", state_dict);
    std::vector<model::NamedTensor> optim_state;
    for (const auto& [key, e] : optim_dict.entries)
      if (e.is_tensor) optim_state.push_back({key, checkpoint::get_tensor(optim_dict, key)});
    optim->load_state_tensors(optim_state);
    YAML::Node loop = YAML::Load(checkpoint::get_text(state_dict, "loop"));
    // The data position counts batches of this world's sampler split: with
    // another world size it would name other samples.
    // (Checkpoints written before the world size was recorded are not checked.)
    const int64_t saved_world =
        loop["world_size"] ? loop["world_size"].as<int64_t>() : int64_t{world_size};
    if (saved_world != world_size)
      throw host::HostError(
          RH_ERROR_FAILED_PRECONDITION,
          "cannot resume from " + dir.string() + ": it was written by a world of " +
              std::to_string(saved_world) + " rank(s), this run has " + std::to_string(world_size) +
              " (resuming needs the same world size; load_from: <checkpoint> starts from its "
              "weights instead)");
    epochs_done = loop["epochs_done"].as<int64_t>();
    iters_done = loop["iters_done"].as<int64_t>();
    inner_done = loop["inner_done"].as<int64_t>();
    schedulers->apply(iters_done, epochs_done);
    // This rank's row of the generators' states (a 1-D state: a checkpoint
    // of runner-host 0.1, which saved rank 0's for every rank).
    auto row = [&](const char* key) {
      at::Tensor t = checkpoint::get_tensor(state_dict, key);
      return (t.dim() == 2 ? t[rank] : t).contiguous().clone();
    };
    at::Generator rng = at::detail::getDefaultCPUGenerator();  // a handle to the global generator
    {
      std::lock_guard<std::mutex> lock(rng.mutex());
      rng.set_state(row("rng.cpu"));
    }
    if (device.is_cuda() && state_dict.entries.count("rng.cuda") != 0) {
      at::Generator cuda_rng = at::globalContext().defaultGenerator(device);
      std::lock_guard<std::mutex> lock(cuda_rng.mutex());
      cuda_rng.set_state(row("rng.cuda"));
    }
    set_state(RH_MODE_TRAIN, epochs_done, iters_done, inner_done);
    hooks.after_load(state_dict, dir.string());
    const auto& vt = c.strategy->vtable();
    if (vt.StateImport) {
      rh_StateDict own;
      for (const auto& [key, e] : state_dict.entries)
        if (key.rfind("strategy.", 0) == 0) own.entries[key.substr(9)] = e;
      check(*c.strategy, "StateImport", vt.StateImport(c.strategy->handle(), &own));
    }
    spdlog::info("resumed from {} at epoch {}, iteration {}", dir.string(), epochs_done,
                 iters_done);
  }
};

Runner::Runner(const config::Node& job, RunnerOptions options, host::HostServices& services,
               JobComponents components)
    : s_(std::make_unique<State>(job, std::move(options), services, std::move(components))) {}

Runner::~Runner() = default;

void Runner::run() {
  // The first thing a run writes: logs, traces and checkpoints go here.
  std::error_code ec;
  fs::create_directories(s_->opt.work_dir, ec);
  if (ec)
    throw host::HostError(
        RH_ERROR_IO, "cannot create work_dir " + s_->opt.work_dir.string() + ": " + ec.message());
  switch (s_->opt.mode) {
    case RunMode::Train:
      s_->train();
      break;
    case RunMode::Val:
      s_->evaluate_only(RunMode::Val);
      break;
    case RunMode::Test:
      s_->evaluate_only(RunMode::Test);
      break;
  }
}

}  // namespace rh::lifecycle
