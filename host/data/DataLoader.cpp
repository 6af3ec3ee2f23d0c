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

  std::vector<size_t> indices;  // this rank's indices for the epoch
  size_t base = 0;              // the batch number of indices' first batch
  size_t num_real = 0;          // real samples in indices (a prefix)
  size_t end = 0;               // batches in the epoch
  size_t next_claim = 0;        // the next batch a worker may start
  size_t next_deliver = 0;      // the next batch next() returns
  bool started = false;         // start_epoch() was called
  std::map<size_t, Prepared> ready;
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
    std::vector<at::Tensor> inputs, targets;
    inputs.reserve(last - first);
    targets.reserve(last - first);
    for (size_t i = first; i < last; ++i) {
      if (stop.load(std::memory_order_relaxed)) return Batch{};
      Example e = dataset.get(indices[i]);
      inputs.push_back(std::move(e.input));
      targets.push_back(std::move(e.target));
    }
    const size_t real = num_real > first ? std::min(num_real, last) - first : 0;
    return Batch{at::stack(inputs), at::stack(targets), real};
  }

  void work() {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      work_cv.wait(lock, [&] {
        return stop || next_claim >= end ||
               next_claim < next_deliver + static_cast<size_t>(options.prefetch);
      });
      if (stop || next_claim >= end) return;
      const size_t b = next_claim++;
      lock.unlock();
      Prepared p;
      try {
        p.batch = load(b);
      } catch (...) {
        p.error = std::current_exception();
      }
      lock.lock();
      if (stop) return;
      ready.emplace(b, std::move(p));
      ready_cv.notify_all();
    }
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
  void start(int64_t epoch, size_t skip, size_t sample_offset = 0) {
    cancel();
    sampler.set_epoch(epoch);
    indices = sampler.indices(sample_offset);
    num_real = sampler.num_real_samples(sample_offset);
    base = sample_offset > 0 ? skip : 0;
    end = batches();
    if (skip > end) {
      throw std::out_of_range("DataLoader::start_epoch: skip_batches " + std::to_string(skip) +
                              " > " + std::to_string(end) + " batches per epoch");
    }
    if (sample_offset > 0 && base + batches_of(indices.size()) != end)
      throw std::invalid_argument("DataLoader::start_epoch_at_sample: " + std::to_string(skip) +
                                  " + " + std::to_string(batches_of(indices.size())) +
                                  " batches from sample " + std::to_string(sample_offset) +
                                  " != " + std::to_string(end) + " per epoch");
    next_claim = next_deliver = skip;
    stop = false;
    started = true;
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
    if (next_deliver >= end) cancel();  // the epoch is done: the workers have nothing left
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

LoaderOptions loader_options(const config::Node& cfg, uint64_t seed) {
  LoaderOptions o;
  o.seed = seed;
  if (const config::Node* n = cfg.find("batch_size"))
    o.batch_size = static_cast<size_t>(n->as_int());
  if (const config::Node* n = cfg.find("shuffle")) o.shuffle = n->as_bool();
  if (const config::Node* n = cfg.find("drop_last")) o.drop_last = n->as_bool();
  if (const config::Node* n = cfg.find("num_workers"))
    o.num_workers = static_cast<int>(n->as_int());
  if (const config::Node* n = cfg.find("prefetch")) o.prefetch = static_cast<int>(n->as_int());
  return o;
}

}  // namespace rh::data
