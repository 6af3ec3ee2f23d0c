#include "lifecycle/World.hpp"

#include <ATen/DLConvertor.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "abi/HostApi.hpp"
#include "abi/HostError.hpp"
#include "comm/Communicator.hpp"
#include "comm/RankDevice.hpp"
#include "config/ConfigNode.hpp"
#include "job/JobSettings.hpp"
#include "launch/WorkerEnv.hpp"
#include "model/Model.hpp"

namespace rh::lifecycle {

comm::Buffer comm_buffer(const at::Tensor& t) {
  const DLDevice dev =
      t.is_cuda() ? DLDevice{kDLCUDA, static_cast<int32_t>(t.get_device())} : DLDevice{kDLCPU, 0};
  return comm::Buffer{t.data_ptr(), static_cast<size_t>(t.numel()), at::getDLDataType(t), dev};
}

// ---- PendingMean -------------------------------------------------------------

PendingMean::PendingMean(at::Tensor value, std::shared_ptr<comm::Work> work)
    : value_(std::move(value)), work_(std::move(work)) {}
PendingMean::PendingMean(at::Tensor scalar, RankFlags flags)
    : value_(std::move(scalar)),
      local_(true),
      local_counts_{flags.stop_signalled ? 1 : 0, flags.save_finished ? 1 : 0} {}
PendingMean::PendingMean(PendingMean&&) noexcept = default;

PendingMean::~PendingMean() {
  if (!work_) return;
  try {
    work_->wait();
  } catch (...) {  // the step's own error is the one to report
  }
}

std::pair<double, FlagCounts> PendingMean::get() {
  if (local_) return {value_.item<double>(), local_counts_};
  if (work_) std::exchange(work_, nullptr)->wait();
  at::Tensor v = value_.cpu();
  const double* d = v.data_ptr<double>();
  return {d[0],
          FlagCounts{static_cast<int>(std::lround(d[1])), static_cast<int>(std::lround(d[2]))}};
}

// ---- World -------------------------------------------------------------------

World::World(const config::Node& job, const config::DistCfg& dist, host::HostServices& services,
             bool needs_comm)
    : services_(services) {
  // The job's own rendezvous keys; the environment (a launcher's
  // MASTER_ADDR/MASTER_PORT, torchrun's, srun's) wins over them.
  launch::JobRendezvousKeys keys;
  keys.master_addr = dist.master_addr;
  keys.master_addr_at = dist.master_addr_at.str();
  keys.master_port = dist.master_port;
  keys.master_port_at = dist.master_port_at.str();
  launch::DistEnv env;
  try {
    env = launch::dist_env_from_environment(keys);
  } catch (const launch::JobKeyError& e) {
    const bool addr = e.key() == "dist.master_addr";
    const bool written = addr ? dist.master_addr.has_value() : dist.master_port.has_value();
    throw config::ConfigError(
        written ? (addr ? dist.master_addr_at : dist.master_port_at) : job.location(), e.key(),
        e.what());
  }
  env_ = std::make_unique<launch::DistEnv>(env);
  local_rank_ = env.local_rank;
  local_world_size_ = env.local_world_size;
  node_rank_ = env.node_rank;
  // The one rule for this rank's GPU (comm/RankDevice.hpp), shared with the
  // nccl communicator and handed to the strategy.
  const int visible =
      torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  try {
    const int cuda_index = comm::rank_cuda_device(env.rank, env.local_rank, visible);
    if (cuda_index >= 0) rank_device_ = DLDevice{kDLCUDA, cuda_index};
  } catch (const std::runtime_error& e) {
    throw host::HostError(RH_ERROR_FAILED_PRECONDITION, e.what());
  }
  if (env.world_size <= 1 && !needs_comm) return;

  comm::RendezvousOptions o;
  std::string where;  // for the log: where the rendezvous is and why
  if (env.source != "none") {
    o.rank = env.rank;
    o.world_size = env.world_size;
    o.local_rank = env.local_rank;
    o.master_addr = env.master_addr;
    o.master_port = env.master_port;
    o.master_port_from = env.master_port_from;
    o.rank0_hosts_store = !env.agent_store;
    if (env.agent_store) o.store_prefix = "/worker/attempt_" + std::to_string(env.restart_count);
    where = "at " + env.master_addr + ":" + std::to_string(env.master_port) + " (address from " +
            env.master_addr_from + ", port from " + env.master_port_from +
            (!env.agent_store           ? ""
             : env.source == "launcher" ? "; the store is the elastic launcher's"
                                        : "; the store is torchrun's agent's") +
            ")";
  } else {
    // One process: a store of its own on a port the kernel picks.
    o.master_port = 0;
    where = "on a free local port (a world of one";
    if (keys.master_addr || keys.master_port)
      where += "; dist.master_addr/dist.master_port are for several ranks";
    where += ")";
  }
  // The job's id (comm::RendezvousOptions::job_id): a rank that reaches
  // another job's store stops, naming both.
  o.job_id = env.job_id.empty() ? launch::random_job_id() : env.job_id;
  std::string origin = env.job_id.empty() ? "a single process" : env.job_origin;
  if (env.source == "launcher") origin += ", pid " + std::to_string(::getppid());
  o.job_description = "job " + o.job_id + " (" + origin;
  if (!job.location().file.empty()) o.job_description += "; config " + job.location().file;
  o.job_description += ")";
  o.timeout_s = dist.timeout_s;
  o.backend =
      dist.backend == "auto" ? (torch::cuda::is_available() ? "nccl" : "gloo") : dist.backend;
  o.shared_memory = dist.shared_memory;
  comm_ = comm::create_world(o);
  comm_device_ =
      o.backend == "nccl" && rank_device_.device_type == kDLCUDA
          ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(rank_device_.device_id))
          : c10::Device(c10::kCPU);
  rank_ = comm_->rank();
  size_ = comm_->size();
  comm_->set_step_description([this] {
    rh_RunState s = services_.run_state();
    const char* mode = s.mode == RH_MODE_TRAIN ? "train" : s.mode == RH_MODE_VAL ? "val" : "test";
    return "at " + std::string(mode) + " epoch " + std::to_string(s.epoch) + " iteration " +
           std::to_string(s.iter);
  });
  comm::install_comm_api(services_, comm_.get());
  launch::configure_rank_logging(rank_);  // only rank 0 logs at info unless RH_LOG_ALL_RANKS=1
  spdlog::info("rendezvous {}, job {}: rank {} of {} ({} backend, all_reduce through {})", where,
               o.job_id, rank_, size_, o.backend, comm_->all_reduce_transport());
  handle_ = services_.api()->Comm_World(services_.new_context("runner-host", "runner"));
}

