#include "lifecycle/RunCheckpoints.hpp"

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
#include "launch/WorkerEnv.hpp"
#include "lifecycle/HookDispatcher.hpp"
#include "lifecycle/RunCheckpointsParts.hpp"
#include "lifecycle/World.hpp"
#include "model/Model.hpp"
#include "optim/GradScaler.hpp"
#include "optim/OptimWrapper.hpp"

namespace fs = std::filesystem;

namespace rh::lifecycle {
namespace ckpt {

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

}  // namespace ckpt

using namespace ckpt;  // RunCheckpointsParts.hpp

bool RunCheckpoints::through_strategy() const { return strategy_.has_unit_params(); }

bool RunCheckpoints::loads_after_wrap() const {
  return strategy_.traits().load_phase == RH_LOAD_AFTER_WRAP && tp_ == nullptr;
}

// Calls fn(params) for every unit's parameters between UnitParams(first)
// and UnitParams(then), every rank in the same order: one unit whole at a
// time (a sharded model is never whole on any rank).
void RunCheckpoints::each_unit(model::Model& model, rh_UnitParamsOp first, rh_UnitParamsOp then,
                               const std::function<void(std::vector<model::NamedTensor>&)>& fn) {
  auto groups = params_by_unit(model);
  for (size_t g = 0; g < groups.size(); ++g) {
    const bool tied = g + 1 == groups.size();
    if (tied && groups[g].empty()) break;
    const int32_t unit = tied ? -1 : static_cast<int32_t>(g);
    strategy_.unit_params(unit, first);
    fn(groups[g]);
    strategy_.unit_params(unit, then);
  }
}

RunCheckpoints::RunCheckpoints(const config::Node& job, const config::JobSettings& settings,
                               const RunnerOptions& opt, checkpoint::CheckpointStore& store,
                               World& world, HookDispatcher& hooks,
                               host::StrategyInstance& strategy, std::string checkpoint_io_type)
    : job_(job),
      settings_(settings),
      opt_(opt),
      store_(store),
      world_(world),
      hooks_(hooks),
      strategy_(strategy),
      checkpoint_io_type_(std::move(checkpoint_io_type)),
      timeout_s_(settings.dist.timeout_s) {}

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
  optimizer_params_.emplace(names.begin(), names.end());
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
  const std::string value = r == nullptr || r->is_null() ? "false" : r->as_string();
  const bool auto_resume = value == "true" || value == "True" || value == "auto";
  // A restarted job (runner-host --max-restarts, torchrun's restarts, a
  // requeued SLURM job) goes on from where it was: the newest valid
  // checkpoint of work_dir, whatever `resume` says; `resume` applies when
  // there is none yet. One look at work_dir serves both.
  const launch::DistEnv& env = world_.env();
  const bool restarted = env.job_restart > 0;
  if (restarted || auto_resume) {
    std::vector<std::string> skipped;
    std::optional<fs::path> dir = store_.find_resumable(&skipped);
    for (const auto& s : skipped) spdlog::warn("resume: skipping invalid checkpoint {}", s);
    if (restarted && dir)
      spdlog::info(
          "resume: restart {} of the job ({}={}): resuming from the newest valid "
          "checkpoint, {}",
          env.job_restart, env.job_restart_from, env.job_restart, dir->string());
    else if (restarted)
      spdlog::info("resume: restart {} of the job ({}={}) and no checkpoint in {} yet",
                   env.job_restart, env.job_restart_from, env.job_restart,
                   store_.work_dir().string());
    if (dir) return dir;
    if (auto_resume) {
      spdlog::info("resume: no checkpoint in {}; starting from scratch",
                   store_.work_dir().string());
      return std::nullopt;
    }
  }
  if (value == "false" || value == "False") return std::nullopt;
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

}  // namespace rh::lifecycle
