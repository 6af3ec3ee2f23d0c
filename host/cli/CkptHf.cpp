#include "cli/CkptHf.hpp"

#include <cstring>
#include <sstream>
#include <stdexcept>

#include "formats/Json.hpp"
#include "model/LlamaConfig.hpp"

namespace rh::cli {
namespace {

model::LlamaConfig llama_of(const config::Node& model) {
  const config::Node* type = model.find("type");
  const std::string name = type == nullptr ? "" : type->as_string();
  if (name != "llama")
    throw std::invalid_argument(
        "--to hf converts a llama checkpoint (model.type llama, "
        "Hugging Face's LlamaForCausalLM); this one's model is '" +
        name + "' (--to torch writes any model's tensors)");
  return model::read_llama_config(model);
}

// "layers.3.attention.wq.weight" -> {3, "attention.wq.weight"}; -1 when it is no layer's.
std::pair<int64_t, std::string> split_layer(const std::string& name) {
  if (name.rfind("layers.", 0) != 0) return {-1, name};
  const size_t dot = name.find('.', 7);
  if (dot == std::string::npos) return {-1, name};
  try {
    return {std::stoll(name.substr(7, dot - 7)), name.substr(dot + 1)};
  } catch (const std::exception&) {
    return {-1, name};
  }
}

}  // namespace

std::vector<HfTensor> hf_llama_plan(const config::Node& model,
                                    const std::vector<std::string>& names) {
  const model::LlamaConfig c = llama_of(model);
  static const std::pair<const char*, const char*> kLayer[] = {
      {"attention.wq.weight", "self_attn.q_proj.weight"},
      {"attention.wk.weight", "self_attn.k_proj.weight"},
      {"attention.wv.weight", "self_attn.v_proj.weight"},
      {"attention.wo.weight", "self_attn.o_proj.weight"},
      {"feed_forward.w1.weight", "mlp.gate_proj.weight"},
      {"feed_forward.w2.weight", "mlp.down_proj.weight"},
      {"feed_forward.w3.weight", "mlp.up_proj.weight"},
      {"attention_norm.weight", "input_layernorm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
  };
  std::vector<HfTensor> plan;
  for (const std::string& name : names) {
    HfTensor t{name, "", 0};
    if (name == "tok_embeddings.weight") t.hf_name = "model.embed_tokens.weight";
    if (name == "norm.weight") t.hf_name = "model.norm.weight";
    if (name == "output.weight") t.hf_name = "lm_head.weight";
    const auto [layer, rest] = split_layer(name);
    if (layer >= 0 && layer < c.n_layers)
      for (const auto& [ours, theirs] : kLayer)
        if (rest == ours) {
          t.hf_name = "model.layers." + std::to_string(layer) + "." + theirs;
          if (rest == "attention.wq.weight") t.rotary_heads = c.n_heads;
          if (rest == "attention.wk.weight") t.rotary_heads = c.n_kv_heads;
        }
    if (t.hf_name.empty())
      throw std::invalid_argument("tensor '" + name +
                                  "' is no parameter of a llama of this job's shape (" +
                                  std::to_string(c.n_layers) + " layers): nothing of HF's is it");
    plan.push_back(std::move(t));
  }
  return plan;
}

std::vector<uint8_t> permute_rotary_rows(const uint8_t* data, int64_t rows, int64_t cols,
                                         int64_t heads, size_t elem) {
  const int64_t hd = rows / heads, half = hd / 2;
  const size_t row_bytes = static_cast<size_t>(cols) * elem;
  std::vector<uint8_t> out(static_cast<size_t>(rows) * row_bytes);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < half; ++i) {
        const int64_t to = h * hd + j * half + i, from = h * hd + 2 * i + j;
        std::memcpy(out.data() + static_cast<size_t>(to) * row_bytes,
                    data + static_cast<size_t>(from) * row_bytes, row_bytes);
      }
  return out;
}

std::vector<std::vector<size_t>> hf_shards(const std::vector<uint64_t>& sizes, uint64_t max_bytes) {
  std::vector<std::vector<size_t>> shards;
  uint64_t current = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (shards.empty() ||
        (max_bytes > 0 && !shards.back().empty() && current + sizes[i] > max_bytes)) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(i);
    current += sizes[i];
  }
  return shards;
}

uint64_t parse_shard_size(const std::string& text) {
  size_t end = 0;
  unsigned long long number = 0;
  try {
    number = std::stoull(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  const std::string unit = text.substr(end);
  static const std::pair<const char*, uint64_t> kUnits[] = {{"", 1},
                                                            {"B", 1},
                                                            {"KB", 1000},
                                                            {"MB", 1000 * 1000},
                                                            {"GB", 1000ULL * 1000 * 1000},
                                                            {"KiB", 1024},
                                                            {"MiB", 1024 * 1024},
                                                            {"GiB", 1024ULL * 1024 * 1024}};
  if (end > 0 && text[0] != '-')
    for (const auto& [name, scale] : kUnits)
      if (unit == name && number > 0) return static_cast<uint64_t>(number) * scale;
  throw std::invalid_argument(
      "--max-shard-size: expected a positive size such as 5GB, 500MB, "
      "2GiB or a number of bytes, got '" +
      text + "'");
}

std::string hf_index_json(uint64_t total_size,
                          const std::vector<std::pair<std::string, std::string>>& weight_map) {
  std::string out = "{\n  \"metadata\": {\"total_size\": " + std::to_string(total_size) +
                    "},\n  \"weight_map\": {";
  for (size_t i = 0; i < weight_map.size(); ++i)
    out += std::string(i ? "," : "") + "\n    " + json::quoted(weight_map[i].first) + ": " +
           json::quoted(weight_map[i].second);
  return out + "\n  }\n}\n";
}

std::string hf_llama_config_json(const config::Node& model, int64_t ffn_dim,
                                 const std::string& torch_dtype) {
  const model::LlamaConfig c = llama_of(model);
  std::ostringstream o;
  o.precision(17);
  o << "{\n"
    << "  \"architectures\": [\"LlamaForCausalLM\"],\n"
    << "  \"model_type\": \"llama\",\n"
    << "  \"vocab_size\": " << c.vocab_size << ",\n"
    << "  \"hidden_size\": " << c.dim << ",\n"
    << "  \"intermediate_size\": " << ffn_dim << ",\n"
    << "  \"num_hidden_layers\": " << c.n_layers << ",\n"
    << "  \"num_attention_heads\": " << c.n_heads << ",\n"
    << "  \"num_key_value_heads\": " << c.n_kv_heads << ",\n"
    << "  \"head_dim\": " << c.head_dim() << ",\n"
    << "  \"hidden_act\": \"silu\",\n"
    << "  \"max_position_embeddings\": " << c.max_seq_len << ",\n"
    << "  \"rms_norm_eps\": " << c.norm_eps << ",\n"
    << "  \"rope_theta\": " << c.rope_theta << ",\n"
    << "  \"attention_bias\": false,\n"
    << "  \"mlp_bias\": false,\n"
    << "  \"tie_word_embeddings\": false,\n"
    << "  \"torch_dtype\": " << json::quoted(torch_dtype) << "\n"
    << "}\n";
  return o.str();
}

}  // namespace rh::cli