World::~World() {
  if (!comm_) return;
  comm::install_comm_api(services_, nullptr);
  comm_.reset();
}

at::Tensor World::on_comm_device(const at::Tensor& t) const { return t.to(comm_device_); }

void World::sync_initial_weights(model::Model& model) {
  if (size_ <= 1) return;
  std::vector<model::NamedTensor> tensors = model.named_parameters();
  for (auto& b : model.named_buffers()) tensors.push_back(b);
  std::string signature;
  for (const auto& t : tensors) {
    std::ostringstream line;
    line << t.name << " " << c10::toString(t.tensor.scalar_type()) << " " << t.tensor.sizes()
         << "\n";
    signature += line.str();
  }
  // Gather every rank's signature: lengths first, then the padded bytes.
  at::Tensor lengths = gather_rows(torch::tensor({static_cast<int64_t>(signature.size())}));
  const int64_t max_len = lengths.max().item<int64_t>();
  at::Tensor mine = torch::zeros({max_len}, torch::kUInt8);
  std::memcpy(mine.data_ptr(), signature.data(), signature.size());
  at::Tensor all = gather_rows(mine);
  auto text_of = [&](int r) {
    const char* p = static_cast<const char*>(all[r].data_ptr());
    return std::string(p, static_cast<size_t>(lengths[r][0].item<int64_t>()));
  };
  const std::string reference = text_of(0);
  for (int r = 1; r < size_; ++r) {
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
  std::vector<at::Tensor> values;
  for (const auto& t : tensors) values.push_back(t.tensor);
  broadcast_tensors(values);
}

void World::broadcast_tensors(const std::vector<at::Tensor>& tensors) {
  if (size_ <= 1) return;
  torch::NoGradGuard no_grad;
  for (const auto& t : tensors) comm_->broadcast(comm_buffer(t), 0, false)->wait();
}

at::Tensor World::gather_rows(const at::Tensor& bytes) {
  at::Tensor mine = bytes.contiguous().reshape({1, -1});
  if (size_ <= 1) return mine.clone();
  at::Tensor send = on_comm_device(mine);
  at::Tensor all = on_comm_device(at::empty({size_, mine.size(1)}, mine.options()));
  comm_->all_gather(comm_buffer(send), comm_buffer(all), false)->wait();
  return all.cpu();
}

int64_t World::broadcast_int(int64_t value) {
  if (size_ <= 1) return value;
  at::Tensor t = on_comm_device(torch::tensor({value}, torch::kLong));
  comm_->broadcast(comm_buffer(t), 0, false)->wait();
  return t.cpu().item<int64_t>();
}

std::string World::broadcast_string(const std::string& text) {
  if (size_ <= 1) return text;
  const int64_t n = broadcast_int(static_cast<int64_t>(text.size()));
  if (n == 0) return "";
  at::Tensor bytes = torch::zeros({n}, torch::kUInt8);
  if (rank_ == 0) std::memcpy(bytes.data_ptr(), text.data(), text.size());
  bytes = on_comm_device(bytes);
  comm_->broadcast(comm_buffer(bytes), 0, false)->wait();
  bytes = bytes.cpu();
  return std::string(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(n));
}

std::vector<bool> World::gather_flags(bool mine) {
  at::Tensor flags =
      gather_rows(torch::tensor({static_cast<uint8_t>(mine ? 1 : 0)}, torch::kUInt8));
  std::vector<bool> out(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) out[static_cast<size_t>(r)] = flags[r][0].item<uint8_t>() != 0;
  return out;
}

std::vector<std::string> World::gather_strings(const std::string& mine) {
  if (size_ <= 1) return {mine};
  at::Tensor lengths =
      gather_rows(torch::tensor({static_cast<int64_t>(mine.size())}, torch::kLong));
  int64_t longest = 0;
  for (int r = 0; r < size_; ++r) longest = std::max(longest, lengths[r][0].item<int64_t>());
  at::Tensor bytes = torch::zeros({std::max<int64_t>(longest, 1)}, torch::kUInt8);
  std::memcpy(bytes.data_ptr(), mine.data(), mine.size());
  at::Tensor all = gather_rows(bytes).contiguous();
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r)
    out.emplace_back(reinterpret_cast<const char*>(all[r].data_ptr()),
                     static_cast<size_t>(lengths[r][0].item<int64_t>()));
  return out;
}

