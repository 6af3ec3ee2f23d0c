// The gloo backend: CPU tensors over TCP, through the Gloo library itself
// (libgloo-dev), rendezvoused through the run's c10d store. all_reduce,
// reduce_scatter and all_gather go through shared memory instead when every
// member is on this host (ShmAllReduce.hpp); over TCP:
//
//   all_reduce      our ring over gloo's unbound buffers, in place
//                   (reduce-scatter + all-gather phases, 4 MiB segments,
//                   two in flight; ring_all_reduce says why not gloo's,
//                   GlooRings.hpp);
//                   up to 1 KiB over all ranks, one all-gather and the
//                   sum in rank order (small_all_reduce)
//   reduce_scatter  our ring over gloo's unbound buffers (GlooRings.hpp): every rank
//                   sends and receives (P-1)/P of the input once, half of
//                   what an all-reduce moves. Gloo's ReduceScatterHalvingDoubling
//                   is not used: it reduces in place into the input, runs the
//                   old bound-buffer API (new buffers and a handshake per
//                   call), needs extra steps off powers of two and has no
//                   bfloat16.
//   all_gather      gloo::allgather (ring)
//   broadcast       gloo::broadcast (binomial tree)
//   barrier         gloo::barrier
//
// Each communicator runs its collectives in issue order, one at a time, but
// for two all-reduces over TCP on different bytes, which may run together
// (GlooCommunicator::run); every wait inside gloo is bounded by the
// rendezvous timeout.
#include <gloo/allgather.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/types.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>

#include "comm/Backends.hpp"
#include "comm/CommInternal.hpp"
#include "comm/GlooRendezvous.hpp"
#include "comm/GlooRings.hpp"
#include "comm/Heartbeat.hpp"
#include "comm/Reduce.hpp"
#include "comm/ShmAllReduce.hpp"

namespace rh::comm::detail {
namespace {

using Millis = std::chrono::milliseconds;

// "[file:line] message" -> "message".
std::string strip_location(const std::string& what) {
  if (!what.empty() && what[0] == '[') {
    size_t end = what.find("] ");
    if (end != std::string::npos) return what.substr(end + 2);
  }
  return what;
}

bool mentions_timeout(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text.find("timed out") != std::string::npos || text.find("timeout") != std::string::npos;
}

size_t checked_bytes(const Buffer& b, size_t es, const char* what) {
  if (b.count > SIZE_MAX / es)
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT, std::string(what) + ": count too large");
  if (b.count > 0 && b.data == nullptr)
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT, std::string(what) + ": NULL data");
  return b.count * es;
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

// What the world and its groups share.
struct Shared {
  StorePtr store;
  std::shared_ptr<gloo::transport::Device> device;
  Millis timeout;
  double timeout_s;
  int global_rank;
  std::string rendezvous_at;  // "host:port" of the store, for messages
  bool shared_memory = true;  // RendezvousOptions::shared_memory
  // Every rank's pulse (Heartbeat.hpp): a failure that names no rank asks it
  // which ranks stopped, and on which host. Null in a world of one.
  std::shared_ptr<Heartbeat> heartbeat;
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<Shared> shared, std::string prefix, std::vector<int> members,
                   int rank, int size, bool is_world)
      : shared_(std::move(shared)),
        prefix_(std::move(prefix)),
        members_(std::move(members)),
        rank_(rank),
        size_(size) {
    who_.global_rank = shared_->global_rank;
    if (!is_world) who_.group_ranks = members_;
    if (size_ > 1) connect();
    // A second thread only where two collectives may overlap (over TCP).
    const size_t threads = size_ > 1 && !shm_ ? kMaxInFlight : 1;
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
  }

  ~GlooCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string all_reduce_transport() const override { return shm_ ? "shared memory" : "tcp ring"; }

