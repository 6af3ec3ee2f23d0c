#include "data/DataLoader.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "config/ConfigNode.hpp"

namespace rh::data {
namespace {

// One batch as a worker left it: the stacked tensors or the error it hit.
struct Prepared {
  Batch batch;
  std::exception_ptr error;
};

}  // namespace

// One epoch in flight. Workers claim batch numbers in order, at most
// `prefetch` ahead of the consumer, and file each result under its number; the
// consumer takes them in order, so the sequence never depends on thread timing.
struct DataLoader::Impl {
  const Dataset& dataset;
  const LoaderOptions& options;
  DistributedSampler sampler;

  int64_t epoch = 0;            // the epoch in flight (the samples' key)
  std::vector<size_t> indices;  // this rank's indices for the epoch
  size_t base = 0;              // the batch number of indices' first batch
  size_t num_real = 0;          // real samples in indices (a prefix)
  size_t end = 0;               // batches in the epoch
  size_t next_claim = 0;        // the next batch a worker may start
  size_t next_deliver = 0;      // the next batch next() returns
  bool started = false;         // start_epoch() was called
  uint64_t generation = 0;      // start() counts; a batch of an earlier one is dropped
  size_t in_flight = 0;         // batches claimed and not yet filed
  size_t queue_depth = 0;       // batches ready at the last next()
  std::map<size_t, Prepared> ready;
  mutable std::mutex pool_mutex;         // guards pool
  mutable std::vector<at::Tensor> pool;  // reused batch inputs (buffer())
  std::mutex mutex;
  std::condition_variable work_cv;   // a worker may claim, or stop
  std::condition_variable ready_cv;  // a batch is ready
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;

  Impl(const Dataset& d, const LoaderOptions& o, int rank, int world_size)
      : dataset(d),
        options(o),
        sampler(d.size(), rank, world_size, o.shuffle, o.seed, o.drop_last) {}

  size_t batches_of(size_t n) const {
    return options.drop_last ? n / options.batch_size
                             : (n + options.batch_size - 1) / options.batch_size;
  }
  size_t batches() const { return batches_of(sampler.num_samples()); }

  // Examples [b·B, min((b+1)·B, n)) of the epoch, stacked. Returns an empty
  // batch when stopped half-way.
  Batch load(size_t b) const {
    const size_t first = (b - base) * options.batch_size;
    const size_t last = std::min(first + options.batch_size, indices.size());
    const SampleKey key{options.seed, epoch};
    const size_t real = num_real > first ? std::min(num_real, last) - first : 0;
    Batch whole{at::Tensor(), at::Tensor(), real};
    if (dataset.fill_batch(&indices[first], last - first, key, whole.input, whole.target))
      return pinned(std::move(whole));
    std::vector<at::Tensor> inputs, targets;
    inputs.reserve(last - first);
    targets.reserve(last - first);
    for (size_t i = first; i < last; ++i) {
      if (stop.load(std::memory_order_relaxed)) return Batch{};
      Example e = dataset.sample(indices[i], key);
      if (!inputs.empty() && e.input.sizes() != inputs.front().sizes())
        throw std::runtime_error(
            "sample " + std::to_string(indices[i]) + " is " + shape(e.input) + " but sample " +
            std::to_string(indices[first]) + " of its batch " + shape(inputs.front()) +
            ": a batch stacks examples of one shape (end an image pipeline with a fixed-size "
            "crop: RandomResizedCrop, CenterCrop)");
      inputs.push_back(std::move(e.input));
      targets.push_back(std::move(e.target));
    }
    // The inputs into a buffer of the pool (an image batch is megabytes: a
    // fresh one each time is fresh pages, each faulted in and zeroed).
    at::Tensor input = buffer(inputs.front(), inputs.size());
    at::stack_out(input, inputs);
    return pinned(Batch{input, at::stack(targets), real});
  }

