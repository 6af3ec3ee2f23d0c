// The run's checkpoints (docs/architecture.md, "Checkpoints"): what a save
// holds and how every rank takes part in it, which checkpoint a run resumes
// from (chosen by rank 0, confirmed by every rank), and loading weights
// (resume or load_from) and the rest of the state (optimizer, loop counters,
// every rank's generators, hooks', the strategy's). *When* to save is the
// runner's business (hooks ask; accumulation windows and stop signals defer).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "abi/StateDict.hpp"
#include "checkpoint/CheckpointIndex.hpp"
#include "checkpoint/CheckpointMeta.hpp"
#include "checkpoint/TensorDict.hpp"
#include "job/JobSettings.hpp"
#include "lifecycle/Runner.hpp"
#include "model/Model.hpp"
#include "rh/rh_strategy.h"

namespace rh::checkpoint {
class BackgroundSave;
class CheckpointStore;
struct LoadReport;
}  // namespace rh::checkpoint
namespace rh::model {
class Model;
}
namespace rh::optim {
class GradScaler;
class OptimWrapper;
struct OptimParam;
}  // namespace rh::optim

namespace rh::lifecycle {

class TensorParallelPlan;

class HookDispatcher;
class World;

// What a checkpoint records of the loop: what has been done.
struct RunProgress {
  int64_t epochs_done = 0;  // finished (data) epochs
  int64_t iters_done = 0;   // train iterations
  int64_t inner_done = 0;   // batches done in the current epoch
  // Samples one iteration takes from the epoch's global order (batch_size x
  // world size): the data position is inner_done x global_batch +
  // sample_shift samples, which another world size or batch size resumes
  // from.
  int64_t global_batch = 0;
  // Non-zero only in an epoch resumed at a sample that global_batch does not
  // divide: the epoch then runs from that sample, its batches numbered as if
  // inner_done had been done (DataLoader::start_epoch_at_sample).
  int64_t sample_shift = 0;
  // Optimizer steps skipped for an inf or nan gradient (AmpOptimWrapper,
  // or a strategy's ShouldStep): the `skipped_steps` metric, which a
  // resumed run continues.
  int64_t skipped_steps = 0;
  int64_t samples_in_epoch() const { return inner_done * global_batch + sample_shift; }
};

// This run's batching, for converting a checkpoint's data position.
struct DataPosition {
  int64_t global_batch = 0;
  int64_t batches_per_epoch = 0;
  std::function<int64_t(int64_t samples)> batches_from;  // left in the epoch from a sample on
};

class RunCheckpoints {
 public:
  RunCheckpoints(const config::Node& job, const config::JobSettings& settings,
                 const RunnerOptions& opt, checkpoint::CheckpointStore& store, World& world,
                 HookDispatcher& hooks, host::StrategyInstance& strategy,
                 std::string checkpoint_io_type);
  // A save still in the background is abandoned (its directory removed) once
  // the plugin's queued writes end; nothing published changes.
  ~RunCheckpoints();

  // The checkpoint every rank resumes from (`resume:`), or nullopt: rank 0
  // chooses and verifies it (checksums, once) and broadcasts its path and
  // its meta.json digest; every other rank checks that it sees exactly that
  // one, or every rank throws, naming the ranks that cannot.
  std::optional<std::filesystem::path> find_resume();
  // Model weights from the resume checkpoint (strict), else from load_from.
  // `resuming_training`: the optimizer's state follows (resume()); a
  // checkpoint whose parameters are saved only as shards needs it.
  void load_weights(model::Model& model, const std::optional<std::filesystem::path>& resume_dir,
                    bool resuming_training);
  // Whether the weights load after Wrap, through the strategy (its
  // load_phase after_wrap), or into the model as built: with a
  // tensor-parallel plan always before (every rank holds the whole model
  // until the plan keeps its blocks, so each reads what it needs).
  bool loads_after_wrap() const;
  // Set-up, on every rank once the optimizer is built (one collective): each
  // rank's optimizer tensors (names and element ranges) against the other
  // ranks'. Without the sharded_checkpoint trait rank 0 alone saves the
  // optimizer state, so a strategy whose ranks hold different tensors
  // (OptimizerParams) is refused: HostError naming the strategy, the trait
  // and the first ranks that differ. Records the parameters the optimizer
  // holds over every rank, which each checkpoint's meta.json lists
  // ("optimizer_params") for `runner-host ckpt inspect`.
  void check_optimizer_params(const optim::OptimWrapper& optim);
  // Saves checkpoint `name` (every rank calls it; rank 0 writes and every
  // rank learns whether that worked). Throws HostError when it did not.
  // With a checkpoint IO that saves in the background, it returns once the
  // snapshot is handed over (a save still in flight is finished first).
  void save(const std::string& name, const RunProgress& progress, model::Model& model,
            optim::OptimWrapper& optim, c10::Device device);
  // Checkpoint_Remove: rank 0 deletes `name` now, or once the save in flight
  // is published (an older checkpoint is never removed before the newer one
  // exists, and `latest` may still name it until then).
  void remove(const std::string& name);

