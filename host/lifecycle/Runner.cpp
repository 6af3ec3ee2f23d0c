// The lifecycle (docs/architecture.md, "The lifecycle"), owned by the host,
// the same for every strategy. Read Runner::State::train() top to bottom: it
// is the order. The train step (TrainStep.cpp), the run's checkpoints
// (RunCheckpoints*.cpp) and the world of ranks (World.cpp) live beside it.
// Kept whole (~850 lines, over the ~700 the other files keep to): the
// lifecycle, the loops, the set-up steps they call and when to checkpoint are
// one story read in order, as llm.c's main() is; each piece that has a seam
// of its own (the step, checkpoints, the world, hooks) is already apart.
//
// Shapes: B = batch, C = classes, T = tokens, V = vocabulary.
#include "lifecycle/Runner.hpp"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <csignal>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "abi/HostApi.hpp"
#include "abi/HostError.hpp"
#include "checkpoint/CheckpointStore.hpp"
#include "config/ConfigNode.hpp"
#include "data/BatchPreprocessor.hpp"
#include "data/DataLoader.hpp"
#include "job/JobSettings.hpp"
#include "launch/StopSignal.hpp"
#include "launch/WorkerEnv.hpp"
#include "lifecycle/ElasticBatch.hpp"
#include "lifecycle/Evaluator.hpp"
#include "lifecycle/HookDispatcher.hpp"
#include "lifecycle/IterationMetrics.hpp"
#include "lifecycle/ModelAccess.hpp"
#include "lifecycle/OptimizerParams.hpp"
#include "lifecycle/RunCheckpoints.hpp"
#include "lifecycle/TensorParallelPlan.hpp"
#include "lifecycle/TrainStep.hpp"
#include "lifecycle/World.hpp"
#include "model/ClassifierLoss.hpp"
#include "model/Model.hpp"
#include "optim/GradScaler.hpp"
#include "optim/OptimSchema.hpp"
#include "optim/OptimWrapper.hpp"
#include "optim/ParamScheduler.hpp"
#include "rh/cpp/torch_bf16_speed.hpp"
#include "rh/cpp/torch_compat.hpp"
#include "torch_services/TorchServices.hpp"

namespace fs = std::filesystem;

namespace rh::lifecycle {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

struct Runner::State {
  State(const config::Node& job_, RunnerOptions opt_, host::HostServices& services_,
        JobComponents c_)
      : job(job_),
        opt(std::move(opt_)),
        services(services_),
        c(std::move(c_)),
        settings(config::read_settings(job_)),
        hooks(services_, std::move(c.hooks)),
        store(opt.work_dir, *c.checkpoint_io) {}

  const config::Node& job;
  RunnerOptions opt;
  host::HostServices& services;
  JobComponents c;
  config::JobSettings settings;  // the host's own keys, read once
  HookDispatcher hooks;
  checkpoint::CheckpointStore store;

  uint64_t seed = 0;
  at::Device device = at::kCPU;
  std::unique_ptr<World> world;  // the ranks and their communicator
  // The strategy's tensor-parallel plan (ABI 1.11); null without one.
  std::unique_ptr<TensorParallelPlan> tp;
  std::unique_ptr<RunCheckpoints> checkpoints;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<ModelAccess> model_access;
  std::unique_ptr<data::DataLoader> train_loader, val_loader, test_loader;
  // data_preprocessor and batch augments; model.head.loss (null: none given).
  std::shared_ptr<const data::BatchPreprocessor> preprocessor;
  std::shared_ptr<const model::ClassifierLoss> loss_fn;
  std::unique_ptr<optim::OptimWrapper> optim;
  std::unique_ptr<optim::ParamSchedulers> schedulers;
  // AmpOptimWrapper: the autocast dtype and the loss scaler (nullopt / null
  // with OptimWrapper).
  std::optional<MixedPrecision> amp;
  std::unique_ptr<optim::GradScaler> grad_scaler;
  std::unique_ptr<TrainStep> step;
  // With OptimizerParams: each optimizer tensor's gradient, in the strategy's
  // memory (bound as the tensor's grad before every step).
  std::vector<at::Tensor> strategy_grads;
  // train_cfg: its rules between keys were checked at step 0 (config::check_run).
  const config::TrainCfg& train_cfg = settings.train;
  RunProgress progress;  // what has been done: what a checkpoint records
  // Each train batch is cut into this many for forward and backward (an
  // elastic restart keeping the global batch by accumulation).
  int micro_batches = 1;

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
  // A stop signal (SIGTERM/SIGUSR1) seen by any rank, agreed through the
  // per-iteration loss mean, so that every rank stops at the same boundary.
  int stop_signal = 0;

