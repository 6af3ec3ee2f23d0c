// model.type llama's keys (Llama.cpp builds the model; the checkpoint tool's
// `convert --to hf` writes them into Hugging Face's config.json): Meta's and
// torchtitan's names, the defaults a tiny model starts from. No LibTorch.
#pragma once

#include <cstdint>

#include "config/ConfigNode.hpp"

namespace rh::model {

struct LlamaConfig {
  int64_t vocab_size = 0;  // V
  int64_t dim = 64;        // D
  int64_t n_layers = 2;
  int64_t n_heads = 4;     // H
  int64_t n_kv_heads = 4;  // KV (the job's default: n_heads)
  int64_t multiple_of = 256;
  double ffn_dim_multiplier = 0;  // 0: none
  double norm_eps = 1e-5;
  double rope_theta = 10000;
  int64_t max_seq_len = 2048;

  int64_t head_dim() const { return dim / n_heads; }
  // Meta's FeedForward width: 2/3 of 4D, times ffn_dim_multiplier, rounded
  // up to a multiple of multiple_of.
  int64_t ffn_dim() const {
    int64_t hidden = 2 * (4 * dim) / 3;
    if (ffn_dim_multiplier > 0)
      hidden = static_cast<int64_t>(ffn_dim_multiplier * static_cast<double>(hidden));
    return multiple_of * ((hidden + multiple_of - 1) / multiple_of);
  }
};

// The validated `model:` map of type llama; the rules between keys (dim a
// multiple of n_heads, an even head width, n_heads a multiple of
// n_kv_heads) throw config::ConfigError at the key.
LlamaConfig read_llama_config(const config::Node& node);

}  // namespace rh::model