  // A (n, example...) tensor no batch in use holds: one of the pool's whose
  // only holder is the pool (no tensor, no view: the batch it went out in
  // was dropped), or a new
  // one, kept when the pool has room. The pool holds prefetch + workers + 2:
  // as many batches as can be alive at once.
  at::Tensor buffer(const at::Tensor& example, size_t n) const {
    std::vector<int64_t> shape{static_cast<int64_t>(n)};
    for (int64_t d : example.sizes()) shape.push_back(d);
    std::lock_guard<std::mutex> lock(pool_mutex);
    for (const at::Tensor& t : pool)
      if (t.use_count() == 1 && t.storage().use_count() == 1 &&
          t.sizes() == at::IntArrayRef(shape) && t.scalar_type() == example.scalar_type())
        return t;
    at::Tensor t = at::empty(shape, example.options().memory_format(at::MemoryFormat::Contiguous));
    const size_t cap = static_cast<size_t>(options.prefetch + options.num_workers) + 2;
    if (pool.size() < cap) {
      pool.push_back(t);
    } else {
      for (at::Tensor& old : pool)  // replace one of another shape (the last batch's)
        if (old.use_count() == 1 && old.storage().use_count() == 1) {
          old = t;
          break;
        }
    }
    return t;
  }

  Batch pinned(Batch batch) const {
    if (options.pin_memory) {  // page-locked, for an asynchronous copy to the GPU
      batch.input = batch.input.pin_memory();
      batch.target = batch.target.pin_memory();
    }
    return batch;
  }

  static std::string shape(const at::Tensor& t) {
    std::string s;
    for (int64_t d : t.sizes()) s += (s.empty() ? "" : "x") + std::to_string(d);
    return s;
  }

  // A worker: claims the next batch within the prefetch window, loads it
  // unlocked, files it. A persistent worker waits through the end of an
  // epoch for the next one; another returns.
  void work() {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      work_cv.wait(lock, [&] {
        return stop || claimable() || (!options.persistent_workers && next_claim >= end);
      });
      if (stop || !claimable()) return;
      const size_t b = next_claim++;
      const uint64_t gen = generation;
      ++in_flight;
      lock.unlock();
      Prepared p;
      try {
        p.batch = load(b);
      } catch (...) {
        p.error = std::current_exception();
      }
      lock.lock();
      --in_flight;
      if (stop) return;
      if (gen == generation) ready.emplace(b, std::move(p));
      ready_cv.notify_all();
    }
  }

  bool claimable() const {
    return next_claim < end && next_claim < next_deliver + static_cast<size_t>(options.prefetch);
  }

  // Stops and joins the workers, drops what they prepared.
  void cancel() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    work_cv.notify_all();
    for (std::thread& t : workers) t.join();
    workers.clear();
    ready.clear();
    next_deliver = next_claim = end;
  }

  // `sample_offset` > 0: from that position of the global order, numbered
  // from batch `skip` on.
  void start(int64_t new_epoch, size_t skip, size_t sample_offset = 0) {
    // Persistent workers idle since the last epoch stay; otherwise (workers
    // still loading an earlier epoch's batches, or none kept) they are
    // joined and started afresh.
    std::unique_lock<std::mutex> lock(mutex);
    const bool keep = options.persistent_workers && !workers.empty() && !stop && in_flight == 0;
    if (!keep) {
      lock.unlock();
      cancel();
      lock.lock();
    }
    ready.clear();
    ++generation;
    sampler.set_epoch(new_epoch);
    epoch = new_epoch;
    indices = sampler.indices(sample_offset);
    num_real = sampler.num_real_samples(sample_offset);
    base = sample_offset > 0 ? skip : 0;
    end = batches();
    if (skip > end) {
      end = 0;
      throw std::out_of_range("DataLoader::start_epoch: skip_batches " + std::to_string(skip) +
                              " > " + std::to_string(batches()) + " batches per epoch");
    }
    if (sample_offset > 0 && base + batches_of(indices.size()) != end) {
      end = 0;
      throw std::invalid_argument("DataLoader::start_epoch_at_sample: " + std::to_string(skip) +
                                  " + " + std::to_string(batches_of(indices.size())) +
                                  " batches from sample " + std::to_string(sample_offset) +
                                  " != " + std::to_string(batches()) + " per epoch");
    }
    next_claim = next_deliver = skip;
    stop = false;
    started = true;
    if (keep) {
      work_cv.notify_all();
      return;
    }
    for (int w = 0; w < options.num_workers && skip < end; ++w)
      workers.emplace_back([this] { work(); });
  }

  std::optional<Batch> next() {
    if (!started) start(0, 0);
    if (next_deliver >= end) return std::nullopt;
    if (options.num_workers == 0) {
      try {
        return load(next_deliver++);
      } catch (...) {
        next_deliver = end;  // the epoch ends with the error
        throw;
      }
    }

    Prepared p;
    {
      std::unique_lock<std::mutex> lock(mutex);
      queue_depth = ready.size();  // prepared and waiting when the batch was asked for
      ready_cv.wait(lock, [&] { return ready.count(next_deliver) > 0; });
      auto it = ready.find(next_deliver);
      p = std::move(it->second);
      ready.erase(it);
      ++next_deliver;
    }
    work_cv.notify_all();
    if (p.error) {
      cancel();  // the epoch ends with the error
      std::rethrow_exception(p.error);
    }
    // The epoch is done: the workers have nothing left (persistent ones wait).
    if (next_deliver >= end && !options.persistent_workers) cancel();
    return std::move(p.batch);
  }
};

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, LoaderOptions options, int rank,
                       int world_size)
    : dataset_(std::move(dataset)), options_(options) {
  if (!dataset_) throw std::invalid_argument("DataLoader: no dataset");
  if (options_.batch_size < 1) throw std::invalid_argument("DataLoader: batch_size must be >= 1");
  if (options_.num_workers < 0) throw std::invalid_argument("DataLoader: num_workers must be >= 0");
  if (options_.prefetch < 1) throw std::invalid_argument("DataLoader: prefetch must be >= 1");
  impl_ = std::make_unique<Impl>(*dataset_, options_, rank, world_size);
}