  std::shared_ptr<Work> all_reduce(Buffer b, ReduceOp op, bool async) override {
    const char* what = "all_reduce";
    check_cpu(b, what);
    const size_t es = element_size(b.dtype, what);
    checked_bytes(b, es, what);
    ReduceFn fn = reduce_function(b.dtype, op, what);
    if (b.count == 0 || size_ == 1) return submit(what, nullptr, async);
    // Over TCP two all-reduces may be in flight at once (run()): a bucket's
    // ring need not wait for the one before it to end.
    Range range;
    if (!shm_) range = {static_cast<const uint8_t*>(b.data), b.count * es};
    return submit_tagged(
        what,
        [this, b, es, fn, op](uint32_t tag) {
          // avg divides each rank's values first, then sums: how ddp averages
          // (gradients pre-divided by the world size, then summed), so a
          // strategy averaging with RH_REDUCE_AVG rounds as ddp does.
          if (op == ReduceOp::Avg) divide_in_place(b.data, b.count, b.dtype, size_);
          if (shm_) {
            shm_->all_reduce(b.data, b.count, es, fn);
          } else {
            const size_t bytes = b.count * es;
            if (bytes * static_cast<size_t>(size_) <= kSmallAllReduceBytes)
              small_all_reduce(context_, static_cast<uint8_t*>(b.data), b.count, es, fn,
                               shared_->timeout, tag);
            else
              ring_all_reduce(context_, static_cast<uint8_t*>(b.data), b.count, es, fn,
                              shared_->timeout, tag);
          }
        },
        range, async);
  }