  ~State() {
    // Teardown order: the strategy (its Destroy may still use the
    // communicator) and the hooks, then the world (the communicator API with
    // its groups, then the communicator itself).
    c.strategy.reset();
    hooks.destroy_hooks();
    checkpoints.reset();
    tp.reset();
    world.reset();
  }

  // ---- The lifecycle --------------------------------------------------------

  void train() {
    // 2. Environment: the world of ranks; the strategy picks the device; seeds.
    setup_env();
    // 3. Model, initialised from the seed (the same weights on every rank).
    build_model();
    train_loader = make_loader("train");
    if (job.find("data") && job.find("data")->find("val")) val_loader = make_loader("val");
    // 4-6. Weights (load_from / resume), before or after the strategy wraps.
    // What the resume costs: choosing and verifying the checkpoint (every
    // checksum), then weights, optimizer state and loop state.
    const auto load_t0 = Clock::now();
    std::optional<fs::path> resume_dir = checkpoints->find_resume();
    if (!checkpoints->loads_after_wrap()) checkpoints->load_weights(*model, resume_dir, true);
    wrap_model();
    if (checkpoints->loads_after_wrap()) checkpoints->load_weights(*model, resume_dir, true);
    // 7. Optimizer over the strategy's parameters (AmpOptimWrapper: and the
    // loss scaler, before resume restores it).
    build_optimizer();
    // Every rank's optimizer tensors against the others' (one collective):
    // what a checkpoint saves of them must be all of them.
    checkpoints->check_optimizer_params(*optim);
    build_mixed_precision();
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
    // 10. Resume the rest: optimizer, schedulers, counters, RNG, data
    // position; then the hooks' and the strategy's own state.
    // The data position is counted in samples of the epoch's global order.
    const auto global_batch =
        static_cast<int64_t>(train_loader->options().batch_size) * world->data_size();
    progress.global_batch = global_batch;
    if (resume_dir) {
      const DataPosition data{
          global_batch, batches, [this](int64_t samples) {
            return static_cast<int64_t>(train_loader->batches_from(static_cast<size_t>(samples)));
          }};
      progress = checkpoints->resume(*resume_dir, *optim, device, data);
      schedulers->apply(progress.iters_done, progress.epochs_done);
      set_state(RH_MODE_TRAIN, progress.epochs_done, progress.iters_done, progress.inner_done);
      checkpoints->finish_resume(*resume_dir);
      spdlog::info("resumed from {} at epoch {}, iteration {} (loaded in {:.3f} s)",
                   resume_dir->string(), progress.epochs_done, progress.iters_done,
                   seconds_since(load_t0));
    }
    // 11-13. Hooks around the loops.
    step = std::make_unique<TrainStep>(*model, *model_access, *optim, *c.strategy, *world, device,
                                       std::move(strategy_grads), amp, micro_batches);
    step->set_inputs(preprocessor, loss_fn);
    step->set_tensor_parallel(tp.get());
    enable_checkpoints();
    set_state(RH_MODE_TRAIN, progress.epochs_done, progress.iters_done, progress.inner_done);
    hooks.fire(RH_EVENT_BEFORE_RUN);
    train_loop();
    hooks.fire(RH_EVENT_AFTER_RUN);
    services.set_checkpoint_handlers(nullptr, nullptr);
    teardown();
  }

