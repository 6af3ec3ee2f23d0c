// RunCheckpoints: saving (RunCheckpoints.hpp; the steps are described below).
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <sstream>

#include "abi/ComponentInstances.hpp"
#include "abi/HostError.hpp"
#include "abi/StateDict.hpp"
#include "checkpoint/BackgroundSave.hpp"
#include "checkpoint/CheckpointIndex.hpp"
#include "checkpoint/CheckpointStore.hpp"
#include "checkpoint/ShardReader.hpp"
#include "checkpoint/TensorDict.hpp"
#include "config/ConfigNode.hpp"
#include "lifecycle/HookDispatcher.hpp"
#include "lifecycle/RunCheckpoints.hpp"
#include "lifecycle/RunCheckpointsParts.hpp"
#include "lifecycle/TensorParallelPlan.hpp"
#include "lifecycle/World.hpp"
#include "model/Model.hpp"
#include "optim/GradScaler.hpp"
#include "optim/OptimWrapper.hpp"

namespace fs = std::filesystem;

namespace rh::lifecycle {
using namespace ckpt;  // RunCheckpointsParts.hpp

// ---- Save ----------------------------------------------------------------------
//
// A save is three steps, on every rank:
//   collect  what this rank writes: its files' dicts (model, optimizer,
//            state) and the shards they hold (ShardRecord), lent or copied;
//   agree    sharded, every rank writes its optimizer file into rank 0's
//            temporary directory and reports its shards (ShardReport) to
//            rank 0, which merges them into meta.json's table;
//   publish  rank 0 writes meta.json and renames the directory into place;
//            every rank learns the outcome (one code broadcast) and runs
//            after_save_checkpoint.
// A checkpoint IO that saves in the background takes the collected files
// from the loop instead (start_background_save) and does the rest on a
// thread (checkpoint/BackgroundSave).

// What this rank saves (collect), and after the write what rank 0 merged.
struct RunCheckpoints::SaveSet {
  bool background = false;  // a snapshot (copies), written by the plugin's thread
  bool writer = false;      // rank 0: the model, the state, meta.json
  bool sharded = false;     // sharded_checkpoint: every rank writes optimizer.rank<r>
  std::string own_stem;     // this rank's optimizer file
  // sharded_model_state: the parameters saved only as their shards (the
  // union over the ranks, on every rank).
  std::set<std::string> shard_only;
  rh_StateDict model, optim, state;
  std::vector<checkpoint::ShardRecord> records;  // this rank's shards
};

void RunCheckpoints::save(const std::string& name, const RunProgress& progress, model::Model& model,
                          optim::OptimWrapper& optim, c10::Device device) {
  const auto t0 = std::chrono::steady_clock::now();
  finish_background_save();  // at most one in flight
  const fs::path dir = store_.work_dir() / name;
  SaveSet set;
  set.background = store_.saves_in_background();
  set.writer = world_.rank() == 0;
  set.sharded = strategy_.traits().sharded_checkpoint != 0;
  set.own_stem = optimizer_stem(world_.rank(), set.sharded);
  collect_model(set, model, optim);
  collect_optimizer(set, optim);
  collect_state(set, progress, device, dir);
  checkpoint::CheckpointMeta meta = meta_of(name, progress, set);
  if (set.background) {
    std::vector<std::pair<std::string, std::unique_ptr<rh_StateDict>>> files;
    auto own = [](rh_StateDict& d) { return std::make_unique<rh_StateDict>(std::move(d)); };
    if (set.writer) files.emplace_back("model", own(set.model));
    if (set.writer || set.sharded) files.emplace_back(set.own_stem, own(set.optim));
    if (set.writer) files.emplace_back("state", own(set.state));
    start_background_save(name, progress.iters_done, std::move(files), std::move(set.records),
                          std::move(meta), set.sharded);
    // What the loop waited (the benchmark reads it): the previous save if
    // still in flight, the snapshot, handing the files over.
    if (set.writer)
      spdlog::info(
          "checkpoint {}: the loop waited {:.3f} s; written and published in the background",
          dir.string(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return;
  }
  const double tensor_bytes =
      set.writer ? publish(name, set, std::move(meta)) : write_shards(name, set);
  last_saved_iter_ = progress.iters_done;
  if (set.writer) {
    // What a save costs the loop (the benchmark, tools/bench/bench_checkpoint.sh, reads it).
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spdlog::info("saved checkpoint {} ({:.1f} MB of tensors in {:.3f} s, {:.0f} MB/s)",
                 dir.string(), tensor_bytes / 1e6, s, tensor_bytes / 1e6 / s);
  }
  hooks_.after_save(dir.string());
}

// The model's parameters and buffers, on the writer. `lend`: the tensors stay
// as they are until the save ends (no copy); not for a unit a strategy
// gathered only for the call. A background save copies everything into its
// snapshot.
void RunCheckpoints::collect_model(SaveSet& set, model::Model& model,
                                   const optim::OptimWrapper& optim) {
  if (set.sharded && strategy_.traits().sharded_model_state != 0) {
    std::string mine;
    for (const auto& p : optim.params()) mine += p.name + "\n";
    for (const std::string& list : world_.gather_strings(mine)) {
      std::istringstream in(list);
      for (std::string n; std::getline(in, n);) set.shard_only.insert(n);
    }
  }
  auto add = [&](const std::vector<model::NamedTensor>& list, bool lend) {
    for (const auto& t : list) {
      if (set.shard_only.count(t.name) != 0) continue;
      if (set.background)
        snapshot(set.model, "model." + t.name, t.name, t.tensor);
      else if (lend)
        checkpoint::put_tensor_view(set.model, t.name, t.tensor);
      else
        checkpoint::put_tensor(set.model, t.name, t.tensor);
      set.records.push_back(shard_record("model." + t.name, shape_of(t.tensor.sizes()), "model",
                                         set.model, t.name, 0));
    }
  };
  // Tensor parallel: replica 0's group makes each split parameter whole for
  // rank 0, in the same order on each of its ranks.
  auto add_whole = [&](const std::vector<model::NamedTensor>& list, bool lend) {
    if (tp_ == nullptr) {
      if (set.writer) add(list, lend);
      return;
    }
    if (world_.data_rank() != 0) return;
    for (const auto& t : list) {
      const int64_t dim = tp_->split_dim(t.name);
      if (dim < 0 || set.shard_only.count(t.name) != 0) {
        if (set.writer) add({t}, lend);
        continue;
      }
      const at::Tensor whole = tp_->whole(t.tensor.detach(), dim);
      if (set.writer) add({{t.name, whole}}, false);
    }
  };
  if (!set.shard_only.empty()) {
    // The sharded parameters are in the optimizer files; rank 0 writes the
    // others, whole (a split one gathered over replica 0's group).
    add_whole(model.named_parameters(), true);
  } else if (through_strategy()) {
    // A sharded model comes to rank 0 one unit at a time.
    each_unit(model, RH_UNIT_PARAMS_GATHER, RH_UNIT_PARAMS_RELEASE,
              [&](std::vector<model::NamedTensor>& params) { add_whole(params, false); });
  } else {
    add_whole(model.named_parameters(), true);
  }
  if (set.writer) add(model.named_buffers(), true);
}

// The optimizer's state: sharded, every rank writes its own to
// optimizer.rank<r> with the values of its optimizer tensors (the fp32
// master shards, "<param>.param"); else rank 0 writes it whole. Each entry
// is a shard of its logical tensor: the parameter's range for a state of
// the parameter's size, the whole of anything else (a step).
void RunCheckpoints::collect_optimizer(SaveSet& set, optim::OptimWrapper& optim) {
  // Tensor parallel: without sharded_checkpoint, replica 0's group makes
  // the split parameters' states whole for rank 0 (as collect_model their
  // values); sharded, each rank's shards are recorded as ranges of the
  // whole tensors (put_tp_shard).
  const bool gathers = tp_ != nullptr && world_.data_rank() == 0 && !set.sharded;
  if (!set.sharded && !set.writer && !gathers) return;
  std::map<std::string, const optim::OptimParam*> params;
  for (const auto& p : optim.params()) params[p.name] = &p;
  // Lent, not copied: nothing steps before a synchronous save ends.
  for (const auto& t : optim.state_tensors(/*copy=*/false)) {
    const optim::OptimParam* p = state_owner(params, t.name);
    const bool like_param =
        p != nullptr && t.tensor.dim() > 0 && t.tensor.numel() == p->param.numel();
    if (set.sharded && tp_ != nullptr && like_param) {
      put_tp_shard(set, {"optim." + t.name}, t.name, *p, t.tensor);
      continue;
    }
    const int64_t dim = like_param && tp_ != nullptr ? tp_->split_dim(p->name) : -1;
    const at::Tensor value =
        dim >= 0 ? tp_->whole(t.tensor.reshape(full_shape(*p)), dim) : t.tensor;
    if (!set.sharded && !set.writer) continue;
    if (set.background)
      snapshot(set.optim, "optim." + t.name, t.name, value);
    else if (dim >= 0)
      checkpoint::put_tensor(set.optim, t.name, value);
    else
      checkpoint::put_tensor_view(set.optim, t.name, value);
    set.records.push_back(shard_record(
        "optim." + t.name, like_param && dim < 0 ? full_shape(*p) : shape_of(value.sizes()),
        set.own_stem, set.optim, t.name, like_param && dim < 0 ? p->full_offset : 0));
  }
  if (!set.sharded) return;
  for (const auto& p : optim.params()) {
    const std::string key = p.name + kShardValueSuffix;
    if (tp_ != nullptr) {
      std::vector<std::string> logicals{"master." + p.name};
      if (set.shard_only.count(p.name) != 0) logicals.push_back("model." + p.name);
      put_tp_shard(set, logicals, key, p, p.param);
      continue;
    }
    if (set.background)
      snapshot(set.optim, "master." + p.name, key, p.param);
    else
      checkpoint::put_tensor_view(set.optim, key, p.param);  // the masters: alive until the step
    set.records.push_back(shard_record("master." + p.name, full_shape(p), set.own_stem, set.optim,
                                       key, p.full_offset));
    if (set.shard_only.count(p.name) != 0)
      set.records.push_back(shard_record("model." + p.name, full_shape(p), set.own_stem, set.optim,
                                         key, p.full_offset));
  }
}

void RunCheckpoints::put_tp_shard(SaveSet& set, const std::vector<std::string>& logicals,
                                  const std::string& key, const optim::OptimParam& p,
                                  const at::Tensor& value) {
  const int64_t dim = tp_->split_dim(p.name);
  std::vector<int64_t> shape = full_shape(p);  // the block's
  TensorParallelPlan::WholeRange range{p.full_offset, value.numel(), 0};
  at::Tensor out = value;
  if (dim >= 0) {
    range = tp_->whole_range(shape, dim, p.full_offset, value.numel());
    shape = tp_->whole_shape(shape, dim);
    if (range.rows > 0) out = tp_->rows_of_own(value, range);  // collective on the group
  }
  // The group's ranks hold the same shard of a replicated parameter, and
  // the same whole rows once gathered: its rank 0 writes them.
  if ((dim < 0 || range.rows > 0) && tp_->rank() != 0) return;
  const bool lent = out.is_same(value);
  if (set.background)
    snapshot(set.optim, logicals.front(), key, out);
  else if (lent)
    checkpoint::put_tensor_view(set.optim, key, out);  // alive until the step
  else
    checkpoint::put_tensor(set.optim, key, out);
  for (const std::string& logical : logicals)
    set.records.push_back(shard_record(logical, shape, set.own_stem, set.optim, key, range.offset));
}

// The run's own state: the loop position, the loss scaler, every rank's
// generators, the strategy's and the hooks' (before_save_checkpoint).
void RunCheckpoints::collect_state(SaveSet& set, const RunProgress& progress, c10::Device device,
                                   const fs::path& dir) {
  checkpoint::LoopState loop;
  loop.epochs_done = progress.epochs_done;
  loop.iters_done = progress.iters_done;
  loop.inner_done = progress.inner_done;
  loop.global_batch = progress.global_batch;
  loop.samples_in_epoch = progress.samples_in_epoch();
  loop.skipped_steps = progress.skipped_steps;
  loop.world_size = world_.size();
  checkpoint::put_text(set.state, "loop", checkpoint::loop_state_json(loop));
  // AmpOptimWrapper's scaler (GradScaler.state_dict(): scale, growth
  // tracker), as tensors: the scale restores bit for bit.
  if (grad_scaler_ != nullptr && set.writer) {
    const optim::GradScalerState amp = grad_scaler_->state();
    checkpoint::put_tensor(set.state, kAmpScale, at::scalar_tensor(amp.scale, at::kDouble));
    checkpoint::put_tensor(set.state, kAmpGrowthTracker,
                           at::scalar_tensor(amp.growth_tracker, at::kLong));
  }
  // Every rank's generators (they differ with diff_rank_seed, and dropout
  // draws from them): rows of (world_size, state bytes).
  at::Tensor cpu_rng = world_.gather_rows(at::detail::getDefaultCPUGenerator().get_state());
  if (set.writer) checkpoint::put_tensor(set.state, "rng.cpu", cpu_rng);
  if (device.is_cuda()) {
    at::Tensor cuda_rng =
        world_.gather_rows(at::globalContext().defaultGenerator(device).get_state());
    if (set.writer) checkpoint::put_tensor(set.state, "rng.cuda", cuda_rng);
  }
  rh_StateDict own;  // stays empty without StateExport
  strategy_.state_export(own);
  for (auto& [key, e] : own.entries) set.state.entries["strategy." + key] = std::move(e);
  hooks_.before_save(set.state, dir.string());
  if (set.writer)
    for (const auto& [key, e] : set.state.entries)
      if (e.is_tensor)
        set.records.push_back(shard_record("state." + key, e.shape, "state", set.state, key, 0));
}

// meta.json but its tensor table (the records of every rank, merged later).
checkpoint::CheckpointMeta RunCheckpoints::meta_of(const std::string& name,
                                                   const RunProgress& progress,
                                                   const SaveSet& set) const {
  checkpoint::CheckpointMeta meta;
  meta.runner = "runner-host " + opt_.runner_version;
  meta.name = name;
  meta.epoch = progress.epochs_done;
  meta.iter = progress.iters_done;
  meta.samples_in_epoch = progress.samples_in_epoch();
  meta.world_size = world_.size();
  meta.strategy = strategy_.type();
  meta.checkpoint_io = checkpoint_io_type_;
  meta.files.push_back("model");
  if (set.sharded)
    for (int r = 0; r < world_.size(); ++r) meta.files.push_back(optimizer_stem(r, true));
  else
    meta.files.push_back("optimizer");
  meta.files.push_back("state");
  meta.model_sharded = !set.shard_only.empty();
  meta.optimizer_params = optimizer_params_;
  meta.config = opt_.config_yaml;
  return meta;
}

// Rank > 0 (agree): writes its optimizer file into the directory rank 0
// names and reports its shards, or its failure; then learns the outcome.
// Returns 0 (the tensor bytes are rank 0's to count).
double RunCheckpoints::write_shards(const std::string& name, SaveSet& set) {
  if (set.sharded) {
    const std::string tmp = world_.broadcast_string("");
    checkpoint::ShardReport report;
    if (!tmp.empty()) {
      try {
        store_.write_files(tmp, {{set.own_stem, &set.optim}});
        checkpoint::fill_checksums(set.records, {{set.own_stem, &set.optim}});
        report = {true, std::move(set.records)};
      } catch (const std::exception& e) {
        spdlog::error("checkpoint '{}': rank {} could not write {}: {}", name, world_.rank(),
                      set.own_stem, e.what());
      }
    }
    world_.gather_strings(checkpoint::encode_report(report));
  }
  const auto code = static_cast<rh_ErrorCode>(world_.broadcast_int(RH_ERROR_OK));
  if (code != RH_ERROR_OK)
    throw host::HostError(code,
                          "rank 0 failed to save checkpoint '" + name + "' (its log says why)");
  return 0;
}

// Rank 0 (agree + publish): writes its files, tells the other ranks where to
// write theirs (sharded), merges every rank's shards into `meta`, publishes,
// and tells every rank the outcome. Returns the bytes of every rank's tensors.
double RunCheckpoints::publish(const std::string& name, SaveSet& set,
                               checkpoint::CheckpointMeta meta) {
  std::vector<checkpoint::ShardRecord> others;     // the other ranks' records
  bool told = !set.sharded || world_.size() == 1;  // the other ranks know where to write
  auto gather_others = [&](const fs::path& tmp) {
    if (told) return;
    told = true;
    world_.broadcast_string(tmp.string());
    const std::vector<std::string> reports = world_.gather_strings("");
    std::vector<bool> failed(reports.size(), false);
    for (size_t r = 1; r < reports.size(); ++r) {
      checkpoint::ShardReport report = checkpoint::decode_report(reports[r]);
      failed[r] = !report.written;
      for (auto& rec : report.records) others.push_back(std::move(rec));
    }
    const std::string ranks = ranks_of(failed);
    if (!ranks.empty())
      throw host::HostError(RH_ERROR_IO, "rank(s) " + ranks +
                                             " could not write their optimizer shards of "
                                             "checkpoint '" +
                                             name + "' (their logs say why)");
  };
  double tensor_bytes = 0;
  auto meta_after_files = [&]() -> std::string {
    checkpoint::fill_checksums(
        set.records, {{"model", &set.model}, {set.own_stem, &set.optim}, {"state", &set.state}});
    std::vector<checkpoint::ShardRecord> every = set.records;  // rank order: 0 first
    every.insert(every.end(), others.begin(), others.end());
    for (const auto& r : every)
      tensor_bytes +=
          static_cast<double>(r.shard.numel) * static_cast<double>(checkpoint::dtype_size(r.dtype));
    try {
      meta.tensors = checkpoint::merge_records(every);
    } catch (const std::invalid_argument& e) {
      throw host::HostError(RH_ERROR_INTERNAL,
                            "checkpoint '" + name + "': the shards do not add up: " + e.what());
    }
    return checkpoint::meta_json(meta);
  };
  rh_ErrorCode code = RH_ERROR_OK;
  std::string failure;
  try {
    store_.save(name, {{"model", &set.model}, {set.own_stem, &set.optim}, {"state", &set.state}},
                meta_after_files, gather_others);
  } catch (const host::HostError& e) {
    code = e.code();
    failure = e.what();
  } catch (const std::exception& e) {
    code = RH_ERROR_IO;
    failure = e.what();
  }
  if (!told) {  // failed before the others could write: release them
    world_.broadcast_string("");
    world_.gather_strings(checkpoint::encode_report({}));
  }
  world_.broadcast_int(static_cast<int64_t>(code));
  if (code != RH_ERROR_OK) throw host::HostError(code, failure);
  return tensor_bytes;
}

// ---- Saves in the background -------------------------------------------------------

void RunCheckpoints::snapshot(rh_StateDict& dict, const std::string& slot, const std::string& key,
                              const at::Tensor& tensor) {
  // The previous background save is over (at most one in flight), so its
  // buffers are free: copying into memory already touched costs no page
  // faults, which a fresh allocation of the whole state would.
  at::Tensor& buffer = staging_[slot];
  if (!buffer.defined() || buffer.sizes() != tensor.sizes() ||
      buffer.scalar_type() != tensor.scalar_type())
    buffer = at::empty(tensor.sizes(), tensor.options().device(at::kCPU));
  buffer.copy_(tensor.detach());
  checkpoint::put_tensor_view(dict, key, buffer);
}

void RunCheckpoints::start_background_save(
    const std::string& name, int64_t iters_done,
    std::vector<std::pair<std::string, std::unique_ptr<rh_StateDict>>> files,
    std::vector<checkpoint::ShardRecord> records, checkpoint::CheckpointMeta meta, bool sharded) {
  const int rank = world_.rank();
  // Rank 0 makes the directory every rank writes into.
  std::string tmp, failure;
  rh_ErrorCode code = RH_ERROR_OK;
  if (rank == 0) {
    try {
      tmp = store_.begin(name).string();
    } catch (const host::HostError& e) {
      code = e.code();
      failure = e.what();
    }
  }
  tmp = world_.broadcast_string(tmp);
  code = static_cast<rh_ErrorCode>(world_.broadcast_int(static_cast<int64_t>(code)));
  if (tmp.empty())
    throw host::HostError(
        code, "checkpoint '" + name +
                  "': " + (rank == 0 ? failure : "rank 0 could not start it (its log says why)"));
  // Every rank hands its files to the plugin, which queues them.
  std::vector<checkpoint::CheckpointFile> list;
  for (const auto& [stem, dict] : files) list.push_back({stem, dict.get()});
  try {
    store_.queue_files(tmp, list);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  const std::vector<bool> failed = world_.gather_flags(!failure.empty());
  const std::string ranks = ranks_of(failed);
  if (!ranks.empty()) {
    try {  // the plugin lets go of what it queued before the snapshot goes
      store_.flush(tmp);
    } catch (const std::exception&) {
    }
    world_.gather_flags(false);  // every rank let go: the directory can go
    if (rank == 0) store_.abandon(tmp);
    throw host::HostError(RH_ERROR_IO, !failure.empty() ? "checkpoint '" + name + "': " + failure
                                                        : "rank(s) " + ranks +
                                                              " could not hand their files of "
                                                              "checkpoint '" +
                                                              name +
                                                              "' to the checkpoint IO (their "
                                                              "logs say why)");
  }
  checkpoint::BackgroundSaveJob job;
  job.name = name;
  job.tmp = tmp;
  job.rank = rank;
  if (rank == 0 && sharded)
    for (int r = 1; r < world_.size(); ++r) job.reporters.push_back(r);
  job.files = std::move(files);
  job.records = std::move(records);
  job.meta = std::move(meta);
  job.timeout_s = timeout_s_;
  background_ = std::make_unique<checkpoint::BackgroundSave>(store_, std::move(job));
  last_saved_iter_ = iters_done;
}

bool RunCheckpoints::save_finished() const { return !background_ || background_->finished(); }

void RunCheckpoints::poll_background_save(int ranks_finished) {
  if (background_ && ranks_finished == world_.size()) finish_background_save();
}

void RunCheckpoints::finish_background_save() {
  if (!background_) return;
  const std::unique_ptr<checkpoint::BackgroundSave> save = std::move(background_);
  const auto [code, problem] = save->wait();
  const std::vector<bool> failed = world_.gather_flags(code != RH_ERROR_OK);
  const std::vector<std::string> removals = std::exchange(removals_after_save_, {});
  const std::string ranks = ranks_of(failed);
  if (!ranks.empty()) {
    if (code != RH_ERROR_OK)
      throw host::HostError(
          code, "checkpoint '" + save->name() + "' failed in the background: " + problem);
    throw host::HostError(RH_ERROR_IO, "checkpoint '" + save->name() +
                                           "' failed in the background on rank(s) " + ranks +
                                           " (their logs say why)");
  }
  const fs::path dir = store_.work_dir() / save->name();
  if (world_.rank() == 0)
    spdlog::info(
        "saved checkpoint {} ({:.1f} MB of tensors in {:.3f} s in the background, {:.0f} "
        "MB/s)",
        dir.string(), save->tensor_bytes() / 1e6, save->seconds(),
        save->tensor_bytes() / 1e6 / save->seconds());
  hooks_.after_save(dir.string());
  if (world_.rank() == 0)
    for (const std::string& old : removals) {
      try {
        store_.remove(old);
      } catch (const std::exception& e) {
        spdlog::warn("removal of checkpoint {} (asked for while {} was saved): {}", old,
                     save->name(), e.what());
      }
    }
}

}  // namespace rh::lifecycle
