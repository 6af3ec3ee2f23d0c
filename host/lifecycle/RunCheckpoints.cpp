#include "lifecycle/RunCheckpoints.hpp"

#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "checkpoint/CheckpointStore.hpp"
#include "checkpoint/TensorDict.hpp"
#include "config/ConfigNode.hpp"
#include "lifecycle/HookDispatcher.hpp"
#include "lifecycle/World.hpp"
#include "model/Model.hpp"
#include "optim/OptimWrapper.hpp"
#include "plugins/ComponentFactory.hpp"
#include "plugins/HostError.hpp"

namespace fs = std::filesystem;

namespace rh::lifecycle {
namespace {

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

void check(const host::StrategyInstance& s, const char* step, rh_Error* err) {
  host::throw_if_error(err, s.what() + " " + step);
}

// Sharded checkpoints: the optimizer tensor's own value beside its state.
constexpr const char* kShardValueSuffix = ".param";

std::string optimizer_stem(int rank, bool sharded) {
  return sharded ? "optimizer.rank" + std::to_string(rank) : "optimizer";
}

std::string shape_json(at::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
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
    check(strategy_, "UnitParams", vt.UnitParams(strategy_.handle(), unit, first));
    fn(groups[g]);
    check(strategy_, "UnitParams", vt.UnitParams(strategy_.handle(), unit, then));
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
      checkpoint_io_type_(std::move(checkpoint_io_type)) {}

// ---- Save ----------------------------------------------------------------------

void RunCheckpoints::save(const std::string& name, const RunProgress& progress, model::Model& model,
                          optim::OptimWrapper& optim, c10::Device device) {
  const fs::path dir = store_.work_dir() / name;
  const int rank = world_.rank();
  const int world_size = world_.size();
  rh_StateDict model_dict, optim_dict, state_dict;
  std::string tensors_json;
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
  auto add_model = [&](const std::vector<model::NamedTensor>& list) {
    for (const auto& t : list) {
      const bool shard = shard_only.count(t.name) != 0;
      if (!shard) checkpoint::put_tensor(model_dict, t.name, t.tensor);
      std::ostringstream shape;
      shape << t.tensor.sizes();
      tensors_json += (tensors_json.empty() ? "" : ", ") + std::string("\"") + json_escape(t.name) +
                      "\": {\"shape\": \"" + shape.str() + "\", \"dtype\": \"" +
                      std::string(c10::toString(t.tensor.scalar_type())) + "\"" +
                      (shard ? ", \"sharded\": true" : "") + "}";
    }
  };
  if (!shard_only.empty()) {
    // Nothing gathered: rank 0 writes what is whole on every rank.
    if (writer) add_model(model.named_parameters());
  } else if (through_strategy()) {
    // A sharded model comes to rank 0 one unit at a time.
    each_unit(model, RH_UNIT_PARAMS_GATHER, RH_UNIT_PARAMS_RELEASE,
              [&](std::vector<model::NamedTensor>& params) {
                if (writer) add_model(params);
              });
  } else if (writer) {
    add_model(model.named_parameters());
  }
  if (writer) add_model(model.named_buffers());
  // Sharded: every rank writes its optimizer state and the values of its
  // optimizer tensors (the fp32 master shards) to optimizer.rank<r>; meta.json
  // records where each shard lies in its parameter.
  std::string shards_json;
  if (sharded) {
    for (const auto& t : optim.state_tensors())
      checkpoint::put_tensor(optim_dict, t.name, t.tensor);
    std::string mine;
    for (const auto& p : optim.params()) {
      checkpoint::put_tensor(optim_dict, p.name + kShardValueSuffix, p.param);
      mine += std::string(mine.empty() ? "" : ", ") + "\"" + json_escape(p.name) +
              "\": {\"full_shape\": " +
              shape_json(p.full_shape.empty() ? p.param.sizes() : at::IntArrayRef(p.full_shape)) +
              ", \"offset\": " + std::to_string(p.full_offset) +
              ", \"numel\": " + std::to_string(p.param.numel()) + "}";
    }
    const std::vector<std::string> all = world_.gather_strings(mine);
    for (size_t r = 0; r < all.size(); ++r)
      shards_json += std::string(r ? ",\n    " : "\n    ") + "{" + all[r] + "}";
  } else if (writer) {
    for (const auto& t : optim.state_tensors())
      checkpoint::put_tensor(optim_dict, t.name, t.tensor);
  }
  checkpoint::put_text(state_dict, "loop",
                       "{\"epochs_done\": " + std::to_string(progress.epochs_done) +
                           ", \"iters_done\": " + std::to_string(progress.iters_done) +
                           ", \"inner_done\": " + std::to_string(progress.inner_done) +
                           ", \"world_size\": " + std::to_string(world_size) + "}");
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
    check(strategy_, "StateExport", vt.StateExport(strategy_.handle(), &own));
    for (auto& [key, e] : own.entries) state_dict.entries["strategy." + key] = std::move(e);
  }
  hooks_.before_save(state_dict, dir.string());
  std::string files_json = "\"model\", ";
  if (sharded)
    for (int r = 0; r < world_size; ++r) files_json += "\"" + optimizer_stem(r, true) + "\", ";
  else
    files_json += "\"optimizer\", ";
  files_json += "\"state\"";
  const std::string meta =
      "{\n  \"format_version\": 1,\n  \"runner\": \"runner-host " + opt_.runner_version +
      "\",\n  \"name\": \"" + json_escape(name) +
      "\",\n  \"epoch\": " + std::to_string(progress.epochs_done) +
      ",\n  \"iter\": " + std::to_string(progress.iters_done) +
      ",\n  \"world_size\": " + std::to_string(world_size) + ",\n  \"strategy\": \"" +
      json_escape(strategy_.type()) + "\",\n  \"checkpoint_io\": \"" +
      json_escape(checkpoint_io_type_) + "\",\n  \"files\": [" + files_json +
      "],\n  \"tensors\": {" + tensors_json + "}" +
      (shard_only.empty() ? std::string() : ",\n  \"model_state\": \"sharded\"") +
      (sharded ? ",\n  \"optimizer_shards\": [" + shards_json + "\n  ]" : std::string()) +
      ",\n  \"config\": \"" + json_escape(opt_.config_yaml) + "\"\n}\n";
  // Rank 0 writes (every rank holds the same state under ddp); all ranks
  // learn whether it worked, so none goes on past a failed save.
  rh_ErrorCode code = RH_ERROR_OK;
  std::string failure;
  const std::string own_stem = optimizer_stem(rank, sharded);
  if (writer) {
    bool told = !sharded || world_size == 1;  // the other ranks know where to write
    try {
      store_.save(name, {{"model", &model_dict}, {own_stem, &optim_dict}, {"state", &state_dict}},
                  meta, [&](const fs::path& tmp) {
                    if (told) return;
                    told = true;
                    world_.broadcast_string(tmp.string());
                    const std::vector<bool> failed = world_.gather_flags(false);
                    std::string ranks;
                    for (size_t r = 0; r < failed.size(); ++r)
                      if (failed[r]) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
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
      world_.gather_flags(true);
    }
  } else if (sharded) {
    const std::string tmp = world_.broadcast_string("");
    bool failed = tmp.empty();
    if (!tmp.empty()) {
      try {
        store_.write_files(tmp, {{own_stem, &optim_dict}});
      } catch (const std::exception& e) {
        spdlog::error("checkpoint '{}': rank {} could not write {}: {}", name, rank, own_stem,
                      e.what());
        failed = true;
      }
    }
    world_.gather_flags(failed);
  }
  code = static_cast<rh_ErrorCode>(world_.broadcast_int(static_cast<int64_t>(code)));
  if (!writer && code != RH_ERROR_OK)
    failure = "rank 0 failed to save checkpoint '" + name + "' (its log says why)";
  if (code != RH_ERROR_OK) throw host::HostError(code, failure);
  last_saved_iter_ = progress.iters_done;
  spdlog::info("saved checkpoint {}", dir.string());
  hooks_.after_save(dir.string());
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
    const std::vector<std::string> sharded = checkpoint::read_meta(*resume_dir).sharded_tensors;
    if (!sharded.empty() && (!resuming_training || strategy_.traits().sharded_model_state == 0))
      throw host::HostError(
          RH_ERROR_FAILED_PRECONDITION,
          "cannot " + std::string(resuming_training ? "resume" : "evaluate") + " from " +
              resume_dir->string() +
              ": its trainable parameters were saved only as per-rank shards (fsdp "
              "state_dict_type: sharded), which " +
              (resuming_training ? strategy_.what() + " does not read back"
                                 : std::string("only a training resume reads back")) +
              "; resume it with the same fsdp settings, or save with state_dict_type: full");
    checkpoint::LoadReport report = read_model(*resume_dir, "model", model, sharded);
    if (!report.ok())
      throw host::HostError(
          RH_ERROR_FAILED_PRECONDITION,
          "checkpoint " + resume_dir->string() + " does not match the model:" + report.str());
    spdlog::info("resume: loaded model weights from {}", resume_dir->string());
    return;
  }
  const config::Node* lf = job_.find("load_from");
  if (lf == nullptr || lf->is_null()) return;
  const config::Node* path_node = lf->is_map() ? lf->find("path") : lf;
  const bool strict = lf->is_map() && lf->find("strict") ? lf->find("strict")->as_bool() : true;
  fs::path path = path_node->as_string();
  if (path.is_relative()) path = opt_.job_dir / path;
  // A checkpoint directory (its model file) or a single weights file.
  if (!fs::exists(path))
    throw config::ConfigError(path_node->location(), path_node->path(),
                              "no such file or directory: " + path.string());
  fs::path dir = path, stem = "model";
  if (!fs::is_directory(path)) {
    // (Another checkpoint IO plugin names its own files.)
    if (checkpoint_io_type_ == "safetensors" && path.extension() != ".safetensors")
      throw config::ConfigError(
          path_node->location(), path_node->path(),
          path.string() + " is neither a checkpoint folder nor a .safetensors file");
    dir = path.parent_path();
    stem = path.stem();
  }
  if (fs::is_directory(path) && !checkpoint::read_meta(path).sharded_tensors.empty())
    throw config::ConfigError(path_node->location(), path_node->path(),
                              path.string() +
                                  " holds its trainable parameters only as per-rank shards (fsdp "
                                  "state_dict_type: sharded); load_from needs whole weights: "
                                  "resume from it instead, or save with state_dict_type: full");
  checkpoint::LoadReport report = read_model(dir, stem.string(), model, {});
  if (!report.ok()) {
    if (strict || !report.mismatched.empty())
      throw host::HostError(
          RH_ERROR_FAILED_PRECONDITION,
          "load_from " + path.string() + " does not match the model:" + report.str());
    spdlog::warn("load_from {} (strict: false):{}", path.string(), report.str());
  }
  spdlog::info("loaded weights from {}", path.string());
}

// The model file `stem` of `dir` into the model. With the strategy's
// load_from_root trait only rank 0 reads it, when it holds every tensor of
// the model as it is: per unit rank 0 writes the whole values and the
// strategy hands every rank its shards (ROOT_PREPARE / ROOT_ADOPT); the
// buffers are broadcast. Otherwise every rank reads it (load_model).
checkpoint::LoadReport RunCheckpoints::read_model(const fs::path& dir, const std::string& stem,
                                                  model::Model& model,
                                                  const std::vector<std::string>& sharded) {
  const rh_StrategyTraits t = strategy_.traits();
  const bool root = t.load_from_root != 0 && t.load_phase == RH_LOAD_AFTER_WRAP &&
                    world_.size() > 1 && sharded.empty();
  rh_StateDict dict;
  if (!root) {
    store_.load(dir, stem, dict);
    return load_model(dict, model, sharded);
  }
  const bool reader = world_.rank() == 0;
  std::vector<model::NamedTensor> buffers = model.named_buffers();
  std::string decision;  // rank 0 -> all: "root", "all" or "error\n<message>"
  std::exception_ptr failed;
  if (reader) {
    try {
      store_.load(dir, stem, dict);
      // Every tensor of the model, as it is, and nothing else.
      std::vector<model::NamedTensor> all = model.named_parameters();
      all.insert(all.end(), buffers.begin(), buffers.end());
      decision = checkpoint::check_into(dict, "", all).ok() ? "root" : "all";
    } catch (const std::exception& e) {
      failed = std::current_exception();
      decision = std::string("error\n") + e.what();
    }
  }
  decision = world_.broadcast_string(decision);
  if (failed) std::rethrow_exception(failed);
  if (decision.rfind("error\n", 0) == 0)
    throw host::HostError(RH_ERROR_IO, "rank 0 could not read " + (dir / stem).string() +
                                           " (its log says why): " + decision.substr(6));
  if (decision == "all") {  // what is missing or different is reported on every rank
    if (!reader) store_.load(dir, stem, dict);
    return load_model(dict, model, sharded);
  }
  each_unit(model, RH_UNIT_PARAMS_ROOT_PREPARE, RH_UNIT_PARAMS_ROOT_ADOPT,
            [&](std::vector<model::NamedTensor>& unit) {
              if (reader) checkpoint::load_into(dict, "", unit);
            });
  if (reader) checkpoint::load_into(dict, "", buffers);
  std::vector<at::Tensor> values;
  for (const auto& b : buffers) values.push_back(b.tensor);
  world_.broadcast_tensors(values);
  if (reader)
    spdlog::info("{}: read by rank 0 alone; every rank received its shards through {}",
                 (dir / stem).string(), strategy_.what());
  return {};
}

// Into the model as built (before Wrap), or through the strategy one unit at
// a time (load_phase after_wrap: it takes the whole values into its shards).
checkpoint::LoadReport RunCheckpoints::load_model(const rh_StateDict& dict, model::Model& model,
                                                  const std::vector<std::string>& sharded) {
  std::vector<model::NamedTensor> targets = model.named_parameters();
  std::vector<model::NamedTensor> buffers = model.named_buffers();
  targets.insert(targets.end(), buffers.begin(), buffers.end());
  if (!sharded.empty()) {
    // The shards come with the optimizer's state (resume()); the strategy
    // rebuilds its parameters from them (StateImport). Only the whole
    // tensors are read here, into the model as it is.
    const std::set<std::string> skip(sharded.begin(), sharded.end());
    std::vector<model::NamedTensor> whole;
    for (const auto& t : targets)
      if (skip.count(t.name) == 0) whole.push_back(t);
    checkpoint::LoadReport report = checkpoint::load_into(dict, "", whole);
    for (const auto& t : targets)
      if (skip.count(t.name) != 0 && dict.entries.count(t.name) != 0)
        report.unexpected.push_back(t.name);
    return report;
  }
  if (strategy_.traits().load_phase != RH_LOAD_AFTER_WRAP)
    return checkpoint::load_into(dict, "", targets);
  checkpoint::LoadReport report;
  std::set<std::string> names;
  for (const auto& t : targets) names.insert(t.name);
  for (const auto& [key, e] : dict.entries)
    if (e.is_tensor && names.count(key) == 0) report.unexpected.push_back(key);
  auto merge = [&](const checkpoint::LoadReport& r) {
    report.missing.insert(report.missing.end(), r.missing.begin(), r.missing.end());
    report.mismatched.insert(report.mismatched.end(), r.mismatched.begin(), r.mismatched.end());
  };
  each_unit(model, RH_UNIT_PARAMS_GATHER, RH_UNIT_PARAMS_ADOPT,
            [&](std::vector<model::NamedTensor>& params) {
              merge(checkpoint::load_into(dict, "", params));
            });
  merge(checkpoint::load_into(dict, "", buffers));
  return report;
}

RunProgress RunCheckpoints::resume(const fs::path& dir, optim::OptimWrapper& optim,
                                   c10::Device device) {
  rh_StateDict optim_dict;
  resumed_state_ = rh_StateDict{};
  rh_StateDict& state_dict = resumed_state_;
  store_.load(dir, "state", state_dict);
  YAML::Node loop = YAML::Load(checkpoint::get_text(state_dict, "loop"));
  // The data position counts batches of this world's sampler split: with
  // another world size it would name other samples.
  // (Checkpoints written before the world size was recorded are not checked.)
  const int64_t world_size = world_.size();
  const int64_t saved_world = loop["world_size"] ? loop["world_size"].as<int64_t>() : world_size;
  if (saved_world != world_size)
    throw host::HostError(
        RH_ERROR_FAILED_PRECONDITION,
        "cannot resume from " + dir.string() + ": it was written by a world of " +
            std::to_string(saved_world) + " rank(s), this run has " + std::to_string(world_size) +
            " (resuming needs the same world size; load_from: <checkpoint> starts from its "
            "weights instead)");
  const bool sharded = strategy_.traits().sharded_checkpoint != 0;
  const std::string stem = optimizer_stem(world_.rank(), sharded);
  const std::vector<std::string> files = checkpoint::read_meta(dir).files;
  if (std::find(files.begin(), files.end(), stem) == files.end())
    throw host::HostError(
        RH_ERROR_FAILED_PRECONDITION,
        "cannot resume from " + dir.string() + ": it has no '" + stem + "' (" +
            (sharded ? "written by a strategy that does not shard its optimizer state; "
                     : "written with sharded optimizer state; ") +
            strategy_.what() +
            " resumes only checkpoints of its own layout; load_from: <checkpoint> starts from "
            "its weights instead)");
  store_.load(dir, stem, optim_dict);
  std::vector<model::NamedTensor> optim_state;
  std::map<std::string, at::Tensor> values;  // sharded: the optimizer tensors' own values
  const std::string suffix = kShardValueSuffix;
  for (const auto& [key, e] : optim_dict.entries) {
    if (!e.is_tensor) continue;
    if (sharded && key.size() > suffix.size() &&
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0)
      values[key.substr(0, key.size() - suffix.size())] = checkpoint::get_tensor(optim_dict, key);
    else
      optim_state.push_back({key, checkpoint::get_tensor(optim_dict, key)});
  }
  optim.load_state_tensors(optim_state);
  if (sharded) {
    torch::NoGradGuard no_grad;
    for (const auto& p : optim.params()) {
      const auto it = values.find(p.name);
      if (it == values.end() || it->second.sizes() != p.param.sizes() ||
          it->second.scalar_type() != p.param.scalar_type())
        throw host::HostError(RH_ERROR_FAILED_PRECONDITION,
                              "cannot resume from " + dir.string() + ": " + stem + " has " +
                                  (it == values.end() ? "no value" : "another shape or dtype") +
                                  " for shard '" + p.name + "' of rank " +
                                  std::to_string(world_.rank()) +
                                  " (written with another shard layout)");
      p.param.copy_(it->second);
    }
  }
  RunProgress p;
  p.epochs_done = loop["epochs_done"].as<int64_t>();
  p.iters_done = loop["iters_done"].as<int64_t>();
  p.inner_done = loop["inner_done"].as<int64_t>();
  // This rank's row of the generators' states (a 1-D state: a checkpoint of
  // runner-host 0.1, which saved rank 0's for every rank).
  auto row = [&](const char* key) {
    at::Tensor t = checkpoint::get_tensor(state_dict, key);
    return (t.dim() == 2 ? t[world_.rank()] : t).contiguous().clone();
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
  return p;
}

void RunCheckpoints::finish_resume(const fs::path& dir) {
  hooks_.after_load(resumed_state_, dir.string());
  const auto& vt = strategy_.vtable();
  if (vt.StateImport) {
    rh_StateDict own;
    for (const auto& [key, e] : resumed_state_.entries)
      if (key.rfind("strategy.", 0) == 0) own.entries[key.substr(9)] = e;
    check(strategy_, "StateImport", vt.StateImport(strategy_.handle(), &own));
  }
  resumed_state_ = rh_StateDict{};
}

}  // namespace rh::lifecycle
