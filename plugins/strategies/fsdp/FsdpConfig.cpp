#include "FsdpConfig.hpp"

#include <cstdlib>

namespace rh::fsdp {
namespace {

[[noreturn]] void fail(const rh::Config& node, const std::string& message) {
  node.throw_error(message);
}

int64_t non_negative(const rh::Config& cfg, const std::string& key, int64_t fallback) {
  const int64_t v = cfg.get<int64_t>(key, fallback);
  if (v < 0) fail(cfg.child(key), "must be >= 0, got " + std::to_string(v));
  return v;
}

Dtype parse_dtype(const rh::Config& node) {
  const std::string s = node.as<std::string>();
  if (s == "float32" || s == "fp32" || s == "float") return Dtype::Float32;
  if (s == "bfloat16" || s == "bf16") return Dtype::BFloat16;
  if (s == "float16" || s == "fp16" || s == "half") return Dtype::Float16;
  fail(node, "expected float32, bfloat16 or float16, got '" + s + "'");
}

}  // namespace

const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::Float32:
      return "float32";
    case Dtype::BFloat16:
      return "bfloat16";
    case Dtype::Float16:
      return "float16";
  }
  return "?";
}

FsdpConfig FsdpConfig::from_config(const rh::Config& cfg) {
  FsdpConfig c;
  c.sharding_name = cfg.get<std::string>("sharding_strategy", "full_shard");
  if (c.sharding_name == "full_shard" || c.sharding_name == "FULL_SHARD")
    c.sharding = ShardingStrategy::FullShard;
  else if (c.sharding_name == "shard_grad_op" || c.sharding_name == "SHARD_GRAD_OP")
    c.sharding = ShardingStrategy::ShardGradOp;
  else if (c.sharding_name == "no_shard" || c.sharding_name == "NO_SHARD")
    c.sharding = ShardingStrategy::NoShard;
  else if (c.sharding_name == "hybrid_shard" || c.sharding_name == "HYBRID_SHARD")
    c.sharding = ShardingStrategy::HybridShard;
  else
    fail(cfg.child("sharding_strategy"),
         "unknown sharding strategy '" + c.sharding_name +
             "': expected full_shard, shard_grad_op, no_shard or hybrid_shard");
  if (const rh::Config r = cfg.child("reshard_after_forward");
      r.present() && r.kind() != RH_CONFIG_NULL) {
    if (c.sharding == ShardingStrategy::NoShard)
      fail(r, "has no effect with sharding_strategy no_shard (parameters are never sharded)");
    const std::string s = r.as<std::string>();
    c.reshard_written_ = true;
    if (s == "true" || s == "True") {
      c.reshard_bool_ = true;
    } else if (s == "false" || s == "False") {
      c.reshard_bool_ = false;
    } else {
      char* end = nullptr;
      const long long n = std::strtoll(s.c_str(), &end, 10);
      if (s.empty() || *end != '\0' || n < 1)
        fail(r, "expected true, false or a number of ranks >= 1, got '" + s + "'");
      c.reshard_int_ = n;
    }
  }
  if (const rh::Config l = cfg.child("local_world_size");
      l.present() && l.kind() != RH_CONFIG_NULL) {
    c.local_world_size = l.as<int64_t>();
    if (c.local_world_size < 1) fail(l, "must be >= 1, got " + std::to_string(c.local_world_size));
    if (c.sharding != ShardingStrategy::HybridShard)
      fail(l, "is hybrid_shard's shard group size; sharding_strategy is " + c.sharding_name);
  }
  c.forward_prefetch = non_negative(cfg, "forward_prefetch", 1);
  c.backward_prefetch = non_negative(cfg, "backward_prefetch", 1);
  if (const rh::Config w = cfg.child("auto_wrap"); w.present() && w.kind() != RH_CONFIG_NULL) {
    if (w.kind() != RH_CONFIG_MAP) fail(w, "expected a map {min_params: N}");
    c.min_params = non_negative(w, "min_params", 0);
  }
  // MMEngine's FSDPStrategy(activation_checkpointing=dict(check_fn=...)):
  // check_fn names a Python function (MMEngine's FUNCTIONS registry) that
  // picks the modules to wrap. runner-host recomputes whole units, for every
  // strategy, as the job's activation_checkpoint says; null asks for nothing.
  if (const rh::Config ac = cfg.child("activation_checkpointing");
      ac.present() && ac.kind() != RH_CONFIG_NULL)
    fail(ac,
         "MMEngine's activation_checkpointing picks modules with check_fn, a Python function "
         "runner-host cannot call; runner-host recomputes whole units under every strategy: "
         "write the job's top-level activation_checkpoint: {mode: full} (every unit) or "
         "{mode: selective, selective_ac_option: N} (every Nth unit) instead");
  if (const rh::Config ig = cfg.child("ignored_modules");
      ig.present() && ig.kind() != RH_CONFIG_NULL) {
    if (ig.kind() != RH_CONFIG_SEQUENCE) fail(ig, "expected a list of module paths");
    for (size_t i = 0; i < ig.size(); ++i) {
      const std::string m = ig.at(i).as<std::string>();
      if (m.empty()) fail(ig.at(i), "an empty module path");
      c.ignored_modules.push_back(m);
    }
  }
  if (const rh::Config mp = cfg.child("mixed_precision");
      mp.present() && mp.kind() != RH_CONFIG_NULL) {
    if (mp.kind() != RH_CONFIG_MAP)
      fail(mp, "expected a map {param_dtype, reduce_dtype, output_dtype, cast_forward_inputs}");
    if (const rh::Config p = mp.child("param_dtype"); p.present() && p.kind() != RH_CONFIG_NULL)
      c.param_dtype = parse_dtype(p);
    if (const rh::Config r = mp.child("reduce_dtype"); r.present() && r.kind() != RH_CONFIG_NULL) {
      c.reduce_dtype = parse_dtype(r);
      c.reduce_dtype_set_ = true;
    }
    if (const rh::Config o = mp.child("output_dtype"); o.present() && o.kind() != RH_CONFIG_NULL) {
      // The host computes the loss (and eval metrics) in float32 from the
      // model's output, whatever its dtype: float32 is what it already is;
      // any other would be cast straight back.
      if (parse_dtype(o) != Dtype::Float32)
        fail(o,
             "only float32 is supported: runner-host computes the loss and the metrics in "
             "float32 from the model's output, so another output dtype would not take effect");
      c.output_dtype_set = true;
    }
    c.cast_forward_inputs = mp.get<bool>("cast_forward_inputs", true);
  }
  if (!c.reduce_dtype_set_) c.reduce_dtype = c.param_dtype;  // FSDP2: reduce_dtype None
  const std::string sd = cfg.get<std::string>("state_dict_type", "full");
  if (sd == "full" || sd == "FULL_STATE_DICT")
    c.sharded_state_dict = false;
  else if (sd == "sharded" || sd == "SHARDED_STATE_DICT")
    c.sharded_state_dict = true;
  else
    fail(cfg.child("state_dict_type"), "expected full or sharded, got '" + sd + "'");
  return c;
}