  // val / test without train: no optimizer; weights from load_from or resume.
  void evaluate_only(RunMode mode) {
    const char* split = mode == RunMode::Val ? "val" : "test";  // data.<split>: config::check_run
    setup_env();
    build_model();
    auto& loader = mode == RunMode::Val ? val_loader : test_loader;
    loader = make_loader(split);
    std::optional<fs::path> resume_dir = checkpoints->find_resume();
    if (!resume_dir && !job.find("load_from"))
      spdlog::warn(
          "--mode {}: no load_from and no checkpoint to resume; evaluating the initial weights",
          split);
    if (!checkpoints->loads_after_wrap()) checkpoints->load_weights(*model, resume_dir, false);
    wrap_model();
    if (checkpoints->loads_after_wrap()) checkpoints->load_weights(*model, resume_dir, false);
    set_state(mode == RunMode::Val ? RH_MODE_VAL : RH_MODE_TEST, 0, 0, 0);
    hooks.fire(RH_EVENT_BEFORE_RUN);
    eval_loop(mode, *loader);
    hooks.fire(RH_EVENT_AFTER_RUN);
    teardown();
  }

  // ---- Loops ----------------------------------------------------------------

  bool train_done() const {
    return train_cfg.by_epoch ? progress.epochs_done >= train_cfg.max_epochs
                              : progress.iters_done >= train_cfg.max_iters;
  }

