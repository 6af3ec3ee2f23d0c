// The backend-independent parts of the communicator: step descriptions,
// messages, PromiseWork, and create_world (the c10d TCPStore rendezvous).
#include "comm/Communicator.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <csignal>
#include <sstream>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "comm/Backends.hpp"
#include "comm/CommInternal.hpp"

namespace rh::comm {

void Communicator::set_step_description(std::function<std::string()> f) {
  auto p = f ? std::make_shared<const std::function<std::string()>>(std::move(f)) : nullptr;
  std::lock_guard<std::mutex> lock(step_mutex_);
  step_description_ = std::move(p);
}

std::string Communicator::step_description() const {
  std::shared_ptr<const std::function<std::string()>> f;
  {
    std::lock_guard<std::mutex> lock(step_mutex_);
    f = step_description_;
  }
  if (!f) return {};
  try {
    return (*f)();
  } catch (...) {
    return {};
  }
}

namespace detail {

std::string dtype_name(DLDataType t) {
  if (t.lanes == 1) {
    switch (t.code) {
      case kDLFloat:
        if (t.bits == 16 || t.bits == 32 || t.bits == 64) return "float" + std::to_string(t.bits);
        break;
      case kDLBfloat:
        if (t.bits == 16) return "bfloat16";
        break;
      case kDLInt:
        if (t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64)
          return "int" + std::to_string(t.bits);
        break;
      case kDLUInt:
        if (t.bits == 8) return "uint8";
        break;
      case kDLBoolCode:
        if (t.bits == 8) return "bool";
        break;
      default:
        break;
    }
  }
  return "dtype(code=" + std::to_string(t.code) + ", bits=" + std::to_string(t.bits) +
         ", lanes=" + std::to_string(t.lanes) + ")";
}

std::string device_name(DLDevice d) {
  switch (d.device_type) {
    case kDLCPU:
      return "cpu";
    case kDLCUDA:
      return "cuda:" + std::to_string(d.device_id);
    case kDLCUDAHost:
      return "cuda_host";
    default:
      return "device(type=" + std::to_string(d.device_type) +
             ", id=" + std::to_string(d.device_id) + ")";
  }
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "?";
}

bool is_integer(DLDataType t) {
  return t.code == kDLInt || t.code == kDLUInt || t.code == kDLBoolCode;
}
bool is_bool(DLDataType t) { return t.code == kDLBoolCode; }

bool same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

size_t element_size(DLDataType t, const char* what) {
  std::string name = dtype_name(t);
  if (name.rfind("dtype(", 0) == 0)
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                          std::string(what) + ": unsupported dtype " + name +
                              " (supported: float16, bfloat16, float32, float64, int8, int16, "
                              "int32, int64, uint8, bool)");
  return t.bits / 8;
}

namespace {
std::string ranks_text(const std::vector<int>& ranks) {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < ranks.size(); ++i) s << (i ? ", " : "") << ranks[i];
  s << ']';
  return s.str();
}
std::string with_step(const std::string& step) { return step.empty() ? "" : " " + step; }
}  // namespace

std::string Identity::describe(const char* collective) const {
  if (group_ranks.empty()) return collective;
  return std::string(collective) + " on group " + ranks_text(group_ranks);
}

std::string Identity::where() const { return "rank " + std::to_string(global_rank); }

std::string format_seconds(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

host::HostError collective_error(const Identity& who, const char* collective, bool timed_out,
                                 double timeout_s, const std::string& step,
                                 const std::string& detail) {
  if (timed_out)
    return host::HostError(RH_ERROR_TIMEOUT, who.describe(collective) + " timed out after " +
                                                 format_seconds(timeout_s) + " s" +
                                                 with_step(step) + " on " + who.where() +
                                                 (detail.empty() ? "" : ": " + detail) +
                                                 " (a peer rank may have died or is stuck)");
  return host::HostError(RH_ERROR_IO, who.describe(collective) + " failed" + with_step(step) +
                                          " on " + who.where() + ": " + detail +
                                          " (a peer rank may have died)");
}

host::HostError cancelled_error(const Identity& who, const char* collective,
                                const std::string& step, const std::string& first_failure) {
  return host::HostError(RH_ERROR_CANCELLED,
                         who.describe(collective) + " not run" + with_step(step) + " on " +
                             who.where() + ": an earlier collective failed: " + first_failure);
}

void check_group_ranks(const std::vector<int>& ranks, int size) {
  if (ranks.empty())
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT, "new_group: the list of ranks is empty");
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size)
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            "new_group: rank " + std::to_string(ranks[i]) + " of " +
                                ranks_text(ranks) + " is not in [0, " + std::to_string(size) + ")");
    if (i > 0 && ranks[i] <= ranks[i - 1])
      throw host::HostError(
          RH_ERROR_INVALID_ARGUMENT,
          "new_group: ranks must be strictly ascending, got " + ranks_text(ranks));
  }
}

