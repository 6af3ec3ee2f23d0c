// RunCheckpoints: loading weights (resume, load_from) and the rest of a
// checkpoint's state, resharded to this run's strategy and world size.
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

// ---- Load ------------------------------------------------------------------------

void RunCheckpoints::load_weights(model::Model& model, const std::optional<fs::path>& resume_dir,
                                  bool resuming_training) {
  if (resume_dir) {
    const checkpoint::CheckpointMeta meta = checkpoint::read_current_meta(*resume_dir);
    // A strategy that rebuilds its parameters from the fp32 masters
    // (sharded_model_state) takes them in resume(), from the masters' shards
    // in any layout: those parameters are not read here, nor whole anywhere.
    std::set<std::string> skip;
    if (resuming_training && strategy_.traits().sharded_model_state != 0)
      for (const auto& p : model.named_parameters())
        if (meta.tensors.count("master." + p.name) != 0) skip.insert(p.name);
    // Another precision than the run that wrote it (issue 31, item 5): a
    // parameter the checkpoint holds in a narrower dtype than the model's
    // comes from its float32 master when the checkpoint has one; a wider
    // one is cast down (a strategy's working dtype of its float32 values);
    // a narrower one without a master only with resume_dtype: convert.
    std::set<std::string> from_masters;
    for (const auto& p : model.named_parameters()) {
      if (skip.count(p.name) != 0) continue;
      const auto file = meta.tensors.find("model." + p.name);
      const auto master = meta.tensors.find("master." + p.name);
      if (file == meta.tensors.end() || master == meta.tensors.end()) continue;
      if (master->second.dtype == "F32" && file->second.dtype != "F32" &&
          p.tensor.scalar_type() == at::kFloat)
        from_masters.insert(p.name);
    }
    const bool convert = settings_.resume_dtype == config::ResumeDtype::Convert;
    load_rule_ = convert ? checkpoint::DtypeRule::kAny : checkpoint::DtypeRule::kNarrow;
    checkpoint::LoadReport report;
    try {
      report = read_model(model_source(*resume_dir, meta, skip, from_masters), resume_dir->string(),
                          model, std::vector<std::string>(skip.begin(), skip.end()));
    } catch (...) {
      load_rule_ = checkpoint::DtypeRule::kExact;
      throw;
    }
    load_rule_ = checkpoint::DtypeRule::kExact;
    if (!report.ok()) {
      const bool dtypes = std::any_of(
          report.mismatched.begin(), report.mismatched.end(),
          [](const std::string& m) { return m.find("checkpoint dtype") != std::string::npos; });
      throw host::HostError(
          RH_ERROR_FAILED_PRECONDITION,
          "checkpoint " + resume_dir->string() + " does not match the model:" + report.str() +
              (dtypes && !convert
                   ? "\n  (a tensor saved in a narrower dtype than the model's, with no float32 "
                     "master to take it from, loads only with resume_dtype: convert: the run "
                     "then continues from the narrower values)"
                   : std::string()));
    }
    if (world_.rank() == 0) {
      if (!from_masters.empty())
        spdlog::info(
            "resume: {} parameter(s) taken from the checkpoint's float32 masters (its model file "
            "holds them in {}), e.g. '{}'",
            from_masters.size(), meta.tensors.at("model." + *from_masters.begin()).dtype,
            *from_masters.begin());
      if (!report.converted.empty())
        spdlog::info("resume: {} tensor(s) of {} cast to this run's dtype, e.g. {}",
                     report.converted.size(), resume_dir->string(), report.converted.front());
    }
    spdlog::info("resume: loaded model weights from {}", resume_dir->string());
    return;
  }
  const config::Node* lf = job_.find("load_from");
  if (lf == nullptr || lf->is_null()) return;
  const config::Node* path_node = lf->is_map() ? lf->find("path") : lf;
  const bool strict = lf->is_map() && lf->find("strict") ? lf->find("strict")->as_bool() : true;
  fs::path path = path_node->as_string();
  if (path.is_relative()) path = opt_.job_dir / path;
  // A checkpoint directory (its model tensors, assembled from their shards
  // when they are sharded) or a single weights file.
  if (!fs::exists(path))
    throw config::ConfigError(path_node->location(), path_node->path(),
                              "no such file or directory: " + path.string());
  ModelSource source;
  if (fs::is_directory(path)) {
    checkpoint::CheckpointMeta meta;
    try {
      meta = checkpoint::read_current_meta(path);
    } catch (const host::HostError& e) {
      throw config::ConfigError(path_node->location(), path_node->path(), e.what());
    }
    source = model_source(path, meta, {});
  } else {
    // (Another checkpoint IO plugin names its own files.)
    if (checkpoint_io_type_ == "safetensors" && path.extension() != ".safetensors")
      throw config::ConfigError(
          path_node->location(), path_node->path(),
          path.string() + " is neither a checkpoint folder nor a .safetensors file");
    source = [this, path](rh_StateDict& dict) {
      store_.load(path.parent_path(), path.stem().string(), dict);
    };
  }
  checkpoint::LoadReport report = read_model(source, path.string(), model, {});
  if (!report.ok()) {
    if (strict || !report.mismatched.empty())
      throw host::HostError(
          RH_ERROR_FAILED_PRECONDITION,
          "load_from " + path.string() + " does not match the model:" + report.str());
    spdlog::warn("load_from {} (strict: false):{}", path.string(), report.str());
  }
  spdlog::info("loaded weights from {}", path.string());
}