DataLoader::~DataLoader() { impl_->cancel(); }

void DataLoader::start_epoch(int64_t epoch, size_t skip_batches) {
  impl_->start(epoch, skip_batches);
}

std::optional<Batch> DataLoader::next() { return impl_->next(); }

void DataLoader::start_epoch_at_sample(int64_t epoch, size_t skip_batches, size_t sample_offset) {
  impl_->start(epoch, skip_batches, sample_offset);
}

size_t DataLoader::batches_from(size_t sample_offset) const {
  return impl_->batches_of(impl_->sampler.num_samples(sample_offset));
}

size_t DataLoader::batches_per_epoch() const { return impl_->batches(); }

size_t DataLoader::queue_depth() const { return impl_->queue_depth; }

LoaderOptions loader_options(const config::Node& cfg, uint64_t seed) {
  LoaderOptions o;
  o.seed = seed;
  if (const config::Node* n = cfg.find("batch_size"))
    o.batch_size = static_cast<size_t>(n->as_int());
  if (const config::Node* n = cfg.find("shuffle")) o.shuffle = n->as_bool();
  // MMEngine's sampler: {type: DefaultSampler, shuffle}.
  if (const config::Node* sampler = cfg.find("sampler")) {
    const config::Node* n = sampler->find("shuffle");
    if (n != nullptr && cfg.find("shuffle") != nullptr)
      throw config::ConfigError(n->location(), n->path(),
                                "give shuffle here or beside batch_size, not both");
    if (n != nullptr) o.shuffle = n->as_bool();
    if (n == nullptr && cfg.find("shuffle") == nullptr) o.shuffle = true;  // MMEngine's default
  }
  if (const config::Node* n = cfg.find("drop_last")) o.drop_last = n->as_bool();
  if (const config::Node* n = cfg.find("num_workers"))
    o.num_workers = static_cast<int>(n->as_int());
  if (const config::Node* n = cfg.find("prefetch")) o.prefetch = static_cast<int>(n->as_int());
  // PyTorch's and MMEngine's prefetch_factor: batches ahead per worker.
  if (const config::Node* n = cfg.find("prefetch_factor")) {
    if (const config::Node* p = cfg.find("prefetch"))
      throw config::ConfigError(n->location(), n->path(),
                                "give prefetch_factor (per worker) or prefetch (in all, " +
                                    p->location().str() + "), not both");
    o.prefetch = static_cast<int>(n->as_int()) * std::max(1, o.num_workers);
  }
  if (const config::Node* n = cfg.find("persistent_workers")) o.persistent_workers = n->as_bool();
  if (const config::Node* n = cfg.find("pin_memory")) o.pin_memory = n->as_bool();
  return o;
}

}  // namespace rh::data