  void train_loop() {
    const auto hooks_before = hooks.seconds_in_hooks();
    hooks.fire(RH_EVENT_BEFORE_TRAIN);
    const auto loop_start = Clock::now();
    RunProgress& p = progress;
    const int64_t first_iter = p.iters_done;
    const int64_t batches = static_cast<int64_t>(train_loader->batches_per_epoch());
    launch::StopSignalScope accept_stop_signals;  // SIGTERM/SIGUSR1: stop at a boundary
    IterationMetrics iteration_metrics;           // throughput, current RSS, CUDA memory
    const bool counts_skips = amp.has_value() || c.strategy->has_should_step();
    while (!train_done()) {
      if (train_cfg.by_epoch) hooks.fire(RH_EVENT_BEFORE_TRAIN_EPOCH);
      if (p.sample_shift != 0)  // resumed at a sample this global batch does not divide
        train_loader->start_epoch_at_sample(p.epochs_done, static_cast<size_t>(p.inner_done),
                                            static_cast<size_t>(p.samples_in_epoch()));
      else
        train_loader->start_epoch(p.epochs_done, static_cast<size_t>(p.inner_done));
      // Where this process began the epoch: a resume may land inside an
      // accumulation window, which then counts only the batches run here.
      const int64_t first_inner = p.inner_done;
      while (!train_done()) {
        auto t0 = Clock::now();
        std::optional<data::Batch> batch;
        {
          RECORD_USER_SCOPE("rh::data");  // a named range in a profiler trace
          batch = train_loader->next();
        }
        if (!batch) break;
        const double data_time = seconds_since(t0);
        set_state(RH_MODE_TRAIN, p.epochs_done, p.iters_done, p.inner_done);
        hooks.fire(RH_EVENT_BEFORE_TRAIN_ITER);
        const double lr = optim->lrs().at(0);  // the lr this iteration uses
        const AccumulationWindow window =
            accumulation_window(optim->accumulative_counts(), p.inner_done, batches, p.iters_done,
                                train_cfg.by_epoch ? 0 : train_cfg.max_iters, first_inner);
        const StepResult r = step->run(
            *batch, window, RankFlags{launch::stop_signal() != 0, checkpoints->save_finished()},
            p.iters_done + 1);
        mid_window = !window.last_batch;
        note_stop_signal(r.ranks_signalled);
        // A background save that every rank has finished ends here, on every
        // rank at once (after_save_checkpoint, or its error).
        checkpoints->poll_background_save(r.ranks_save_finished);
        ++p.iters_done;
        ++p.inner_done;
        if (!mid_window) run_deferred_checkpoint_ops();
        schedulers->apply(p.iters_done, p.epochs_done);  // the next iteration's lr
        Metrics metrics;
        metrics.reserve(20);
        metrics.push_back({"loss", r.loss});
        metrics.push_back({"lr", lr});
        if (r.grad_norm >= 0) metrics.push_back({"grad_norm", r.grad_norm});
        if (r.skipped) {
          ++p.skipped_steps;
          // Every rank skipped (ShouldStep answers alike; AmpOptimWrapper's
          // ranks agreed); rank 0 says so.
          if (world->rank() == 0)
            spdlog::warn(
                "iteration {}: optimizer step skipped by {} (an inf or nan gradient at loss "
                "scale {}{}); {} step(s) skipped so far",
                p.iters_done, r.skipped_by_amp ? "AmpOptimWrapper" : c.strategy->what(),
                r.loss_scale,
                grad_scaler ? fmt::format(", now {}", grad_scaler->scale()) : std::string(),
                p.skipped_steps);
        }
        if (grad_scaler) metrics.push_back({"loss_scale", grad_scaler->scale()});
        if (counts_skips)
          metrics.push_back({"skipped_steps", static_cast<double>(p.skipped_steps)});
        const double iter_s = seconds_since(t0);
        metrics.push_back({"time", iter_s});
        metrics.push_back({"data_time", data_time});
        metrics.push_back({"data/queue_depth", static_cast<double>(train_loader->queue_depth())});
        metrics.push_back({"memory_mb", iteration_metrics.peak_rss_mb()});
        // What the tensors held, split (TrainStep.hpp, MemorySplit): only the
        // parts this host could tell.
        const std::pair<const char*, int64_t> split[] = {
            {"memory/params_mb", r.memory.params},
            {"memory/grads_mb", r.memory.grads},
            {"memory/optimizer_mb", r.memory.optimizer},
            {"memory/activations_mb", r.memory.activations},
            {"memory/tensors_peak_mb", r.memory.peak}};
        for (const auto& [name, bytes] : split)
          if (bytes >= 0) metrics.push_back({name, static_cast<double>(bytes) / (1024.0 * 1024.0)});
        // Language models count tokens (B x T), the others samples (B); the
        // job's, over the data-parallel replicas (a tensor-parallel group's
        // ranks compute on one batch).
        const bool lm = model->task() == model::Task::LanguageModel;
        iteration_metrics.add(metrics, lm ? batch->input.numel() : batch->input.size(0), lm, iter_s,
                              world->data_size(), device);
        for (auto& m : services.take_metrics()) metrics.push_back(std::move(m));
        if (p.iters_done == first_iter + 1) note_recovery(metrics);
        set_state(RH_MODE_TRAIN, p.epochs_done, p.iters_done - 1,
                  p.inner_done - 1);  // the iteration that ran
        hooks.fire(RH_EVENT_AFTER_TRAIN_ITER, metrics);
        if (!train_cfg.by_epoch && val_due(p.iters_done, train_cfg.max_iters)) run_val();
        if (stop_signal != 0 && !mid_window) stop_for_signal();
      }
      if (p.inner_done < batches) continue;  // stopped by max_iters mid-epoch: the loop ends
      ++p.epochs_done;
      p.inner_done = 0;
      p.sample_shift = 0;
      schedulers->apply(p.iters_done, p.epochs_done);
      if (train_cfg.by_epoch) {
        set_state(RH_MODE_TRAIN, p.epochs_done - 1, p.iters_done, batches);  // the epoch that ended
        hooks.fire(RH_EVENT_AFTER_TRAIN_EPOCH);
        if (val_due(p.epochs_done, train_cfg.max_epochs)) run_val();
      }
      set_state(RH_MODE_TRAIN, p.epochs_done, p.iters_done, p.inner_done);
    }
    checkpoints->finish_background_save();  // the run's last save, published
    const double loop_s = seconds_since(loop_start);
    const int64_t ran = p.iters_done - first_iter;
    spdlog::info("train loop: {} iterations in {:.3f} s ({:.4f} ms/iteration, validation included)",
                 ran, loop_s, ran > 0 ? 1e3 * loop_s / static_cast<double>(ran) : 0.0);
    log_hook_times(hooks_before, ran);
    set_state(RH_MODE_TRAIN, p.epochs_done, p.iters_done, p.inner_done);
    hooks.fire(RH_EVENT_AFTER_TRAIN);
  }

