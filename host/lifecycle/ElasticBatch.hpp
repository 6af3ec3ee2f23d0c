// The global batch across an elastic restart (runner-host --max-restarts):
// when a node is lost and the job goes on with fewer ranks, the job key
// dist.keep_global_batch says how the global batch of the first world
// (batch_size x its ranks) is kept, so that every iteration still takes the
// same samples, the schedulers and iteration counts mean what they did,
// and the run ends after the same number of optimizer steps:
//   accumulate (default)  each rank takes k = first ranks / ranks now times
//                         its batch per iteration, in k micro-batches of the
//                         job's batch_size, accumulating their gradients
//                         (the memory of one batch, k times the compute)
//   batch_size            each rank takes one batch k times as large
//   false                 nothing is kept: the global batch shrinks with
//                         the world (the data position, counted in samples,
//                         still continues exactly)
// No LibTorch here.
#pragma once

#include <cstddef>
#include <string>

namespace rh::config {
struct DistCfg;
}

namespace rh::lifecycle {

struct ElasticBatch {
  size_t batch_size = 1;  // the train loader's per-rank batch
  int micro_batches = 1;  // each batch is cut into this many for forward/backward
  std::string log;        // what was done, for rank 0's log ("" when nothing changed)
};

// `batch_size`: data.train.batch_size; `first_world`: the elastic
// launcher's first world size (0 when not elastic); `world`: this one's.
// `dist`: the job's dist keys (keep_global_batch). Throws
// config::ConfigError at dist.keep_global_batch (or the job) when the
// global batch cannot be kept whole on `world` ranks, naming both sizes.
ElasticBatch elastic_batch(const config::DistCfg& dist, size_t batch_size, int first_world,
                           int world);

}  // namespace rh::lifecycle