// The model tensors of a checkpoint but `skip`: its model file as it is when
// that holds each of them whole, else each one assembled from its shards.
RunCheckpoints::ModelSource RunCheckpoints::model_source(
    const fs::path& dir, const checkpoint::CheckpointMeta& meta, const std::set<std::string>& skip,
    const std::set<std::string>& from_masters) const {
  std::vector<std::pair<std::string, std::string>> wanted;  // logical tensor, key in the dict
  bool whole_in_file = from_masters.empty();
  for (const auto& [logical, t] : meta.tensors) {
    if (logical.rfind("model.", 0) != 0) continue;
    const std::string name = logical.substr(6);
    if (skip.count(name) != 0) continue;
    wanted.push_back({from_masters.count(name) != 0 ? "master." + name : logical, name});
    whole_in_file = whole_in_file && t.shards.size() == 1 && t.shards[0].file == "model" &&
                    t.shards[0].key == name;
  }
  if (whole_in_file && skip.empty())
    return [this, dir](rh_StateDict& dict) { store_.load(dir, "model", dict); };
  auto index = std::make_shared<checkpoint::TensorIndex>(meta.tensors);
  return [this, dir, index, wanted](rh_StateDict& dict) {
    const checkpoint::ShardReader reader(store_, dir, *index);
    std::vector<checkpoint::ShardReader::Request> requests;
    for (const auto& [logical, key] : wanted) requests.push_back(reader.whole(logical, key));
    reader.read(requests, dict);
  };
}

// The model tensors `source` gives into the model. With the strategy's
// load_from_root trait only rank 0 reads them, when they are every tensor of
// the model as it is: per unit rank 0 writes the whole values and the
// strategy hands every rank its shards (ROOT_PREPARE / ROOT_ADOPT); the
// buffers are broadcast. Otherwise every rank reads them (load_model).
checkpoint::LoadReport RunCheckpoints::read_model(const ModelSource& source,
                                                  const std::string& what, model::Model& model,
                                                  const std::vector<std::string>& sharded) {
  const rh_StrategyTraits t = strategy_.traits();
  const bool root =
      t.load_from_root != 0 && loads_after_wrap() && world_.size() > 1 && sharded.empty();
  rh_StateDict dict;
  if (!root) {
    // Before Wrap the values go into the model's tensors as they are: the
    // checkpoint-IO plugin may read them there directly (place_into).
    if (!loads_after_wrap()) {
      const std::set<std::string> skip(sharded.begin(), sharded.end());
      std::vector<model::NamedTensor> targets;
      for (auto& list : {model.named_parameters(), model.named_buffers()})
        for (const auto& x : list)
          if (skip.count(x.name) == 0) targets.push_back(x);
      checkpoint::place_into(dict, "", targets);
    }
    source(dict);
    return load_model(dict, model, sharded);
  }
  const bool reader = world_.rank() == 0;
  std::vector<model::NamedTensor> buffers = model.named_buffers();
  std::string decision;  // rank 0 -> all: "root", "all" or "error\n<message>"
  std::exception_ptr failed;
  if (reader) {
    try {
      source(dict);
      // Every tensor of the model, as it is, and nothing else.
      std::vector<model::NamedTensor> all = model.named_parameters();
      all.insert(all.end(), buffers.begin(), buffers.end());
      decision = checkpoint::check_into(dict, "", all, load_rule_).ok() ? "root" : "all";
    } catch (const std::exception& e) {
      failed = std::current_exception();
      decision = std::string("error\n") + e.what();
    }
  }
  decision = world_.broadcast_string(decision);
  if (failed) std::rethrow_exception(failed);
  if (decision.rfind("error\n", 0) == 0)
    throw host::HostError(RH_ERROR_IO, "rank 0 could not read the model tensors of " + what +
                                           " (its log says why): " + decision.substr(6));
  if (decision == "all") {  // what is missing or different is reported on every rank
    if (!reader) source(dict);
    return load_model(dict, model, sharded);
  }
  each_unit(model, RH_UNIT_PARAMS_ROOT_PREPARE, RH_UNIT_PARAMS_ROOT_ADOPT,
            [&](std::vector<model::NamedTensor>& unit) {
              if (reader) checkpoint::load_into(dict, "", unit, load_rule_);
            });
  if (reader) checkpoint::load_into(dict, "", buffers, load_rule_);
  std::vector<at::Tensor> values;
  for (const auto& b : buffers) values.push_back(b.tensor);
  world_.broadcast_tensors(values);
  if (reader)
    spdlog::info("{}: read by rank 0 alone; every rank received its shards through {}", what,
                 strategy_.what());
  return {};
}