void PromiseWork::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool PromiseWork::completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

void PromiseWork::set_done(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

std::shared_ptr<Work> done_work() {
  auto w = std::make_shared<PromiseWork>();
  w->set_done(nullptr);
  return w;
}

}  // namespace detail

namespace {

bool mentions_timeout(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text.find("timed out") != std::string::npos || text.find("timeout") != std::string::npos;
}

void check_options(const RendezvousOptions& o) {
  auto bad = [](const std::string& m) {
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT, "create_world: " + m);
  };
  if (o.world_size < 1) bad("world_size must be >= 1, got " + std::to_string(o.world_size));
  if (o.rank < 0 || o.rank >= o.world_size)
    bad("rank " + std::to_string(o.rank) + " is not in [0, " + std::to_string(o.world_size) + ")");
  if (o.master_port < 1 || o.master_port > 65535)
    bad("master_port must be in [1, 65535], got " + std::to_string(o.master_port));
  if (o.master_addr.empty()) bad("master_addr is empty");
  if (!(o.timeout_s > 0) || !std::isfinite(o.timeout_s))
    bad("timeout_s must be a positive number of seconds, got " +
        detail::format_seconds(o.timeout_s));
  if (o.local_rank < 0) bad("local_rank must be >= 0, got " + std::to_string(o.local_rank));
  if (o.backend != "gloo" && o.backend != "nccl")
    bad("unknown backend '" + o.backend + "' (expected 'gloo' or 'nccl')");
#ifndef RH_HAVE_NCCL
  if (o.backend == "nccl")
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                          "backend 'nccl': this runner-host was built without NCCL (rebuild "
                          "with CUDA and NCCL installed, or use backend 'gloo')");
#endif
}

}  // namespace

std::unique_ptr<Communicator> create_world(const RendezvousOptions& o) {
  check_options(o);
  // A peer that dies mid-collective must surface as an error from the
  // collective ("Connection reset by peer"), not kill this rank: writing to
  // its closed socket would raise SIGPIPE, whose default action ends the
  // process (seen as exit 141 in the dead-peer test).
  std::signal(SIGPIPE, SIG_IGN);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000.0));
  const std::string at = o.master_addr + ":" + std::to_string(o.master_port);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<std::uint16_t>(o.master_port);
    opts.isServer = o.rank == 0;
    opts.numWorkers = static_cast<std::size_t>(o.world_size);
    opts.waitWorkers = true;
    opts.timeout = timeout;
    store = c10::make_intrusive<c10d::TCPStore>(o.master_addr, opts);
  } catch (const std::exception& e) {
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    std::string what = c10_error ? c10_error->what_without_backtrace() : e.what();
    if (mentions_timeout(what))
      throw host::HostError(
          RH_ERROR_TIMEOUT,
          "rendezvous at " + at + " timed out after " + detail::format_seconds(o.timeout_s) +
              " s on rank " + std::to_string(o.rank) + " of " + std::to_string(o.world_size) +
              " (rank 0 hosts the store: did all ranks start, with the same MASTER_ADDR and "
              "MASTER_PORT?): " +
              what);
    throw host::HostError(RH_ERROR_IO, "rendezvous at " + at + " failed on rank " +
                                           std::to_string(o.rank) + ": " + what);
  }
#ifdef RH_HAVE_NCCL
  if (o.backend == "nccl") return detail::create_nccl_world(std::move(store), o);
#endif
  return detail::create_gloo_world(std::move(store), o);
}

}  // namespace rh::comm