  std::shared_ptr<Work> all_gather(Buffer in, Buffer out, bool async) override {
    const char* what = "all_gather";
    check_cpu(in, what);
    check_cpu(out, what);
    check_same_dtype(in, out, what);
    const size_t es = element_size(in.dtype, what);
    const size_t in_bytes = checked_bytes(in, es, what);
    const size_t out_bytes = checked_bytes(out, es, what);
    if (in.count > SIZE_MAX / static_cast<size_t>(size_) ||
        out.count != in.count * static_cast<size_t>(size_))
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            std::string(what) + ": output has " + std::to_string(out.count) +
                                " elements, expected " + std::to_string(size_) + " x " +
                                std::to_string(in.count) + " (size() x input)");
    auto* own_slot = static_cast<uint8_t*>(out.data) + static_cast<size_t>(rank_) * in_bytes;
    const bool in_place = in.data == own_slot;
    if (!in_place && overlaps(in.data, in_bytes, out.data, out_bytes))
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            std::string(what) +
                                ": input overlaps the output (only input == this rank's slot "
                                "of the output is allowed)");
    if (in.count == 0) return submit(what, nullptr, async);
    if (size_ == 1)
      return submit(
          what, [=] { std::memmove(out.data, in.data, in_bytes); }, async);
    return submit(
        what,
        [this, in, out, in_bytes, out_bytes, es, in_place] {
          if (shm_) {
            shm_->all_gather(in.data, out.data, in.count, es);
            return;
          }
          gloo::AllgatherOptions opts(context_);
          if (!in_place) opts.setInput(static_cast<uint8_t*>(in.data), in_bytes);
          opts.setOutput(static_cast<uint8_t*>(out.data), out_bytes);
          opts.setTimeout(shared_->timeout);
          gloo::allgather(opts);
        },
        async);
  }

  std::shared_ptr<Work> reduce_scatter(Buffer in, Buffer out, ReduceOp op, bool async) override {
    const char* what = "reduce_scatter";
    check_cpu(in, what);
    check_cpu(out, what);
    check_same_dtype(in, out, what);
    const size_t es = element_size(in.dtype, what);
    const size_t in_bytes = checked_bytes(in, es, what);
    const size_t out_bytes = checked_bytes(out, es, what);
    if (out.count > SIZE_MAX / static_cast<size_t>(size_) ||
        in.count != out.count * static_cast<size_t>(size_))
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            std::string(what) + ": input has " + std::to_string(in.count) +
                                " elements, expected " + std::to_string(size_) + " x " +
                                std::to_string(out.count) + " (size() x output)");
    ReduceFn fn = reduce_function(in.dtype, op, what);
    if (out.count == 0) return submit(what, nullptr, async);
    const bool overlap = overlaps(in.data, in_bytes, out.data, out_bytes);
    if (size_ == 1)
      return submit(
          what, [=] { std::memmove(out.data, in.data, out_bytes); }, async);
    return submit(
        what,
        [this, in, out, in_bytes, out_bytes, es, fn, op, overlap] {
          const auto* src = static_cast<const uint8_t*>(in.data);
          // The ring accumulates in `out`, so it needs a copy of an input that
          // `out` overlaps; shared memory writes each piece of `out` after it
          // copied that piece in, which is enough when `out` is our chunk.
          const bool own_chunk = src + static_cast<size_t>(rank_) * out_bytes == out.data;
          // avg: the input divided first (a copy: the input is const), as
          // all_reduce does.
          std::unique_ptr<uint8_t[]> copy;
          if (op == ReduceOp::Avg || (overlap && !(shm_ && own_chunk))) {
            copy.reset(new uint8_t[in_bytes]);
            std::memcpy(copy.get(), src, in_bytes);
            if (op == ReduceOp::Avg) divide_in_place(copy.get(), in.count, in.dtype, size_);
            src = copy.get();
          }
          if (shm_)
            shm_->reduce_scatter(src, out.data, out.count, es, fn);
          else
            ring_reduce_scatter(context_, src, static_cast<uint8_t*>(out.data), out_bytes, es, fn,
                                shared_->timeout);
        },
        async);
  }

  std::shared_ptr<Work> broadcast(Buffer b, int root, bool async) override {
    const char* what = "broadcast";
    check_cpu(b, what);
    const size_t es = element_size(b.dtype, what);
    const size_t bytes = checked_bytes(b, es, what);
    if (root < 0 || root >= size_)
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            std::string(what) + ": root " + std::to_string(root) +
                                " is not in [0, " + std::to_string(size_) + ")");
    if (b.count == 0 || size_ == 1) return submit(what, nullptr, async);
    return submit(
        what,
        [this, b, bytes, root] {
          gloo::BroadcastOptions opts(context_);
          opts.setOutput(static_cast<uint8_t*>(b.data), bytes);
          opts.setRoot(root);
          opts.setTimeout(shared_->timeout);
          gloo::broadcast(opts);
        },
        async);
  }

  void barrier() override {
    submit(
        "barrier",
        [this] {
          if (size_ == 1) return;
          gloo::BarrierOptions opts(context_);
          opts.setTimeout(shared_->timeout);
          gloo::barrier(opts);
        },
        false);
  }

  std::unique_ptr<Communicator> new_group(const std::vector<int>& ranks) override {
    check_group_ranks(ranks, size_);
    const int n = groups_made_.fetch_add(1);
    auto it = std::find(ranks.begin(), ranks.end(), rank_);
    if (it == ranks.end()) return nullptr;
    std::vector<int> members;
    members.reserve(ranks.size());
    for (int r : ranks) members.push_back(members_[static_cast<size_t>(r)]);
    return std::make_unique<GlooCommunicator>(
        shared_, prefix_ + "/g" + std::to_string(n), std::move(members),
        static_cast<int>(it - ranks.begin()), static_cast<int>(ranks.size()), false);
  }

 private:
  // The bytes an overlappable collective works on; data == nullptr: the
  // collective runs alone.
  struct Range {
    const uint8_t* data = nullptr;
    size_t bytes = 0;
  };
  struct Task {
    const char* name;
    std::string step;
    std::function<void(uint32_t)> fn;  // gets the tag; empty: nothing to exchange
    std::shared_ptr<PromiseWork> work;
    uint32_t tag = 0;  // the issue count: the same collective has the same on every rank
    Range range;
  };
  // Under mutex_: whether `t` may start now. Alone when nothing runs; an
  // overlappable one beside one other overlappable one whose bytes it does
  // not share.
  bool can_start(const Task& t) const {
    if (running_.empty()) return true;
    if (t.range.data == nullptr || running_.size() >= kMaxInFlight) return false;
    for (const auto& [tag, r] : running_)
      if (r.data == nullptr || overlaps(r.data, r.bytes, t.range.data, t.range.bytes)) return false;
    return true;
  }

  void connect() {
    auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    context->setTimeout(shared_->timeout);
    GlooStore store(shared_->store, prefix_ + "/", shared_->timeout);
    try {
      context->connectFullMesh(store, shared_->device);
      // Its rendezvous goes through the same store: failures read the same.
      if (shared_->shared_memory) connect_shared_memory(store);
    } catch (const std::exception& e) {
      const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
      std::string detail =
          strip_location(c10_error ? c10_error->what_without_backtrace() : e.what());
      bool timed_out = mentions_timeout(detail);
      std::string text;
      if (who_.group_ranks.empty())
        text = "rendezvous at " + shared_->rendezvous_at +
               (timed_out ? " timed out after " + format_seconds(shared_->timeout_s) + " s"
                          : " failed") +
               " on rank " + std::to_string(who_.global_rank) + " of " + std::to_string(size_) +
               (timed_out ? " (did all " + std::to_string(size_) +
                                " ranks start, with the same MASTER_ADDR and MASTER_PORT?)"
                          : ": " + detail);
      else
        text =
            who_.describe("new_group") +
            (timed_out ? " timed out after " + format_seconds(shared_->timeout_s) + " s"
                       : " failed") +
            " on " + who_.where() +
            (timed_out ? " (did every rank call new_group with the same ranks?)" : ": " + detail);
      throw host::HostError(timed_out ? RH_ERROR_TIMEOUT : RH_ERROR_IO, text);
    }
    context_ = std::move(context);
  }

  // Collective like connect(): every member learns the same answer.
  void connect_shared_memory(GlooStore& store) {
    ShmRendezvous kv{[&](const std::string& key, const std::string& value) {
                       store.set(key, std::vector<char>(value.begin(), value.end()));
                     },
                     [&](const std::string& key) {
                       std::vector<char> v = store.get(key);
                       return std::string(v.begin(), v.end());
                     }};
    std::string why_not;
    shm_ = ShmAllReduce::connect(kv, rank_, size_, members_, ShmAllReduce::host_identity(),
                                 shared_->timeout, &why_not);
    // Which transport this communicator (the world, or a strategy's group)
    // uses, once, by its first rank: shared memory inside a host, TCP when a
    // member is on another.
    if (rank_ == 0) {
      if (shm_)
        spdlog::info(
            "{}: all_reduce, reduce_scatter and all_gather through shared memory ({} "
            "ranks on this host)",
            who_.describe("communicator"), size_);
      else
        spdlog::info("{}: all_reduce, reduce_scatter and all_gather over TCP ({})",
                     who_.describe("communicator"), why_not);
    }
  }

  void check_cpu(const Buffer& b, const char* what) const {
    if (b.device.device_type != kDLCPU && b.device.device_type != kDLCUDAHost)
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            std::string(what) + ": the gloo communicator takes CPU tensors, got " +
                                device_name(b.device) + " (use dist.backend 'nccl' for CUDA)");
  }
  static void check_same_dtype(const Buffer& a, const Buffer& b, const char* what) {
    if (!same_dtype(a.dtype, b.dtype))
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT, std::string(what) + ": input is " +
                                                           dtype_name(a.dtype) + ", output is " +
                                                           dtype_name(b.dtype));
  }

  std::shared_ptr<Work> submit(const char* name, std::function<void()> fn, bool async) {
    std::function<void(uint32_t)> tagged;
    if (fn) tagged = [fn = std::move(fn)](uint32_t) { fn(); };
    return submit_tagged(name, std::move(tagged), Range{}, async);
  }

  // `range`: the bytes of a collective that may run beside another one
  // (can_start); {} for one that runs alone.
  std::shared_ptr<Work> submit_tagged(const char* name, std::function<void(uint32_t)> fn,
                                      Range range, bool async) {
    auto work = std::make_shared<PromiseWork>();
    std::string step = step_description();  // the caller's function: not under our lock
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const uint32_t tag = next_tag_++;
      if (!failure_.empty()) {
        work->set_done(std::make_exception_ptr(cancelled_error(who_, name, step, failure_)));
      } else {
        queue_.push_back(Task{name, std::move(step), std::move(fn), work, tag, range});
      }
    }
    cv_.notify_all();
    if (!async) work->wait();
    return work;
  }

  // Each of the threads: the collectives in issue order, one at a time, but
  // for two TCP all-reduces on different bytes, which may run together
  // (can_start), each on its own slots. PyTorch's ProcessGroupGloo runs two
  // at once likewise; on 2 simulated hosts sharing 2 cores, ddp's 1 MB
  // bucket waiting for the 4 MB one before it cost ~2.5 ms a step.
  void run() {
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] {
          return (stop_ && queue_.empty()) || (!queue_.empty() && can_start(queue_.front()));
        });
        if (queue_.empty()) return;  // stopping, nothing left
        task = std::move(queue_.front());
        queue_.pop_front();
        running_.emplace_back(task.tag, task.range);
      }
      // Done before it leaves running_: a collective that waited for it to
      // end starts after its Work reads as completed (issue order, seen
      // from the caller).
      task.work->set_done(run_task(task));
      {
        std::lock_guard<std::mutex> lock(mutex_);
        running_.erase(std::find_if(running_.begin(), running_.end(),
                                    [&](const auto& r) { return r.first == task.tag; }));
      }
      cv_.notify_all();
    }
  }

  // Runs one collective; its error, converted, or null.
  std::exception_ptr run_task(Task& task) {
    std::exception_ptr error;
    {
      std::string failure;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        failure = failure_;
      }
      if (!failure.empty()) {
        error = std::make_exception_ptr(cancelled_error(who_, task.name, task.step, failure));
      } else if (task.fn) {
        try {
          task.fn(task.tag);
        } catch (const host::HostError& e) {
          error = std::current_exception();
          failure = e.what();
        } catch (const std::exception& e) {
          std::string detail = strip_location(e.what());
          // Gloo's TCP timeouts name no peer ("Timed out waiting 3000ms for
          // send operation to complete"); with two members the peer can only
          // be the other one. (Shared memory names the rank it waited for.)
          if (size_ == 2 && mentions_timeout(detail) && detail.find("rank ") == std::string::npos)
            detail += " (waiting for rank " +
                      std::to_string(members_[static_cast<size_t>(1 - rank_)]) +
                      ", the other member)";
          // A failure that names no peer (gloo over TCP: "Connection closed
          // by peer", a timeout on more than 2 members): which ranks stopped
          // beating, and where.
          if (shared_->heartbeat && detail.find("rank ") == std::string::npos) {
            const std::string lost = shared_->heartbeat->explain_loss();
            if (!lost.empty()) detail += "; " + lost;
          }
          auto converted = collective_error(who_, task.name, mentions_timeout(detail),
                                            shared_->timeout_s, task.step, detail);
          failure = converted.what();
          error = std::make_exception_ptr(converted);
        }
        if (error) {
          std::lock_guard<std::mutex> lock(mutex_);
          if (failure_.empty()) failure_ = failure;
        }
      }
    }
    return error;
  }

  std::shared_ptr<Shared> shared_;
  std::string prefix_;
  std::vector<int> members_;  // global rank of each rank of this communicator
  int rank_;
  int size_;
  Identity who_;
  std::shared_ptr<gloo::Context> context_;  // null when size_ == 1
  std::unique_ptr<ShmAllReduce> shm_;       // null: all_reduce, reduce_scatter, all_gather over TCP
  std::atomic<int> groups_made_{0};

  // At most this many collectives at once (two TCP all-reduces; can_start).
  static constexpr size_t kMaxInFlight = 2;
  std::mutex mutex_;  // guards queue_, running_, next_tag_, stop_, failure_
  std::condition_variable cv_;
  std::deque<Task> queue_;
  std::vector<std::pair<uint32_t, Range>> running_;  // tag and bytes of each running collective
  uint32_t next_tag_ = 0;
  bool stop_ = false;
  std::string failure_;  // first failure: later collectives are cancelled
  std::vector<std::thread> threads_;
};

}  // namespace

std::unique_ptr<Communicator> create_gloo_world(StorePtr store, const RendezvousOptions& o) {
  auto shared = std::make_shared<Shared>();
  shared->store = std::move(store);
  shared->timeout = Millis(static_cast<int64_t>(o.timeout_s * 1000.0));
  shared->timeout_s = o.timeout_s;
  shared->global_rank = o.rank;
  shared->rendezvous_at = o.master_addr + ":" + std::to_string(o.master_port);
  shared->shared_memory = o.shared_memory;
  if (o.world_size > 1) shared->device = make_device(o);
  if (o.world_size > 1) shared->heartbeat = std::make_shared<Heartbeat>(o);
  std::vector<int> members(static_cast<size_t>(o.world_size));
  for (int i = 0; i < o.world_size; ++i) members[static_cast<size_t>(i)] = i;
  return std::make_unique<GlooCommunicator>(std::move(shared), "rh/gloo", std::move(members),
                                            o.rank, o.world_size, true);
}

}  // namespace rh::comm::detail
