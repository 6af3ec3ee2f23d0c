#include "lifecycle/ElasticBatch.hpp"

#include "config/ConfigNode.hpp"
#include "job/JobSettings.hpp"

namespace rh::lifecycle {

ElasticBatch elastic_batch(const config::DistCfg& dist, size_t batch_size, int first_world,
                           int world) {
  ElasticBatch out;
  out.batch_size = batch_size;
  if (first_world <= 0 || first_world == world) return out;
  const size_t global = batch_size * static_cast<size_t>(first_world);
  const std::string was = "the global batch of " + std::to_string(global) + " (" +
                          std::to_string(batch_size) + " per rank x " +
                          std::to_string(first_world) + " ranks at the first start)";
  auto refuse = [&](const std::string& why) {
    throw config::ConfigError(dist.keep_global_batch_at, "dist.keep_global_batch", why);
  };
  if (dist.keep_global_batch == config::KeepGlobalBatch::No) {
    out.log = "elastic restart on " + std::to_string(world) + " rank(s): " + was +
              " is not kept (dist.keep_global_batch: false): it is " +
              std::to_string(batch_size * static_cast<size_t>(world)) + " now";
    return out;
  }
  if (world > first_world)
    refuse(was + " cannot be kept on more ranks (" + std::to_string(world) +
           "): an elastic restart only shrinks the world");
  if (dist.keep_global_batch == config::KeepGlobalBatch::Accumulate) {
    if (first_world % world != 0)
      refuse(was + " cannot be kept on " + std::to_string(world) + " ranks by accumulation: " +
             std::to_string(first_world) + "/" + std::to_string(world) +
             " is no whole number of micro-batches (dist.keep_global_batch: batch_size takes "
             "one larger batch per rank, false lets the global batch shrink)");
    out.micro_batches = first_world / world;
    out.batch_size = batch_size * static_cast<size_t>(out.micro_batches);
    out.log = "elastic restart on " + std::to_string(world) + " rank(s): " + was +
              " is kept by accumulation: each rank takes " + std::to_string(out.micro_batches) +
              " micro-batches of " + std::to_string(batch_size) + " per iteration";
    return out;
  }
  if (global % static_cast<size_t>(world) != 0)
    refuse(was + " cannot be kept on " + std::to_string(world) +
           " ranks: " + std::to_string(global) + "/" + std::to_string(world) +
           " is no whole batch (dist.keep_global_batch: false lets the global batch shrink)");
  out.batch_size = global / static_cast<size_t>(world);
  out.log = "elastic restart on " + std::to_string(world) + " rank(s): " + was +
            " is kept by a larger batch: " + std::to_string(out.batch_size) + " per rank";
  return out;
}

}  // namespace rh::lifecycle