  // After an elastic restart (runner-host --max-restarts): the time from
  // the launcher learning of the failure to this first step on the new
  // world, in the log and as the step's `time_to_recover_s` metric.
  void note_recovery(Metrics& metrics) {
    const launch::DistEnv& env = world->env();
    if (env.elastic_detected_at <= 0) return;
    const double recovered = launch::seconds_since_epoch() - env.elastic_detected_at;
    metrics.push_back({"time_to_recover_s", recovered});
    if (world->rank() == 0)
      spdlog::info(
          "elastic restart {}: recovered in {:.2f} s (the launcher learned of the failure; this "
          "is the first step on {} rank(s), the first start had {}), at iteration {}",
          env.job_restart, recovered, world->size(), env.elastic_base_world_size,
          progress.iters_done);
  }

  // The time the hooks took during the train loop, per iteration and per
  // hook (`before`: seconds_in_hooks() when the loop began): on small
  // models a hook's few microseconds an iteration show.
  void log_hook_times(const std::vector<std::pair<std::string, double>>& before,
                      int64_t iterations) const {
    const auto after = hooks.seconds_in_hooks();
    if (after.empty() || after.size() != before.size() || iterations <= 0) return;
    double total = 0;
    std::string each;
    for (size_t i = 0; i < after.size(); ++i) {
      const double us =
          1e6 * (after[i].second - before[i].second) / static_cast<double>(iterations);
      total += us;
      each += fmt::format("{}{} {:.2f}", each.empty() ? "" : ", ", after[i].first, us);
    }
    spdlog::info("hooks: {:.2f} us/iteration during the train loop ({})", total, each);
  }

  // MMEngine's rule: from val_begin on, every val_interval, and at the end.
  bool val_due(int64_t done, int64_t max) const {
    return val_loader && done >= train_cfg.val_begin &&
           (done % train_cfg.val_interval == 0 || done == max);
  }

  void run_val() { eval_loop(RunMode::Val, *val_loader); }

  // The val or test loop; its metrics go to after_{val,test}_epoch.
  Metrics eval_loop(RunMode mode, data::DataLoader& loader) {
    const bool val = mode == RunMode::Val;
    auto event = [val](rh_HookEvent v, rh_HookEvent t) { return val ? v : t; };
    const rh_RunMode run_mode = val ? RH_MODE_VAL : RH_MODE_TEST;
    set_state(run_mode, progress.epochs_done, progress.iters_done, 0);
    hooks.fire(event(RH_EVENT_BEFORE_VAL, RH_EVENT_BEFORE_TEST));
    hooks.fire(event(RH_EVENT_BEFORE_VAL_EPOCH, RH_EVENT_BEFORE_TEST_EPOCH));
    model->train(false);
    Evaluator evaluator(model->task(), loader.dataset().num_classes());
    const std::optional<at::ScalarType> dtype = input_dtype(*c.strategy);  // asked once
    loader.start_epoch(0);
    int64_t i = 0;
    while (std::optional<data::Batch> batch = loader.next()) {
      set_state(run_mode, progress.epochs_done, progress.iters_done, i);
      hooks.fire(event(RH_EVENT_BEFORE_VAL_ITER, RH_EVENT_BEFORE_TEST_ITER));
      {
        torch::NoGradGuard no_grad;
        // Every rank runs the same number of forwards (a sharding strategy
        // communicates in them); the sampler's padding is not counted.
        const at::Tensor input =
            preprocessor ? preprocessor->input(batch->input, device) : batch->input;
        at::Tensor logits = float_logits(model->forward(model_input(input, device, dtype)));
        const auto real = static_cast<int64_t>(batch->num_real);
        if (real > 0)
          evaluator.add(logits.narrow(0, 0, real), batch->target.to(device).narrow(0, 0, real));
      }
      hooks.fire(event(RH_EVENT_AFTER_VAL_ITER, RH_EVENT_AFTER_TEST_ITER));
      ++i;
    }
    if (world->size() > 1) {  // exact global metrics: sum every rank's totals
      at::Tensor t = torch::tensor(evaluator.totals(), torch::kDouble);
      if (world->tp_rank() != 0) t.zero_();  // its group's rank 0 counts its batches
      world->sum(t);
      evaluator.set_totals(
          std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel()));
    }
    Metrics metrics = evaluator.metrics();
    set_state(run_mode, progress.epochs_done, progress.iters_done, i);
    hooks.fire(event(RH_EVENT_AFTER_VAL_EPOCH, RH_EVENT_AFTER_TEST_EPOCH), metrics);
    hooks.fire(event(RH_EVENT_AFTER_VAL, RH_EVENT_AFTER_TEST));
    std::string line;
    for (const auto& [name, value] : metrics) line += " " + name + ": " + std::to_string(value);
    spdlog::debug("{}{}", val ? "val" : "test", line);
    return metrics;
  }

