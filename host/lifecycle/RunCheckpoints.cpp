#include "lifecycle/RunCheckpoints.hpp"

#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <sstream>

#include "checkpoint/BackgroundSave.hpp"
#include "checkpoint/CheckpointIndex.hpp"
#include "checkpoint/CheckpointStore.hpp"
#include "checkpoint/ShardReader.hpp"
#include "checkpoint/TensorDict.hpp"
#include "config/ConfigNode.hpp"
#include "lifecycle/HookDispatcher.hpp"
#include "lifecycle/JobKeys.hpp"
#include "lifecycle/World.hpp"
#include "model/Model.hpp"
#include "optim/GradScaler.hpp"
#include "optim/OptimWrapper.hpp"
#include "plugins/ComponentFactory.hpp"
#include "plugins/HostError.hpp"
#include "plugins/StateDict.hpp"

namespace fs = std::filesystem;

namespace rh::lifecycle {
namespace {

// Sharded checkpoints: the optimizer tensor's own value beside its state.
constexpr const char* kShardValueSuffix = ".param";
// AmpOptimWrapper's loss scaler in state.safetensors.
constexpr const char* kAmpScale = "amp.scale";
constexpr const char* kAmpGrowthTracker = "amp.growth_tracker";

std::string optimizer_stem(int rank, bool sharded) {
  return sharded ? "optimizer.rank" + std::to_string(rank) : "optimizer";
}

std::vector<int64_t> shape_of(at::IntArrayRef shape) { return {shape.begin(), shape.end()}; }

// "1, 3" for the ranks that passed true.
std::string ranks_of(const std::vector<bool>& flags) {
  std::string out;
  for (size_t r = 0; r < flags.size(); ++r)
    if (flags[r]) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

// One shard this rank writes: entry `key` of the file `file` (already in
// `dict`), elements [offset, offset + its numel) of logical tensor `tensor`;
// its checksum comes once the file is written (checkpoint::fill_checksums).
checkpoint::ShardRecord shard_record(const std::string& tensor, std::vector<int64_t> shape,
                                     const std::string& file, const rh_StateDict& dict,
                                     const std::string& key, int64_t offset) {
  const rh_StateDict::Entry& e = dict.entries.at(key);
  checkpoint::ShardRecord r;
  r.tensor = tensor;
  r.shape = std::move(shape);
  r.dtype = checkpoint::dtype_name(e.dtype);
  r.shard.file = file;
  r.shard.key = key;
  r.shard.offset = offset;
  int64_t numel = 1;
  for (int64_t d : e.shape) numel *= d;
  r.shard.numel = numel;
  return r;
}

// The parameter an optimizer state entry "<param>.<field>" belongs to.
const optim::OptimParam* state_owner(const std::map<std::string, const optim::OptimParam*>& params,
                                     const std::string& key) {
  const size_t dot = key.rfind('.');
  if (dot == std::string::npos) return nullptr;
  const auto it = params.find(key.substr(0, dot));
  return it == params.end() ? nullptr : it->second;
}

// The whole parameter's shape (a shard's full_shape).
std::vector<int64_t> full_shape(const optim::OptimParam& p) {
  return p.full_shape.empty() ? shape_of(p.param.sizes()) : p.full_shape;
}

// The model's parameters by unit, as UnitParams takes them: entry u for
// unit u (its own parameters that are not tied), the last for unit -1 (the
// tied ones).
std::vector<std::vector<model::NamedTensor>> params_by_unit(model::Model& model) {
  const std::vector<model::Unit> units = model.units();
  std::set<std::string> tied;
  for (const auto& u : units) tied.insert(u.shared_param_names.begin(), u.shared_param_names.end());
  std::map<std::string, size_t> unit_of;
  for (size_t u = 0; u < units.size(); ++u)
    for (const auto& name : units[u].param_names) unit_of[name] = u;
  std::vector<std::vector<model::NamedTensor>> out(units.size() + 1);
  for (auto& p : model.named_parameters()) {
    const auto it = unit_of.find(p.name);
    const size_t slot = tied.count(p.name) || it == unit_of.end() ? units.size() : it->second;
    out[slot].push_back(p);
  }
  return out;
}

}  // namespace

bool RunCheckpoints::through_strategy() const {
  const auto& vt = strategy_.vtable();
  return RH_STRUCT_HAS(&vt, rh_StrategyVtable, UnitParams) && vt.UnitParams != nullptr;
}

// Calls fn(params) for every unit's parameters between UnitParams(first)
// and UnitParams(then), every rank in the same order: one unit whole at a
// time (a sharded model is never whole on any rank).
void RunCheckpoints::each_unit(model::Model& model, rh_UnitParamsOp first, rh_UnitParamsOp then,
                               const std::function<void(std::vector<model::NamedTensor>&)>& fn) {
  auto groups = params_by_unit(model);
  const auto& vt = strategy_.vtable();
  for (size_t g = 0; g < groups.size(); ++g) {
    const bool tied = g + 1 == groups.size();
    if (tied && groups[g].empty()) break;
    const int32_t unit = tied ? -1 : static_cast<int32_t>(g);
    strategy_.check("UnitParams", vt.UnitParams(strategy_.handle(), unit, first));
    fn(groups[g]);
    strategy_.check("UnitParams", vt.UnitParams(strategy_.handle(), unit, then));
  }
}

RunCheckpoints::RunCheckpoints(const config::Node& job, const RunnerOptions& opt,
                               checkpoint::CheckpointStore& store, World& world,
                               HookDispatcher& hooks, host::StrategyInstance& strategy,
                               std::string checkpoint_io_type)
    : job_(job),
      opt_(opt),
      store_(store),
      world_(world),
      hooks_(hooks),
      strategy_(strategy),
      checkpoint_io_type_(std::move(checkpoint_io_type)),
      timeout_s_(job_value<double>(job, "dist.timeout_s", 300.0)) {}

RunCheckpoints::~RunCheckpoints() = default;

// ---- Set-up --------------------------------------------------------------------

void RunCheckpoints::check_optimizer_params(const optim::OptimWrapper& optim) {
  // One line per tensor: its element range of the parameter, then its name.
  std::vector<std::string> lines;
  for (const auto& p : optim.params())
    lines.push_back(std::to_string(p.full_offset) + " " + std::to_string(p.param.numel()) + " " +
                    p.name);
  std::sort(lines.begin(), lines.end());
  std::string mine;
  for (const std::string& line : lines) mine += line + "\n";
  // Every rank's, as name -> "offset numel".
  std::vector<std::map<std::string, std::string>> ranks;
  std::set<std::string> names;
  for (const std::string& list : world_.gather_strings(mine)) {
    auto& held = ranks.emplace_back();
    std::istringstream in(list);
    for (std::string line; std::getline(in, line);) {
      const size_t second = line.find(' ', line.find(' ') + 1);
      held[line.substr(second + 1)] = line.substr(0, second);
      names.insert(line.substr(second + 1));
    }
  }
  optimizer_params_json_ = "[";
  for (const std::string& name : names)
    optimizer_params_json_ +=
        (optimizer_params_json_.size() > 1 ? ", " : "") + checkpoint::json_string(name);
  optimizer_params_json_ += "]";
  if (strategy_.traits().sharded_checkpoint != 0) return;
  // Rank 0 saves the whole optimizer state: every rank must hold what it holds.
  auto some = [](const std::vector<std::string>& list) {
    std::string out;
    for (size_t i = 0; i < list.size() && i < 5; ++i) out += (i ? ", '" : "'") + list[i] + "'";
    return out + (list.size() > 5 ? ", ..." : "");
  };
  for (size_t r = 1; r < ranks.size(); ++r) {
    if (ranks[r] == ranks[0]) continue;
    std::vector<std::string> only_here, only_root, ranges;
    for (const auto& [name, range] : ranks[r]) {
      const auto root = ranks[0].find(name);
      if (root == ranks[0].end())
        only_here.push_back(name);
      else if (root->second != range)
        ranges.push_back(name);
    }
    for (const auto& [name, range] : ranks[0])
      if (ranks[r].count(name) == 0) only_root.push_back(name);
    const std::string rank = "rank " + std::to_string(r);
    std::string differs;
    if (!only_here.empty())
      differs += rank + " holds " + std::to_string(only_here.size()) + " that rank 0 does not (" +
                 some(only_here) + ")";
    if (!only_root.empty())
      differs += (differs.empty() ? "" : "; ") + std::string("rank 0 holds ") +
                 std::to_string(only_root.size()) + " that " + rank + " does not (" +
                 some(only_root) + ")";
    if (!ranges.empty())
      differs += (differs.empty() ? "" : "; ") + std::to_string(ranges.size()) +
                 " are other element ranges of their parameter on " + rank + " than on rank 0 (" +
                 some(ranges) + ")";
    throw host::HostError(
        RH_ERROR_FAILED_PRECONDITION,
        strategy_.what() +
            " hands each rank's optimizer different tensors (OptimizerParams) but does not "
            "declare the sharded_checkpoint trait: " +
            differs +
            ". Without sharded_checkpoint rank 0 alone saves the optimizer state, so a "
            "checkpoint would lose every other rank's. The strategy must declare "
            "sharded_checkpoint (every rank saves its own optimizer.rank<r>; needs "
            "OptimizerParams and UnitParams, ABI 1.3) or hand every rank the same tensors");
  }
}

// ---- Save ----------------------------------------------------------------------

void RunCheckpoints::save(const std::string& name, const RunProgress& progress, model::Model& model,
                          optim::OptimWrapper& optim, c10::Device device) {
  const auto t0 = std::chrono::steady_clock::now();
  finish_background_save();  // at most one in flight
  // The plugin only queues the writes: hand it a snapshot (copies), not the
  // live tensors, and publish in the background.
  const bool background = store_.saves_in_background();
  const fs::path dir = store_.work_dir() / name;
  const int rank = world_.rank();
  const int world_size = world_.size();
  rh_StateDict model_dict, optim_dict, state_dict;
  // Every shard this rank writes, for meta.json's tensor table (rank 0 merges
  // every rank's).
  std::vector<checkpoint::ShardRecord> records;
  const bool writer = rank == 0;  // only the writer builds CPU copies
  const bool sharded = strategy_.traits().sharded_checkpoint != 0;
  // sharded_model_state: the parameters any rank holds a shard of are saved
  // only as those shards (below); the union over the ranks, on every rank.
  std::set<std::string> shard_only;
  if (sharded && strategy_.traits().sharded_model_state != 0) {
    std::string mine;
    for (const auto& p : optim.params()) mine += p.name + "\n";
    for (const std::string& list : world_.gather_strings(mine)) {
      std::istringstream in(list);
      for (std::string n; std::getline(in, n);) shard_only.insert(n);
    }
  }
  // `lend`: the tensors stay as they are until the save ends (no copy);
  // not for a unit a strategy gathered only for the call. A background
  // save copies everything into its snapshot.
  auto add_model = [&](const std::vector<model::NamedTensor>& list, bool lend) {
    for (const auto& t : list) {
      if (shard_only.count(t.name) != 0) continue;
      if (background)
        snapshot(model_dict, "model." + t.name, t.name, t.tensor);
      else if (lend)
        checkpoint::put_tensor_view(model_dict, t.name, t.tensor);
      else
        checkpoint::put_tensor(model_dict, t.name, t.tensor);
      records.push_back(shard_record("model." + t.name, shape_of(t.tensor.sizes()), "model",
                                     model_dict, t.name, 0));
    }
  };
  if (!shard_only.empty()) {
    // Nothing gathered: rank 0 writes what is whole on every rank.
    if (writer) add_model(model.named_parameters(), true);
  } else if (through_strategy()) {
    // A sharded model comes to rank 0 one unit at a time.
    each_unit(model, RH_UNIT_PARAMS_GATHER, RH_UNIT_PARAMS_RELEASE,
              [&](std::vector<model::NamedTensor>& params) {
                if (writer) add_model(params, false);
              });
  } else if (writer) {
    add_model(model.named_parameters(), true);
  }
  if (writer) add_model(model.named_buffers(), true);
  // The optimizer's state: sharded, every rank writes its own to
  // optimizer.rank<r> with the values of its optimizer tensors (the fp32
  // master shards, "<param>.param"); else rank 0 writes it whole. Each entry
  // is a shard of its logical tensor: the parameter's range for a state of
  // the parameter's size, the whole of anything else (a step).
  const std::string own_stem = optimizer_stem(rank, sharded);
  if (sharded || writer) {
    std::map<std::string, const optim::OptimParam*> params;
    for (const auto& p : optim.params()) params[p.name] = &p;
    // Lent, not copied: nothing steps before a synchronous save ends.
    for (const auto& t : optim.state_tensors(/*copy=*/false)) {
      if (background)
        snapshot(optim_dict, "optim." + t.name, t.name, t.tensor);
      else
        checkpoint::put_tensor_view(optim_dict, t.name, t.tensor);
      const optim::OptimParam* p = state_owner(params, t.name);
      const bool like_param =
          p != nullptr && t.tensor.dim() > 0 && t.tensor.numel() == p->param.numel();
      records.push_back(
          shard_record("optim." + t.name, like_param ? full_shape(*p) : shape_of(t.tensor.sizes()),
                       own_stem, optim_dict, t.name, like_param ? p->full_offset : 0));
    }
    if (sharded)
      for (const auto& p : optim.params()) {
        const std::string key = p.name + kShardValueSuffix;
        if (background)
          snapshot(optim_dict, "master." + p.name, key, p.param);
        else
          checkpoint::put_tensor_view(optim_dict, key,
                                      p.param);  // the masters: alive until the step
        records.push_back(shard_record("master." + p.name, full_shape(p), own_stem, optim_dict, key,
                                       p.full_offset));
        if (shard_only.count(p.name) != 0)
          records.push_back(shard_record("model." + p.name, full_shape(p), own_stem, optim_dict,
                                         key, p.full_offset));
      }
  }
  checkpoint::put_text(
      state_dict, "loop",
      "{\"epochs_done\": " + std::to_string(progress.epochs_done) +
          ", \"iters_done\": " + std::to_string(progress.iters_done) +
          ", \"inner_done\": " + std::to_string(progress.inner_done) +
          ", \"global_batch\": " + std::to_string(progress.global_batch) +
          ", \"samples_in_epoch\": " + std::to_string(progress.samples_in_epoch()) +
          ", \"skipped_steps\": " + std::to_string(progress.skipped_steps) +
          ", \"world_size\": " + std::to_string(world_size) + "}");
  // AmpOptimWrapper's scaler (GradScaler.state_dict(): scale, growth
  // tracker), as tensors: the scale restores bit for bit.
  if (grad_scaler_ != nullptr && writer) {
    const optim::GradScalerState amp = grad_scaler_->state();
    checkpoint::put_tensor(state_dict, kAmpScale, at::scalar_tensor(amp.scale, at::kDouble));
    checkpoint::put_tensor(state_dict, kAmpGrowthTracker,
                           at::scalar_tensor(amp.growth_tracker, at::kLong));
  }
  // Every rank's generators (they differ with diff_rank_seed, and dropout
  // draws from them): rows of (world_size, state bytes).
  at::Tensor cpu_rng = world_.gather_rows(at::detail::getDefaultCPUGenerator().get_state());
  if (writer) checkpoint::put_tensor(state_dict, "rng.cpu", cpu_rng);
  if (device.is_cuda()) {
    at::Tensor cuda_rng =
        world_.gather_rows(at::globalContext().defaultGenerator(device).get_state());
    if (writer) checkpoint::put_tensor(state_dict, "rng.cuda", cuda_rng);
  }
  const auto& vt = strategy_.vtable();
  if (vt.StateExport) {
    rh_StateDict own;
    strategy_.check("StateExport", vt.StateExport(strategy_.handle(), &own));
    for (auto& [key, e] : own.entries) state_dict.entries["strategy." + key] = std::move(e);
  }
  hooks_.before_save(state_dict, dir.string());
  if (writer)
    for (const auto& [key, e] : state_dict.entries)
      if (e.is_tensor)
        records.push_back(shard_record("state." + key, e.shape, "state", state_dict, key, 0));
  std::string files_json = "\"model\", ";
  if (sharded)
    for (int r = 0; r < world_size; ++r) files_json += "\"" + optimizer_stem(r, true) + "\", ";
  else
    files_json += "\"optimizer\", ";
  files_json += "\"state\"";
  // meta.json around the merged tensor table (by value: a background save
  // builds it after the loop went on).
  auto make_meta = [name, progress, world_size, files_json, strategy = strategy_.type(),
                    io = checkpoint_io_type_, runner = opt_.runner_version,
                    config = opt_.config_yaml, optimizer_params = optimizer_params_json_,
                    model_sharded = !shard_only.empty()](const std::string& tensors_json) {
    using checkpoint::json_string;
    return "{\n  \"format_version\": " + std::to_string(checkpoint::kCheckpointFormatVersion) +
           ",\n  \"runner\": " + json_string("runner-host " + runner) +
           ",\n  \"name\": " + json_string(name) +
           ",\n  \"epoch\": " + std::to_string(progress.epochs_done) +
           ",\n  \"iter\": " + std::to_string(progress.iters_done) +
           ",\n  \"samples_in_epoch\": " + std::to_string(progress.samples_in_epoch()) +
           ",\n  \"world_size\": " + std::to_string(world_size) +
           ",\n  \"strategy\": " + json_string(strategy) +
           ",\n  \"checkpoint_io\": " + json_string(io) + ",\n  \"files\": [" + files_json + "]" +
           (model_sharded ? std::string(",\n  \"model_state\": \"sharded\"") : "") +
           (optimizer_params.empty() ? std::string()
                                     : ",\n  \"optimizer_params\": " + optimizer_params) +
           ",\n  \"tensors\": " + tensors_json + ",\n  \"config\": " + json_string(config) +
           "\n}\n";
  };
  if (background) {
    std::vector<std::pair<std::string, std::unique_ptr<rh_StateDict>>> files;
    auto own = [](rh_StateDict& d) { return std::make_unique<rh_StateDict>(std::move(d)); };
    if (writer) files.emplace_back("model", own(model_dict));
    if (writer || sharded) files.emplace_back(own_stem, own(optim_dict));
    if (writer) files.emplace_back("state", own(state_dict));
    start_background_save(name, progress.iters_done, std::move(files), std::move(records),
                          make_meta, sharded);
    // What the loop waited (the benchmark reads it): the previous save if
    // still in flight, the snapshot, handing the files over.
    if (writer)
      spdlog::info(
          "checkpoint {}: the loop waited {:.3f} s; written and published in the background",
          dir.string(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return;
  }
  // Each rank's records get their checksums once its files are written
  // (those the plugin computed while writing, fill_checksums); sharded, the
  // other ranks report theirs to rank 0 ("ok\n" + records, or "failed")
  // when their files are in the temporary directory, and rank 0 merges
  // every rank's into meta.json's tensor table.
  constexpr const char* kFailedReport = "failed";
  std::vector<checkpoint::ShardRecord> every;  // rank 0: the other ranks' records
  double tensor_bytes = 0;                     // every rank's, on rank 0
  rh_ErrorCode code = RH_ERROR_OK;
  std::string failure;
  if (writer) {
    bool told = !sharded || world_size == 1;  // the other ranks know where to write
    auto meta_after_files = [&]() -> std::string {
      checkpoint::fill_checksums(
          records, {{"model", &model_dict}, {own_stem, &optim_dict}, {"state", &state_dict}});
      every.insert(every.begin(), records.begin(), records.end());  // rank order: 0 first
      for (const auto& r : every)
        tensor_bytes += static_cast<double>(r.shard.numel) *
                        static_cast<double>(checkpoint::dtype_size(r.dtype));
      try {
        return make_meta(checkpoint::index_json(checkpoint::merge_records(every), "  "));
      } catch (const std::invalid_argument& e) {
        throw host::HostError(RH_ERROR_INTERNAL,
                              "checkpoint '" + name + "': the shards do not add up: " + e.what());
      }
    };
    try {
      store_.save(name, {{"model", &model_dict}, {own_stem, &optim_dict}, {"state", &state_dict}},
                  meta_after_files, [&](const fs::path& tmp) {
                    if (told) return;
                    told = true;
                    world_.broadcast_string(tmp.string());
                    const std::vector<std::string> reports = world_.gather_strings("");
                    std::vector<bool> failed(reports.size(), false);
                    for (size_t r = 1; r < reports.size(); ++r) {
                      if (reports[r].rfind("ok\n", 0) != 0) {
                        failed[r] = true;
                        continue;
                      }
                      for (auto& rec : checkpoint::decode_records(reports[r].substr(3)))
                        every.push_back(std::move(rec));
                    }
                    const std::string ranks = ranks_of(failed);
                    if (!ranks.empty())
                      throw host::HostError(RH_ERROR_IO,
                                            "rank(s) " + ranks +
                                                " could not write their optimizer shards "
                                                "of checkpoint '" +
                                                name + "' (their logs say why)");
                  });
    } catch (const host::HostError& e) {
      code = e.code();
      failure = e.what();
    } catch (const std::exception& e) {
      code = RH_ERROR_IO;
      failure = e.what();
    }
    if (!told) {  // failed before the others could write: release them
      world_.broadcast_string("");
      world_.gather_strings(kFailedReport);
    }
  } else if (sharded) {
    const std::string tmp = world_.broadcast_string("");
    std::string report = kFailedReport;
    if (!tmp.empty()) {
      try {
        store_.write_files(tmp, {{own_stem, &optim_dict}});
        checkpoint::fill_checksums(records, {{own_stem, &optim_dict}});
        report = "ok\n" + checkpoint::encode_records(records);
      } catch (const std::exception& e) {
        spdlog::error("checkpoint '{}': rank {} could not write {}: {}", name, rank, own_stem,
                      e.what());
      }
    }
    world_.gather_strings(report);
  }
  code = static_cast<rh_ErrorCode>(world_.broadcast_int(static_cast<int64_t>(code)));
  if (!writer && code != RH_ERROR_OK)
    failure = "rank 0 failed to save checkpoint '" + name + "' (its log says why)";
  if (code != RH_ERROR_OK) throw host::HostError(code, failure);
  last_saved_iter_ = progress.iters_done;
  if (writer) {
    // What a save costs the loop (the benchmark, tools/bench/bench_checkpoint.sh, reads it).
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spdlog::info("saved checkpoint {} ({:.1f} MB of tensors in {:.3f} s, {:.0f} MB/s)",
                 dir.string(), tensor_bytes / 1e6, s, tensor_bytes / 1e6 / s);
  }
  hooks_.after_save(dir.string());
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
    std::vector<checkpoint::ShardRecord> records,
    std::function<std::string(const std::string& tensors_json)> meta_json, bool sharded) {
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
  job.meta_json = std::move(meta_json);
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

void RunCheckpoints::remove(const std::string& name) {
  const std::string problem = checkpoint::CheckpointStore::name_problem(name);
  if (!problem.empty())
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT, "invalid checkpoint name: " + problem);
  if (background_) {
    removals_after_save_.push_back(name);
    return;
  }
  if (world_.rank() == 0) store_.remove(name);
}

// ---- Which checkpoint to resume from ---------------------------------------------

std::optional<fs::path> RunCheckpoints::find_resume() {
  const int rank = world_.rank();
  std::optional<fs::path> dir;
  std::string message;  // rank 0 -> all: "" (none), "ok\n<digest>\n<path>", "error"
  std::exception_ptr rank0_error;
  if (rank == 0) {
    try {
      dir = choose_resume();
      if (dir) message = "ok\n" + store_.meta_digest(*dir) + "\n" + dir->string();
    } catch (...) {
      rank0_error = std::current_exception();
      message = "error";
    }
  }
  if (world_.size() <= 1) {
    if (rank0_error) std::rethrow_exception(rank0_error);
    return dir;
  }
  message = world_.broadcast_string(message);
  if (rank0_error) std::rethrow_exception(rank0_error);
  if (message == "error")
    throw host::HostError(RH_ERROR_FAILED_PRECONDITION,
                          "rank 0 could not choose a checkpoint to resume from (its log says why)");
  if (message.empty()) return std::nullopt;
  const size_t a = message.find('\n'), b = message.find('\n', a + 1);
  const std::string digest = message.substr(a + 1, b - a - 1);
  const fs::path chosen = message.substr(b + 1);
  std::string mine;
  if (rank != 0) {
    try {
      const std::string seen = store_.meta_digest(chosen);
      if (seen != digest)
        mine = "rank " + std::to_string(rank) + " sees a different checkpoint at " +
               chosen.string() + " than rank 0 (meta.json digest " + seen + ", rank 0 has " +
               digest + ")";
    } catch (const std::exception& e) {
      mine = "rank " + std::to_string(rank) + " cannot read the checkpoint rank 0 resumes from, " +
             chosen.string() + ": " + e.what();
    }
  }
  const std::vector<bool> failed = world_.gather_flags(!mine.empty());
  std::string failed_ranks;
  for (size_t r = 0; r < failed.size(); ++r)
    if (failed[r]) failed_ranks += (failed_ranks.empty() ? "" : ", ") + std::to_string(r);
  if (!failed_ranks.empty())
    throw host::HostError(
        RH_ERROR_FAILED_PRECONDITION,
        (mine.empty() ? "rank(s) " + failed_ranks + " cannot resume from " + chosen.string() +
                            " (their logs say why)"
                      : mine) +
            "; every rank must see rank 0's work_dir (a shared file system) to resume");
  return chosen;
}

// `resume:` true/'auto' -> the newest valid checkpoint of work_dir; a path ->
// that checkpoint, which must be valid.
std::optional<fs::path> RunCheckpoints::choose_resume() {
  const config::Node* r = job_.find("resume");
  if (r == nullptr || r->is_null()) return std::nullopt;
  const std::string value = r->as_string();
  if (value == "false" || value == "False") return std::nullopt;
  if (value == "true" || value == "True" || value == "auto") {
    std::vector<std::string> skipped;
    auto dir = store_.find_resumable(&skipped);
    for (const auto& s : skipped) spdlog::warn("resume: skipping invalid checkpoint {}", s);
    if (!dir)
      spdlog::info("resume: no checkpoint in {}; starting from scratch",
                   store_.work_dir().string());
    return dir;
  }
  fs::path dir = fs::path(value).is_relative() ? opt_.job_dir / value : fs::path(value);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw config::ConfigError(r->location(), r->path(),
                              "cannot resume from " + dir.string() + ": no such directory");
  std::string why = store_.verify(dir);
  if (!why.empty())
    throw config::ConfigError(r->location(), r->path(),
                              "cannot resume from " + dir.string() + ": " + why);
  return dir;
}

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
    const bool convert = job_value<std::string>(job_, "resume_dtype", "exact") == "convert";
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
  const bool root = t.load_from_root != 0 && t.load_phase == RH_LOAD_AFTER_WRAP &&
                    world_.size() > 1 && sharded.empty();
  rh_StateDict dict;
  if (!root) {
    // Before Wrap the values go into the model's tensors as they are: the
    // checkpoint-IO plugin may read them there directly (place_into).
    if (t.load_phase != RH_LOAD_AFTER_WRAP) {
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
  if (strategy_.traits().load_phase != RH_LOAD_AFTER_WRAP)
    return checkpoint::load_into(dict, "", targets, load_rule_);
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
  YAML::Node loop = YAML::Load(checkpoint::get_text(state_dict, "loop"));
  const int64_t world_size = world_.size();
  const int64_t saved_world = loop["world_size"].as<int64_t>();
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
  for (const auto& p : optim.params()) {
    const std::vector<int64_t> full = full_shape(p);
    const std::vector<int64_t> shard = shape_of(p.param.sizes());
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
        requests.push_back({it->first, p.full_offset, p.param.numel(), shard, key});
      else
        requests.push_back(reader.whole(it->first, key));
    }
    const auto m = meta.tensors.find("master." + p.name);
    if (m != meta.tensors.end()) {
      if (m->second.shape != full) throw mismatch(m->first, m->second);
      requests.push_back({m->first, p.full_offset, p.param.numel(), shard, m->first});
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
  for (const std::string& key : state_keys)
    optim_state.push_back({key, checkpoint::take_tensor(optim_dict, key)});
  try {
    optim.load_state_tensors(optim_state, /*adopt=*/true, fresh);
  } catch (const std::invalid_argument& e) {
    throw host::HostError(RH_ERROR_FAILED_PRECONDITION,
                          "cannot resume from " + dir.string() + ": " + e.what());
  }
  {
    torch::NoGradGuard no_grad;
    for (const auto& [key, p] : masters) {
      const at::Tensor value = checkpoint::get_tensor(optim_dict, key);
      // The masters are float32; a parameter of another dtype (an unsharded
      // strategy's bf16 weights) has its value from the model file.
      if (value.scalar_type() == p->param.scalar_type()) p->param.copy_(value);
    }
  }

  RunProgress p;
  p.epochs_done = loop["epochs_done"].as<int64_t>();
  p.iters_done = loop["iters_done"].as<int64_t>();
  p.skipped_steps = loop["skipped_steps"] ? loop["skipped_steps"].as<int64_t>() : 0;
  resume_grad_scaler(state_dict, dir);
  p.global_batch = data.global_batch;
  // The data position in samples of the epoch's global order: the same
  // samples come next whatever the world size and per-rank batch.
  const int64_t inner = loop["inner_done"].as<int64_t>();
  const int64_t saved_batch = loop["global_batch"] ? loop["global_batch"].as<int64_t>() : 0;
  const int64_t samples =
      loop["samples_in_epoch"] ? loop["samples_in_epoch"].as<int64_t>() : inner * saved_batch;
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
  if (saved_world != world_size && world_.rank() == 0)
    spdlog::info(
        "resume: {} was written by {} rank(s) with strategy {}; resharded to {} rank(s) "
        "with {}",
        dir.string(), saved_world, meta.strategy, world_size, strategy_.what());
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
  return p;
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
  const auto& vt = strategy_.vtable();
  if (vt.StateImport) {
    rh_StateDict own;
    if (resumed_strategy_ == strategy_.type()) {
      for (const auto& [key, e] : resumed_state_.entries)
        if (key.rfind("strategy.", 0) == 0) own.entries[key.substr(9)] = e;
    } else if (world_.rank() == 0) {
      spdlog::info("resume: {} was written by strategy '{}'; {} starts its own state afresh",
                   dir.string(), resumed_strategy_, strategy_.what());
    }
    strategy_.check("StateImport", vt.StateImport(strategy_.handle(), &own));
  }
  resumed_state_ = rh_StateDict{};
}

}  // namespace rh::lifecycle