// Into the model as built (before Wrap), or through the strategy one unit at
// a time (load_phase after_wrap: it takes the whole values into its shards).
// `sharded`: parameters the strategy rebuilds from its masters (resume()):
// neither read nor reported.
checkpoint::LoadReport RunCheckpoints::load_model(const rh_StateDict& dict, model::Model& model,
                                                  const std::vector<std::string>& sharded) {
  std::vector<model::NamedTensor> targets = model.named_parameters();
  std::vector<model::NamedTensor> buffers = model.named_buffers();
  targets.insert(targets.end(), buffers.begin(), buffers.end());
  if (!sharded.empty()) {
    // Only the other tensors are read here, into the model as it is.
    const std::set<std::string> skip(sharded.begin(), sharded.end());
    std::vector<model::NamedTensor> whole;
    for (const auto& t : targets)
      if (skip.count(t.name) == 0) whole.push_back(t);
    rh_StateDict rest;
    for (const auto& [key, e] : dict.entries)
      if (skip.count(key) == 0) rest.entries[key] = e;
    return checkpoint::load_into(rest, "", whole, load_rule_);
  }
  if (!loads_after_wrap()) return checkpoint::load_into(dict, "", targets, load_rule_);
  checkpoint::LoadReport report;
  std::set<std::string> names;
  for (const auto& t : targets) names.insert(t.name);
  for (const auto& [key, e] : dict.entries)
    if (e.is_tensor && names.count(key) == 0) report.unexpected.push_back(key);
  auto merge = [&](const checkpoint::LoadReport& r) {
    report.missing.insert(report.missing.end(), r.missing.begin(), r.missing.end());
    report.mismatched.insert(report.mismatched.end(), r.mismatched.begin(), r.mismatched.end());
    report.converted.insert(report.converted.end(), r.converted.begin(), r.converted.end());
  };
  each_unit(model, RH_UNIT_PARAMS_GATHER, RH_UNIT_PARAMS_ADOPT,
            [&](std::vector<model::NamedTensor>& params) {
              merge(checkpoint::load_into(dict, "", params, load_rule_));
            });
  merge(checkpoint::load_into(dict, "", buffers, load_rule_));
  return report;
}

RunProgress RunCheckpoints::resume(const fs::path& dir, optim::OptimWrapper& optim,
                                   c10::Device device, const DataPosition& data) {
  const checkpoint::CheckpointMeta meta = checkpoint::read_current_meta(dir);
  resumed_strategy_ = meta.strategy;
  resumed_state_ = rh_StateDict{};
  rh_StateDict& state_dict = resumed_state_;
  store_.load(dir, "state", state_dict);
  const checkpoint::LoopState loop = checkpoint::parse_loop_state(
      checkpoint::get_text(state_dict, "loop"), (dir / "state").string() + " (its \"loop\" entry)");
  resume_optimizer(dir, meta, optim);
  RunProgress p = resume_progress(loop, data);
  resume_grad_scaler(state_dict, dir);
  if (loop.world_size != world_.size() && world_.rank() == 0)
    spdlog::info(
        "resume: {} was written by {} rank(s) with strategy {}; resharded to {} rank(s) "
        "with {}",
        dir.string(), loop.world_size, meta.strategy, world_.size(), strategy_.what());
  resume_generators(state_dict, loop.world_size, device);
  return p;
}