  // ---- Setup steps ----------------------------------------------------------

  void setup_env() {
    world =
        std::make_unique<World>(job, settings.dist, services, c.strategy->traits().needs_comm != 0);
    checkpoints = std::make_unique<RunCheckpoints>(job, settings, opt, store, *world, hooks,
                                                   *c.strategy, c.checkpoint_io->type());
    // Ranks sharing a node share its cores (OMP_NUM_THREADS wins when set).
    host::set_torch_threads(launch::default_intra_op_threads());
    seed = settings.seed.seed;
    if (settings.seed.diff_rank_seed) seed += static_cast<uint64_t>(world->rank());
    if (settings.seed.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);
    torch::manual_seed(seed);
    rh_SetupEnvArgs args{RH_SETUP_ENV_ARGS_STRUCT_SIZE, world->strategy_handle(),
                         world->local_rank(),           seed,
                         DLDevice{kDLCPU, 0},           world->rank_device(),
                         world->local_world_size(),     world->node_rank()};
    c.strategy->setup_env(args);
    services.set_device(args.device);
    device = args.device.device_type == kDLCUDA
                 ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(args.device.device_id))
                 : at::Device(at::kCPU);
    spdlog::info("strategy {} on {}, seed {}, rank {} of {}", c.strategy->type(), device.str(),
                 seed, world->rank(), world->size());
    tp = TensorParallelPlan::ask(*c.strategy, *world, job);  // step 1 checked it
    if (tp) checkpoints->set_tensor_parallel(tp.get());
    if (tp && world->rank() == 0)
      spdlog::info("tensor parallel: {} groups of {} consecutive ranks, data over {} replicas",
                   world->size() / tp->size(), tp->size(), world->data_size());
  }

  void build_model() {
    // From the job's seed, not the rank's: every rank builds the same weights
    // (and then takes rank 0's anyway).
    model = model::build_model(*job.find("model"), settings.seed.seed, opt.job_dir.string());
    model->to(device);
    world->sync_initial_weights(*model);
    if (const config::Node* ac = job.find("activation_checkpoint"))
      model::apply_activation_checkpoint(*model, *ac);
    preprocessor = data::BatchPreprocessor::from_job(job, settings.sizes.num_classes,
                                                     settings.seed.seed, world->data_rank());
    loss_fn = model::ClassifierLoss::from_job(job);
  }

  void wrap_model() {
    // Tensor parallel: the whole model, loaded, keeps this rank's blocks;
    // the strategy sees only them.
    if (tp) tp->apply(*model);
    model_access = std::make_unique<ModelAccess>(*model);
    if (!c.strategy->has_wrap()) return;
    rh_WrapArgs args{RH_WRAP_ARGS_STRUCT_SIZE, model_access->handle(), model_access->api()};
    c.strategy->wrap(args);
  }

  std::unique_ptr<data::DataLoader> make_loader(const std::string& split) {
    const config::Node* cfg = job.find_path("data." + split);
    if (cfg == nullptr) throw config::ConfigError(job.location(), "data", "missing data." + split);
    auto dataset = data::build_dataset(*cfg->find("dataset"), opt.job_dir.string());
    // The job's seed, never the rank-offset one: every rank must shuffle the
    // same permutation, or ranks would share and miss samples.
    // data.val / data.test shuffle as written (MMEngine's val dataloader
    // may shuffle too); the metrics are sums over the split either way.
    data::LoaderOptions o = data::loader_options(*cfg, settings.seed.seed);
    o.pin_memory = o.pin_memory && device.is_cuda();  // PyTorch too ignores it without a GPU
    if (split == "train") {
      // After an elastic restart on fewer ranks: the first world's global
      // batch, kept as dist.keep_global_batch says (ElasticBatch.hpp); in
      // data-parallel replicas (a tensor-parallel group reads one batch).
      const int base = world->env().elastic_base_world_size;
      const ElasticBatch eb =
          elastic_batch(settings.dist, o.batch_size, base > 0 ? base / world->tp_size() : base,
                        world->data_size());
      o.batch_size = eb.batch_size;
      micro_batches = eb.micro_batches;
      if (!eb.log.empty() && world->rank() == 0) spdlog::info("{}", eb.log);
    }
    // A tensor-parallel group's ranks read the same batches.
    return std::make_unique<data::DataLoader>(dataset, o, world->data_rank(), world->data_size());
  }

  void build_optimizer() {
    std::vector<optim::OptimParam> params;
    if (c.strategy->has_optimizer_params()) {
      params = strategy_optimizer_params();
    } else {
      params = trainable_params(*model);
    }
    if (params.empty())
      throw host::HostError(RH_ERROR_FAILED_PRECONDITION,
                            "the model has no trainable parameter (every parameter has "
                            "requires_grad false): nothing to train; use --mode val or test");
    set_layer_depths(job, *model, params);
    if (tp) tp->check_optimizer_params(params, c.strategy->traits().sharded_checkpoint != 0);
    optim = std::make_unique<optim::OptimWrapper>(*job.find("optim_wrapper"), std::move(params));
  }

  // AmpOptimWrapper (MMEngine's keys): the autocast dtype for this device
  // (float16 on a GPU, bfloat16 on the CPU unless written) and the scaler.
  // Refused where it cannot work: float16 on the CPU without a CPU float16
  // autocast (LibTorch before 2.4; JobComponents.hpp).
  void build_mixed_precision() {
    const std::optional<optim::AmpSettings> amp_cfg =
        optim::read_amp_settings(*job.find("optim_wrapper"));
    if (!amp_cfg) return;
    at::ScalarType dtype = device.is_cuda() ? at::kHalf : at::kBFloat16;
    if (amp_cfg->dtype != optim::AmpDtype::Default)
      dtype = amp_cfg->dtype == optim::AmpDtype::BFloat16 ? at::kBFloat16 : at::kHalf;
    // Beside a strategy's own precision: refused at step 1 (JobComponents).
    // A CUDA LibTorch whose strategy chose the CPU meets this here.
    check_amp_on_cpu(job, device.is_cpu());
    try {
      grad_scaler = std::make_unique<optim::GradScaler>(amp_cfg->scaler);
    } catch (const std::invalid_argument& e) {
      throw config::ConfigError(amp_cfg->type_location, amp_cfg->type_path,
                                std::string("AmpOptimWrapper: ") + e.what());
    }
    amp = MixedPrecision{dtype, grad_scaler.get()};
    checkpoints->set_grad_scaler(grad_scaler.get());
    spdlog::info("AmpOptimWrapper: autocast in {} on {}, loss scale {} ({})",
                 dtype == at::kHalf ? "float16" : "bfloat16", device.str(), grad_scaler->scale(),
                 amp_cfg->scaler.dynamic ? "dynamic" : "static");
    // bfloat16 on a CPU whose LibTorch computes it slower than float32:
    // rank 0 measures it and says so, with the factor (rh/cpp/torch_bf16_speed.hpp).
    if (device.is_cpu() && dtype == at::kBFloat16 && world->rank() == 0) {
      const Bf16Speed bf16 = bf16_speed("AmpOptimWrapper (dtype bfloat16)");
      spdlog::log(bf16.slower ? spdlog::level::warn : spdlog::level::debug, "{}", bf16.message);
    }
  }

  // The tensors a strategy has the optimizer update (OptimizerParams.hpp).
  std::vector<optim::OptimParam> strategy_optimizer_params() {
    StrategyOptimizerParams got = lifecycle::strategy_optimizer_params(job, *c.strategy, *model);
    strategy_grads = std::move(got.grads);
    return std::move(got.params);
  }

  void auto_scale_lr() {
    if (!settings.auto_scale_lr.enable) return;
    const int64_t base = settings.auto_scale_lr.base_batch_size;  // > 0: config::check_run
    const int64_t ranks = world->data_size();
    const double batch = static_cast<double>(train_loader->options().batch_size);
    const double factor = ranks * batch / static_cast<double>(base);
    optim->scale_lr(factor);
    spdlog::info("auto_scale_lr: lr x {} ({} ranks x batch {} / base_batch_size {})", factor, ranks,
                 batch, base);
  }

  void teardown() { c.strategy->teardown(); }

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
    s.rank = world->rank();
    s.world_size = world->size();
    services.set_run_state(s);
  }

  // ---- When to checkpoint -----------------------------------------------------

  void enable_checkpoints() {
    services.set_checkpoint_handlers(
        [this](const std::string& name) {
          check_checkpoint_call(name);
          if (mid_window) {
            spdlog::info(
                "checkpoint {} asked for inside a gradient-accumulation window (after iteration "
                "{}): saved at the window's end, where no accumulated gradient is lost",
                name, progress.iters_done);
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
          checkpoints->remove(name);
        });
  }

  void save_checkpoint(const std::string& name) {
    checkpoints->save(name, progress, *model, *optim, device);
  }

  // The checkpoint operations deferred to the end of an accumulation window,
  // in the order they were asked for. A deferred removal that fails only
  // warns: its checkpoint stays on disk, nothing is lost.
  void run_deferred_checkpoint_ops() {
    std::vector<DeferredCheckpointOp> ops = std::exchange(deferred, {});
    for (const auto& op : ops) {
      if (op.save) {
        save_checkpoint(op.name);
      } else {
        try {
          checkpoints->remove(op.name);
        } catch (const std::exception& e) {
          spdlog::warn("deferred removal of checkpoint {}: {}", op.name, e.what());
        }
      }
    }
  }

  void note_stop_signal(int ranks_signalled) {
    if (stop_signal != 0 || ranks_signalled == 0) return;
    // This rank's own signal, or SIGTERM's number when only others got one.
    stop_signal = launch::stop_signal() != 0 ? launch::stop_signal() : SIGTERM;
    spdlog::warn("stop signal received by {} rank(s): stopping at the next iteration boundary{}",
                 ranks_signalled, hooks.has_type("checkpoint") ? " after a checkpoint" : "");
  }

  // SIGTERM / SIGUSR1 agreed by the ranks, at an iteration boundary outside
  // any accumulation window: save (when the job checkpoints) and stop.
  [[noreturn]] void stop_for_signal() {
    std::string saved;
    const int64_t iters = progress.iters_done;
    if (hooks.has_type("checkpoint") && checkpoints->last_saved_iter() != iters) {
      saved = "iter_" + std::to_string(iters);
      set_state(RH_MODE_TRAIN, progress.epochs_done, iters - 1, progress.inner_done - 1);
      save_checkpoint(saved);
    }
    checkpoints->finish_background_save();  // published before the process stops
    throw StopRequested(stop_signal,
                        "stopped by signal " + std::to_string(stop_signal) + " after iteration " +
                            std::to_string(iters) +
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
