// `runner-host ckpt convert DIR --to hf -o OUTDIR`: a llama checkpoint
// (model.type llama) as Hugging Face's LlamaForCausalLM loads it
// (from_pretrained(OUTDIR)): OUTDIR/model.safetensors under HF's parameter
// names and OUTDIR/config.json. Meta's layout rotates interleaved pairs
// (elements 2i, 2i+1 of a head); HF's rotates halves (i, i + hd/2): the rows
// of wq and wk are permuted as transformers' convert_llama_weights_to_hf.py
// does, so the same weights give the same logits. No LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/ConfigNode.hpp"

namespace rh::cli {

// One tensor of the converted checkpoint: its HF name, and for wq / wk the
// heads whose rotary rows are permuted (0: copied as it is).
struct HfTensor {
  std::string name;     // runner-host's ("layers.0.attention.wq.weight")
  std::string hf_name;  // HF's ("model.layers.0.self_attn.q_proj.weight")
  int64_t rotary_heads = 0;
};

// The plan for a checkpoint whose job's `model:` is `model` and whose model
// tensors are `names`: every tensor's HF name and permutation, in `names`'
// order. Throws std::invalid_argument when the model is not a llama, or a
// tensor has no HF counterpart.
std::vector<HfTensor> hf_llama_plan(const config::Node& model,
                                    const std::vector<std::string>& names);

// Meta's rotary row order to HF's, for a (rows, cols) row-major matrix of
// `elem`-byte elements whose rows are `heads` heads of rows / heads rows
// each: HF row h*hd + j*hd/2 + i = Meta row h*hd + 2i + j.
std::vector<uint8_t> permute_rotary_rows(const uint8_t* data, int64_t rows, int64_t cols,
                                         int64_t heads, size_t elem);

// Hugging Face's split of a checkpoint into files of at most `max_bytes`
// (huggingface_hub's rule: tensors in order, a new file when the next one
// would overflow the current one; a tensor larger than the limit alone in
// its file). `sizes`: the tensors' bytes; returns each file's tensor
// indices. max_bytes 0: one file.
std::vector<std::vector<size_t>> hf_shards(const std::vector<uint64_t>& sizes, uint64_t max_bytes);

// "5GB", "500MB", "2GiB", "1000": bytes (KB/MB/GB decimal, KiB/MiB/GiB
// binary, as transformers reads max_shard_size). Throws
// std::invalid_argument naming the value.
uint64_t parse_shard_size(const std::string& text);

// model.safetensors.index.json: {"metadata": {"total_size": N},
// "weight_map": {name: file, ...}}.
std::string hf_index_json(uint64_t total_size,
                          const std::vector<std::pair<std::string, std::string>>& weight_map);

// config.json of LlamaForCausalLM for `model` (the job's), with the
// feed-forward width `ffn_dim` (w1's rows) and the weights' `torch_dtype`
// ("float32", "bfloat16", ...).
std::string hf_llama_config_json(const config::Node& model, int64_t ffn_dim,
                                 const std::string& torch_dtype);

}  // namespace rh::cli
