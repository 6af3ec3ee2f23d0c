// The backend-independent parts of the communicator: step descriptions,
// messages, PromiseWork, and create_world (the c10d TCPStore rendezvous).
#include "comm/Communicator.hpp"

#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <sstream>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "comm/Backends.hpp"
#include "comm/CommInternal.hpp"
#include "comm/TcpStore.hpp"

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

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

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
std::string ranks_text(const std::vector<int>& ranks) { return "[" + rank_list(ranks) + "]"; }
std::string with_step(const std::string& step) { return step.empty() ? "" : " " + step; }
}  // namespace

std::string Identity::describe(const char* collective) const {
  if (group_ranks.empty()) return collective;
  return std::string(collective) + " on group " + ranks_text(group_ranks);
}

std::string Identity::where() const { return "rank " + std::to_string(global_rank); }

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
std::string text_of(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

std::string what_of(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  return c10_error ? c10_error->what_without_backtrace() : e.what();
}

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "?";
  return name;
}

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
  const bool any_port = o.master_port == 0 && o.world_size == 1 && o.rank0_hosts_store;
  if ((o.master_port < 1 && !any_port) || o.master_port > 65535)
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

namespace {

using StorePtr = c10::intrusive_ptr<c10d::Store>;
using detail::bytes_of;
using detail::text_of;
using detail::what_of;

// Where rank 0 says which job the store serves: "<id>\n<description>".
// Outside every job's prefix, so that a rank of another job can read it.
constexpr const char* kJobKey = "runner-host/job";

bool address_in_use(const std::string& what) {
  return what.find("Address already in use") != std::string::npos ||
         what.find("errno: 98") != std::string::npos ||
         what.find(std::strerror(EADDRINUSE)) != std::string::npos;
}

// How to give the job another port, for the messages below.
constexpr const char* kOtherPort =
    "Give this job a port of its own with --master-port PORT (or MASTER_PORT, or "
    "dist.master_port in the job); on one node, leave them all unset and the launcher picks a "
    "free port";

// Rank 0 publishes the job; every other rank checks that the store is its
// job's. Then every key carries the job id, and rank 0 waits until every
// rank joined (as TCPStore's waitWorkers did, but only for this job's ranks).
StorePtr join_job(StorePtr store, const RendezvousOptions& o, const std::string& at,
                  const std::chrono::milliseconds timeout) {
  const std::string who = "rank " + std::to_string(o.rank) + " of " + std::to_string(o.world_size);
  if (o.rank == 0) {
    store->set(kJobKey, bytes_of(o.job_id + "\n" + o.job_description + "\n" +
                                 std::to_string(getpid()) + "\n" + detail::this_host()));
  } else {
    try {
      store->wait({kJobKey}, timeout);
    } catch (const std::exception& e) {
      const std::string what = what_of(e);
      if (!mentions_timeout(what)) throw;
      throw host::HostError(
          RH_ERROR_TIMEOUT,
          "rendezvous at " + at + " timed out after " + detail::format_seconds(o.timeout_s) +
              " s on " + who +
              ": the store there never said which job it serves (rank 0 of a runner-host job "
              "says so as soon as it listens: is another program's store on that port?): " +
              what);
    }
    const std::string record = text_of(store->get(kJobKey));
    std::vector<std::string> fields;
    size_t start = 0;
    while (fields.size() < 3) {
      const size_t nl = record.find('\n', start);
      if (nl == std::string::npos) break;
      fields.push_back(record.substr(start, nl - start));
      start = nl + 1;
    }
    fields.push_back(record.substr(start));
    if (fields[0] != o.job_id) {
      const std::string theirs = fields.size() > 1 && !fields[1].empty()
                                     ? fields[1]
                                     : "job " + (fields[0].empty() ? "(no id)" : fields[0]);
      const std::string rank0 =
          fields.size() > 3 ? " (its rank 0 is pid " + fields[2] + " on host " + fields[3] + ")"
                            : "";
      const std::string mine = o.job_description.empty() ? "job " + o.job_id : o.job_description;
      throw host::HostError(
          RH_ERROR_FAILED_PRECONDITION,
          who + " of " + mine + " reached the rendezvous store at " + at +
              " of another job: " + theirs + rank0 +
              ". It stops instead of joining that job. The two jobs were given the same port" +
              (o.master_port_from.empty() ? std::string()
                                          : " (this one's from " + o.master_port_from + ")") +
              ". " + kOtherPort);
    }
  }
  StorePtr job = std::move(store);
  if (!o.job_id.empty())
    job = c10::make_intrusive<c10d::PrefixStore>("runner-host/job/" + o.job_id, std::move(job));
  // Each rank claims its place. A place claimed already means two jobs
  // with one id share this store (ranks started by hand with the same
  // MASTER_ADDR:MASTER_PORT and nothing else to tell the jobs apart): the
  // second to come stops rather than mix its messages into the other's.
  if (job->add("joined/" + std::to_string(o.rank), 1) != 1)
    throw host::HostError(
        RH_ERROR_FAILED_PRECONDITION,
        who + " of " + (o.job_description.empty() ? "job " + o.job_id : o.job_description) +
            " found its place in the rendezvous store at " + at +
            " taken: another process joined as " + who +
            " already. Two jobs with the same job id share this store: give each its own port "
            "(--master-port, MASTER_PORT or dist.master_port) or its own RH_JOB_ID");
  if (o.rank != 0) return job;
  std::vector<std::string> joined;
  for (int r = 1; r < o.world_size; ++r) joined.push_back("joined/" + std::to_string(r));
  if (joined.empty()) return job;
  try {
    job->wait(joined, timeout);
  } catch (const std::exception& e) {
    const std::string what = what_of(e);
    if (!mentions_timeout(what)) throw;
    std::string missing;
    try {
      for (int r = 1; r < o.world_size; ++r)
        if (!job->check({"joined/" + std::to_string(r)}))
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    } catch (const std::exception&) {
      missing.clear();
    }
    throw host::HostError(
        RH_ERROR_TIMEOUT,
        "rendezvous at " + at + " timed out after " + detail::format_seconds(o.timeout_s) +
            " s on " + who + " (rank 0 hosts the store" +
            (missing.empty() ? std::string() : "; rank(s) " + missing + " did not join") +
            ": did all ranks start, with the same MASTER_ADDR and MASTER_PORT?)");
  }
  return job;
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
  const bool hosts = o.rank == 0 && o.rank0_hosts_store;
  std::string at = o.master_addr + ":" + std::to_string(o.master_port);
  StorePtr store;
  try {
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<std::uint16_t>(o.master_port);
    opts.isServer = hosts;
    opts.numWorkers = static_cast<std::size_t>(o.world_size);
    // Not TCPStore's own wait: a rank of another job that reached this store
    // would count as one of ours. join_job() waits for this job's ranks.
    opts.waitWorkers = false;
    opts.timeout = timeout;
    std::string backend;
    auto tcp = make_tcp_store(o.master_addr, opts, &backend);
    // Which server backend (TcpStore.hpp): a world of one says so only at
    // debug level, where no other process meets it.
    if (hosts)
      spdlog::log(o.world_size > 1 ? spdlog::level::info : spdlog::level::debug,
                  "rendezvous store at {}:{}: c10d TCPStore, {} server", o.master_addr,
                  tcp->getPort(), backend);
    at = o.master_addr + ":" + std::to_string(tcp->getPort());
    store = std::move(tcp);
    if (!o.store_prefix.empty())
      store = c10::make_intrusive<c10d::PrefixStore>(o.store_prefix, std::move(store));
    store = join_job(std::move(store), o, at, timeout);
  } catch (const host::HostError&) {
    throw;
  } catch (const std::exception& e) {
    const std::string what = what_of(e);
    if (hosts && address_in_use(what))
      throw host::HostError(
          RH_ERROR_FAILED_PRECONDITION,
          "rendezvous at " + at + " failed on rank 0: port " + std::to_string(o.master_port) +
              " is taken" +
              (o.master_port_from.empty() ? std::string()
                                          : " (the port came from " + o.master_port_from + ")") +
              ": another job's rendezvous store, or another program, listens on it. " + kOtherPort +
              " (" + what + ")");
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