  // Background saves, at most one in flight. This rank's part of it is over
  // (or there is none): the flag every rank sends with the loss.
  bool save_finished() const;
  // At an iteration boundary, on every rank with the number of ranks whose
  // part was over: when that is all of them, the save ends here, on every
  // rank at the same iteration (finish_background_save).
  void poll_background_save(int ranks_finished);
  // Waits for the save in flight, then on every rank: after_save_checkpoint
  // and the removals asked for meanwhile, or the save's error thrown
  // (HostError naming the checkpoint and the ranks that failed). Before the
  // next save and at the end of the run.
  void finish_background_save();
  // Resume, part 1: the optimizer state (and a sharding strategy's fp32
  // masters), resharded to this run's parameters from whatever layout wrote
  // them; the loop counters, with the data position converted to this run's
  // batching; this rank's generators. The caller then applies its
  // schedulers and run state.
  RunProgress resume(const std::filesystem::path& dir, optim::OptimWrapper& optim,
                     c10::Device device, const DataPosition& data);
  // Resume, part 2: after_load_checkpoint (the hooks' state), then the
  // strategy's StateImport (given the strategy.* state only when the same
  // strategy wrote the checkpoint; another one's is not its to read).
  void finish_resume(const std::filesystem::path& dir);

  // The iteration of the last successful save (-1: none yet).
  int64_t last_saved_iter() const { return last_saved_iter_; }
  // AmpOptimWrapper's loss scaler: saved with every checkpoint (state.amp.*)
  // and restored by resume(), so a resumed run scales and skips exactly as
  // the uninterrupted one. Null (the default): none.
  void set_grad_scaler(optim::GradScaler* scaler) { grad_scaler_ = scaler; }
  // A strategy's tensor-parallel plan: its split parameters are saved whole
  // (gathered over the group by the ranks of data-parallel replica 0), or
  // as shards of whole tensors (a sharded_checkpoint strategy's), and
  // resumed as this rank's blocks, so the checkpoint is any other's.
  void set_tensor_parallel(const TensorParallelPlan* tp) { tp_ = tp; }