// The optimizer's state, resharded to this run's parameters (resume(), job 1).
void RunCheckpoints::resume_optimizer(const fs::path& dir, const checkpoint::CheckpointMeta& meta,
                                      optim::OptimWrapper& optim) {
  const std::string what = "checkpoint " + dir.string();
  // The optimizer's state, resharded: each of this rank's parameters (or
  // shards of them) takes its range of every logical "optim.<param>.<field>"
  // (a state of another size, the step, whole), and its fp32 master values
  // from "master.<param>" when the checkpoint has them.
  const checkpoint::ShardReader reader(store_, dir, meta.tensors);
  std::vector<checkpoint::ShardReader::Request> requests;
  std::map<std::string, const optim::OptimParam*> masters;
  // Parameters the run that wrote the checkpoint did not optimize (frozen
  // there, or fsdp's ignored_modules): no optimizer entry at all. Their
  // state starts afresh, with a warning; one whose writer optimized it
  // (meta.json's optimizer_params) but saved no state is an error below.
  std::set<std::string> fresh;
  for (const auto& p : optim.params()) {
    const std::string prefix = "optim." + p.name + ".";
    const auto first = meta.tensors.lower_bound(prefix);
    bool any = false;
    for (auto it = first;
         it != meta.tensors.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
      any = any || it->first.find('.', prefix.size()) == std::string::npos;
    const bool optimized_there =
        meta.optimizer_params &&
        std::find(meta.optimizer_params->begin(), meta.optimizer_params->end(), p.name) !=
            meta.optimizer_params->end();
    if (!any && meta.tensors.count("master." + p.name) == 0 && !optimized_there)
      fresh.insert(p.name);
  }
  if (!fresh.empty() && world_.rank() == 0)
    spdlog::warn(
        "resume: {} has no optimizer state for '{}'{}: the run that wrote it did not optimize "
        "{} (frozen there, or fsdp's ignored_modules){}; {} state starts afresh",
        dir.string(), *fresh.begin(),
        fresh.size() > 1 ? " and " + std::to_string(fresh.size() - 1) + " more" : std::string(),
        fresh.size() > 1 ? "them" : "it",
        meta.optimizer_params ? std::string()
                              : std::string(" (or lost it: this checkpoint does not record "
                                            "which parameters its writer optimized)"),
        fresh.size() > 1 ? "their" : "its");
  // Tensor parallel: a split parameter's shard (its block, or a sharding
  // strategy's shard of it) is a range of the whole tensor, or within the
  // whole rows read (key -> the range and the shard's shape: this rank's
  // columns kept).
  std::map<std::string, std::pair<TensorParallelPlan::WholeRange, std::vector<int64_t>>> tp_rows;
  for (const auto& p : optim.params()) {
    const int64_t tp_dim = tp_ != nullptr ? tp_->split_dim(p.name) : -1;
    const std::vector<int64_t> full =
        tp_dim >= 0 ? tp_->whole_shape(full_shape(p), tp_dim) : full_shape(p);
    const std::vector<int64_t> shard = shape_of(p.param.sizes());
    TensorParallelPlan::WholeRange range{p.full_offset, p.param.numel(), 0};
    if (tp_dim >= 0)
      range = tp_->whole_range(full_shape(p), tp_dim, p.full_offset, p.param.numel());
    // The request for this rank's shard of a logical tensor of the
    // parameter's whole shape.
    auto shard_request = [&](const std::string& logical, const std::string& key) {
      if (range.rows == 0)
        return checkpoint::ShardReader::Request{logical, range.offset, range.numel, shard, key};
      tp_rows[key] = {range, shard};
      return checkpoint::ShardReader::Request{logical, range.offset, range.numel, std::nullopt,
                                              key};
    };
    auto mismatch = [&](const std::string& logical, const checkpoint::LogicalTensor& t) {
      std::ostringstream msg;
      msg << what << " does not match the model: '" << logical << "' is "
          << at::IntArrayRef(t.shape) << ", parameter '" << p.name << "' is "
          << at::IntArrayRef(full);
      return host::HostError(RH_ERROR_FAILED_PRECONDITION, msg.str());
    };
    const std::string prefix = "optim." + p.name + ".";
    for (auto it = meta.tensors.lower_bound(prefix);
         it != meta.tensors.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      const std::string field = it->first.substr(prefix.size());
      if (field.find('.') != std::string::npos) continue;  // another parameter's ("a" vs "a.b")
      const checkpoint::LogicalTensor& t = it->second;
      const std::string key = p.name + "." + field;
      if (!t.shape.empty() && t.numel() != 1 && t.shape != full) throw mismatch(it->first, t);
      if (t.shape == full && !full.empty())
        requests.push_back(shard_request(it->first, key));
      else
        requests.push_back(reader.whole(it->first, key));
    }
    const auto m = meta.tensors.find("master." + p.name);
    if (m != meta.tensors.end()) {
      if (m->second.shape != full) throw mismatch(m->first, m->second);
      requests.push_back(shard_request(m->first, m->first));
      masters[m->first] = &p;
    } else if (strategy_.traits().sharded_model_state != 0) {
      throw host::HostError(RH_ERROR_FAILED_PRECONDITION,
                            what + " has no values for parameter '" + p.name + "' (no 'master." +
                                p.name + "'), which " + strategy_.what() + " rebuilds from them");
    }
  }
  rh_StateDict optim_dict;
  reader.read(requests, optim_dict);
  // The state takes the memory it was read into (no second copy).
  std::vector<std::string> state_keys;
  for (const auto& [key, e] : optim_dict.entries)
    if (masters.count(key) == 0) state_keys.push_back(key);
  std::vector<model::NamedTensor> optim_state;
  for (const std::string& key : state_keys) {
    at::Tensor t = checkpoint::take_tensor(optim_dict, key);
    if (const auto r = tp_rows.find(key); r != tp_rows.end())
      t = tp_->own_of_rows(t, r->second.first).view(r->second.second);
    optim_state.push_back({key, t});
  }
  try {
    optim.load_state_tensors(optim_state, /*adopt=*/true, fresh);
  } catch (const std::invalid_argument& e) {
    throw host::HostError(RH_ERROR_FAILED_PRECONDITION,
                          "cannot resume from " + dir.string() + ": " + e.what());
  }
  {
    torch::NoGradGuard no_grad;
    for (const auto& [key, p] : masters) {
      at::Tensor value = checkpoint::get_tensor(optim_dict, key);
      if (const auto r = tp_rows.find(key); r != tp_rows.end())
        value = tp_->own_of_rows(value, r->second.first).view(r->second.second);
      // The masters are float32; a parameter of another dtype (an unsharded
      // strategy's bf16 weights) has its value from the model file.
      if (value.scalar_type() == p->param.scalar_type()) p->param.copy_(value);
    }
  }
}

// The loop counters, with the data position in this run's batching
// (resume(), job 2).
RunProgress RunCheckpoints::resume_progress(const checkpoint::LoopState& loop,
                                            const DataPosition& data) {
  RunProgress p;
  p.epochs_done = loop.epochs_done;
  p.iters_done = loop.iters_done;
  p.skipped_steps = loop.skipped_steps;
  p.global_batch = data.global_batch;
  // The data position in samples of the epoch's global order: the same
  // samples come next whatever the world size and per-rank batch.
  const int64_t inner = loop.inner_done;
  const int64_t saved_batch = loop.global_batch;
  const int64_t samples = loop.samples_in_epoch >= 0 ? loop.samples_in_epoch : inner * saved_batch;
  if (data.global_batch <= 0 ||
      (saved_batch == data.global_batch && samples == inner * saved_batch)) {
    p.inner_done = inner;
  } else if (samples % data.global_batch == 0) {
    p.inner_done = samples / data.global_batch;
    if (world_.rank() == 0)
      spdlog::info(
          "resume: {} sample(s) of epoch {} were done in global batches of {}; this run "
          "takes {} per iteration and continues at batch {}",
          samples, p.epochs_done, saved_batch, data.global_batch, p.inner_done);
  } else {
    // The epoch continues at the next unseen sample; its batches are
    // numbered so that it still ends at batches_per_epoch.
    const int64_t left = data.batches_from(samples);
    p.inner_done = data.batches_per_epoch - left;
    p.sample_shift = samples - p.inner_done * data.global_batch;
    if (world_.rank() == 0)
      spdlog::info(
          "resume: {} sample(s) of epoch {} were done in global batches of {}; this run "
          "takes {} per iteration and continues at sample {} ({} batch(es) left in the "
          "epoch)",
          samples, p.epochs_done, saved_batch, data.global_batch, samples, left);
  }
  return p;
}

// This rank's generators (resume(), job 3).
void RunCheckpoints::resume_generators(const rh_StateDict& state_dict, int64_t saved_world,
                                       c10::Device device) {
  const int64_t world_size = world_.size();
  // This rank's row of the generators' states. Another world size: rank r
  // takes row r where there is one; the others keep their seeded generator.
  auto row = [&](const char* key) -> std::optional<at::Tensor> {
    at::Tensor t = checkpoint::get_tensor(state_dict, key);
    if (t.dim() != 2) return t.contiguous().clone();
    if (world_.rank() >= t.size(0)) return std::nullopt;
    return t[world_.rank()].contiguous().clone();
  };
  if (saved_world != world_size && world_.rank() == 0)
    spdlog::info(
        "resume: the checkpoint has the generators of {} rank(s); each of this run's "
        "ranks below {} continues its row, the others keep their seeded generators",
        saved_world, saved_world);
  at::Generator rng = at::detail::getDefaultCPUGenerator();  // a handle to the global generator
  if (auto state = row("rng.cpu")) {
    std::lock_guard<std::mutex> lock(rng.mutex());
    rng.set_state(*state);
  }
  if (device.is_cuda() && state_dict.entries.count("rng.cuda") != 0) {
    if (auto state = row("rng.cuda")) {
      at::Generator cuda_rng = at::globalContext().defaultGenerator(device);
      std::lock_guard<std::mutex> lock(cuda_rng.mutex());
      cuda_rng.set_state(*state);
    }
  }
}

void RunCheckpoints::resume_grad_scaler(const rh_StateDict& state_dict, const fs::path& dir) {
  const bool saved = state_dict.entries.count(kAmpScale) != 0;
  if (grad_scaler_ == nullptr) {
    if (saved && world_.rank() == 0)
      spdlog::info("resume: {} was written with AmpOptimWrapper; this run trains without it",
                   dir.string());
    return;
  }
  if (!saved) {
    if (world_.rank() == 0)
      spdlog::info(
          "resume: {} has no loss scaler state (written without AmpOptimWrapper): the scale "
          "starts at {}",
          dir.string(), grad_scaler_->scale());
    return;
  }
  optim::GradScalerState amp;
  amp.scale = checkpoint::get_tensor(state_dict, kAmpScale).item<double>();
  amp.growth_tracker = state_dict.entries.count(kAmpGrowthTracker) != 0
                           ? checkpoint::get_tensor(state_dict, kAmpGrowthTracker).item<int64_t>()
                           : 0;
  try {
    if (!grad_scaler_->load_state(amp) && world_.rank() == 0)
      spdlog::warn(
          "resume: {} counted {} clean step(s) towards the loss scale's next growth, as many as "
          "or more than this job's loss_scale.growth_interval ({}): the count restarts at 0",
          dir.string(), amp.growth_tracker, grad_scaler_->options().growth_interval);
  } catch (const std::invalid_argument& e) {
    throw host::HostError(RH_ERROR_FAILED_PRECONDITION,
                          "cannot resume from " + dir.string() + ": " + e.what());
  }
}

void RunCheckpoints::finish_resume(const fs::path& dir) {
  hooks_.after_load(resumed_state_, dir.string());
  if (strategy_.has_state_import()) {
    rh_StateDict own;
    if (resumed_strategy_ == strategy_.type()) {
      for (const auto& [key, e] : resumed_state_.entries)
        if (key.rfind("strategy.", 0) == 0) own.entries[key.substr(9)] = e;
    } else if (world_.rank() == 0) {
      spdlog::info("resume: {} was written by strategy '{}'; {} starts its own state afresh",
                   dir.string(), resumed_strategy_, strategy_.what());
    }
    strategy_.state_import(own);
  }
  resumed_state_ = rh_StateDict{};
}

}  // namespace rh::lifecycle