void World::sum(at::Tensor& totals) {
  if (size_ <= 1) return;
  at::Tensor t = on_comm_device(totals);
  comm_->all_reduce(comm_buffer(t), comm::ReduceOp::Sum, false)->wait();
  totals = t.cpu();
}

PendingMean World::start_mean(const at::Tensor& scalar, RankFlags flags) {
  // Alone: the scalar itself (a detach would make a tensor per step; the
  // caller holds the loss, and its graph, until get() anyway).
  if (size_ <= 1) return {scalar, flags};
  // A copy (the collective writes it in place), read without a device sync
  // until get(); alone, it stays where it is (a move to the CPU here would
  // wait for the GPU before backward is even queued). Each flag rides in an
  // element of its own as size (or 0): its mean is the number of ranks that
  // raised it, exact in double.
  at::Tensor t = at::empty({3}, scalar.options().dtype(at::kDouble));
  t.narrow(0, 0, 1).copy_(scalar.detach().reshape({1}));
  const double n = static_cast<double>(size_);
  t.narrow(0, 1, 1).fill_(flags.stop_signalled ? n : 0.0);
  t.narrow(0, 2, 1).fill_(flags.save_finished ? n : 0.0);
  t = on_comm_device(t);
  auto work = comm_->all_reduce(comm_buffer(t), comm::ReduceOp::Avg, true);
  return {std::move(t), std::move(work)};
}

}  // namespace rh::lifecycle