void FsdpConfig::resolve(const rh::Config& cfg, int64_t world_size,
                         int64_t launch_local_world_size) {
  switch (sharding) {
    case ShardingStrategy::NoShard:
      shard_group_size = 1;
      break;
    case ShardingStrategy::FullShard:
    case ShardingStrategy::ShardGradOp:
      shard_group_size = world_size;
      break;
    case ShardingStrategy::HybridShard: {
      const int64_t local = local_world_size > 0 ? local_world_size : launch_local_world_size;
      if (local < 1 || world_size % local != 0) {
        const std::string why = "hybrid_shard shards within groups of local_world_size " +
                                std::to_string(local) + " ranks, which does not divide the " +
                                std::to_string(world_size) + " ranks of the world";
        if (local_world_size > 0) fail(cfg.child("local_world_size"), why);
        fail(cfg.child("sharding_strategy"), why + " (set strategy.local_world_size)");
      }
      shard_group_size = local;
      break;
    }
  }
  const bool reshard_default = sharding != ShardingStrategy::ShardGradOp;
  if (!reshard_written_ || reshard_int_ == 0)
    reshard_after_forward =
        (reshard_written_ ? reshard_bool_ : reshard_default) ? shard_group_size : 1;
  else if (shard_group_size % reshard_int_ != 0)
    fail(cfg.child("reshard_after_forward"),
         std::to_string(reshard_int_) + " does not divide the shard group of " +
             std::to_string(shard_group_size) + " ranks (" + sharding_name + " on " +
             std::to_string(world_size) +
             "): after forward a unit is kept sharded over "
             "groups of N ranks of its shard group");
  else
    reshard_after_forward = reshard_int_;
  if (sharding == ShardingStrategy::NoShard) reshard_after_forward = 1;
}

}  // namespace rh::fsdp
