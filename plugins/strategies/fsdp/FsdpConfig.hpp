// FsdpConfig — the fsdp strategy's `strategy:` map, read through the SDK's
// rh::Config (so every error names file:line:column and the key path) and
// resolved against the world it runs in. No LibTorch here.
//
// clang-format off
//   strategy:
//     type: fsdp
//     sharding_strategy: full_shard   # full_shard | shard_grad_op | no_shard | hybrid_shard
//     reshard_after_forward: null     # true | false | N: overrides what sharding_strategy implies
//     local_world_size: null          # hybrid_shard's shard group (default: the launch's ranks per node)
//     forward_prefetch: 1             # units gathered ahead in forward (>= 0)
//     backward_prefetch: 1            # units gathered ahead in backward (>= 0)
//     auto_wrap: {min_params: 0}      # merge neighbouring model units until each has this many elements
//     ignored_modules: []             # module paths kept whole, never sharded, reduced or optimised
//     mixed_precision: {param_dtype: float32, reduce_dtype: null, output_dtype: null,
//                       cast_forward_inputs: true}
//     state_dict_type: full           # full | sharded
// clang-format on
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rh/cpp/config.hpp"

namespace rh::fsdp {

enum class ShardingStrategy { FullShard, ShardGradOp, NoShard, HybridShard };

// The dtypes mixed_precision names (FSDP2's MixedPrecisionPolicy).
enum class Dtype { Float32, BFloat16, Float16 };
const char* dtype_name(Dtype d);

struct FsdpConfig {
  ShardingStrategy sharding = ShardingStrategy::FullShard;
  std::string sharding_name = "full_shard";
  // After forward a unit is kept sharded over groups of this many ranks of
  // its shard group: shard group size (reshard fully: true), 1 (keep it
  // whole: false), or a divisor in between (FSDP2's int). Resolved by
  // resolve().
  int64_t reshard_after_forward = 0;
  int64_t shard_group_size = 1;  // resolved: ranks a parameter is sharded over
  int64_t local_world_size = 0;  // 0: not written (the launch's)
  int64_t forward_prefetch = 1;
  int64_t backward_prefetch = 1;
  int64_t min_params = 0;
  std::vector<std::string> ignored_modules;
  Dtype param_dtype = Dtype::Float32;
  Dtype reduce_dtype = Dtype::Float32;  // resolved: param_dtype unless written
  bool output_dtype_set = false;        // only float32 is accepted
  bool cast_forward_inputs = true;
  bool sharded_state_dict = false;

  // Reads every key it accepts (the host reports any other one). Throws
  // rh::Exception (RH_ERROR_INVALID_CONFIG) naming the key.
  static FsdpConfig from_config(const rh::Config& strategy);

  // Sizes that need the world: `world_size` ranks, `launch_local_world_size`
  // per node. Throws like from_config, naming the key that does not fit.
  void resolve(const rh::Config& strategy, int64_t world_size, int64_t launch_local_world_size);

 private:
  bool reshard_written_ = false;
  bool reshard_bool_ = true;
  int64_t reshard_int_ = 0;
  bool reduce_dtype_set_ = false;
};

}  // namespace rh::fsdp