 private:
  std::optional<std::filesystem::path> choose_resume();  // rank 0
  // resume()'s four jobs: the optimizer state resharded to this run's
  // parameters (and a sharding strategy's fp32 masters); the loop counters
  // with the data position in this run's batching; the loss scaler; this
  // rank's generators (its row of the saved world's).
  void resume_optimizer(const std::filesystem::path& dir, const checkpoint::CheckpointMeta& meta,
                        optim::OptimWrapper& optim);
  RunProgress resume_progress(const checkpoint::LoopState& loop, const DataPosition& data);
  void resume_grad_scaler(const rh_StateDict& state_dict, const std::filesystem::path& dir);
  void resume_generators(const rh_StateDict& state_dict, int64_t saved_world, c10::Device device);
  bool through_strategy() const;  // the strategy has UnitParams
  void each_unit(model::Model& model, rh_UnitParamsOp first, rh_UnitParamsOp then,
                 const std::function<void(std::vector<model::NamedTensor>&)>& fn);
  // Fills a dict with model tensors by their model names (a whole file, or
  // logical tensors assembled from their shards).
  using ModelSource = std::function<void(rh_StateDict&)>;
  // `from_masters`: parameters read from their float32 master ("master.<p>")
  // instead of the model file's narrower copy.
  ModelSource model_source(const std::filesystem::path& dir, const checkpoint::CheckpointMeta& meta,
                           const std::set<std::string>& skip,
                           const std::set<std::string>& from_masters = {}) const;
  checkpoint::LoadReport read_model(const ModelSource& source, const std::string& what,
                                    model::Model& model, const std::vector<std::string>& sharded);
  checkpoint::LoadReport load_model(const rh_StateDict& dict, model::Model& model,
                                    const std::vector<std::string>& sharded = {});
  // Copies `tensor` into the snapshot of a background save, as `key` of
  // `dict`, in the buffer `slot` the previous background save used.
  void snapshot(rh_StateDict& dict, const std::string& slot, const std::string& key,
                const at::Tensor& tensor);
  // The snapshot handed to a plugin that saves in the background: rank 0
  // makes the directory, every rank queues its files, then BackgroundSave.
  void start_background_save(
      const std::string& name, int64_t iters_done,
      std::vector<std::pair<std::string, std::unique_ptr<rh_StateDict>>> files,
      std::vector<checkpoint::ShardRecord> records, checkpoint::CheckpointMeta meta, bool sharded);
  // The steps of save() (RunCheckpointsSave.cpp says how they fit).
  struct SaveSet;
  void collect_model(SaveSet& set, model::Model& model, const optim::OptimWrapper& optim);
  void collect_optimizer(SaveSet& set, optim::OptimWrapper& optim);
  // Sharded, with a tensor-parallel plan: `value` (this rank's shard of
  // optimizer parameter `p`'s block: a state of its size, or its master)
  // recorded as the range of the whole tensor it is, for `logicals`
  // (TensorParallelPlan::whole_range; a rowwise shard made whole rows over
  // the group, written by its rank 0; a replicated one by rank 0 alone).
  void put_tp_shard(SaveSet& set, const std::vector<std::string>& logicals, const std::string& key,
                    const optim::OptimParam& p, const at::Tensor& value);
  void collect_state(SaveSet& set, const RunProgress& progress, c10::Device device,
                     const std::filesystem::path& dir);
  checkpoint::CheckpointMeta meta_of(const std::string& name, const RunProgress& progress,
                                     const SaveSet& set) const;
  double write_shards(const std::string& name, SaveSet& set);
  double publish(const std::string& name, SaveSet& set, checkpoint::CheckpointMeta meta);

  const config::Node& job_;
  const config::JobSettings& settings_;  // the Runner's, read once
  const RunnerOptions& opt_;
  checkpoint::CheckpointStore& store_;
  World& world_;
  HookDispatcher& hooks_;
  host::StrategyInstance& strategy_;
  std::string checkpoint_io_type_;
  rh_StateDict resumed_state_;  // between resume() and finish_resume()
  // The dtype rule of the model load under way (load_weights of a resume).
  checkpoint::DtypeRule load_rule_ = checkpoint::DtypeRule::kExact;
  std::string resumed_strategy_;  // the strategy that wrote it
  int64_t last_saved_iter_ = -1;
  optim::GradScaler* grad_scaler_ = nullptr;
  const TensorParallelPlan* tp_ = nullptr;
  double timeout_s_ = 300;  // dist.timeout_s: rank 0's wait for the ranks' reports
  std::unique_ptr<checkpoint::BackgroundSave> background_;  // the save in flight
  // The snapshot's buffers, kept for the next background save (one copy of
  // the saved state in CPU memory, as PyTorch DCP's cached staging keeps).
  std::map<std::string, at::Tensor> staging_;
  std::vector<std::string> removals_after_save_;
  // check_optimizer_params(): the optimizer's parameters over every rank
  // (nullopt before it ran: meta.json then does not record them).
  std::optional<std::vector<std::string>> optimizer_params_;
};

}  // namespace rh::lifecycle
