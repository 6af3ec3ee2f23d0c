#include "model/LlamaConfig.hpp"

#include <string>

#include "model/ConfigFields.hpp"

namespace rh::model {

LlamaConfig read_llama_config(const config::Node& node) {
  const ConfigFields cfg(node);
  LlamaConfig c;
  c.vocab_size = cfg.integer("vocab_size");
  c.dim = cfg.integer("dim", c.dim);
  c.n_layers = cfg.integer("n_layers", c.n_layers);
  c.n_heads = cfg.integer("n_heads", c.n_heads);
  c.n_kv_heads = cfg.integer("n_kv_heads", c.n_heads);
  c.multiple_of = cfg.integer("multiple_of", c.multiple_of);
  c.ffn_dim_multiplier = cfg.number("ffn_dim_multiplier", 0);
  c.norm_eps = cfg.number("norm_eps", c.norm_eps);
  c.rope_theta = cfg.number("rope_theta", c.rope_theta);
  c.max_seq_len = cfg.integer("max_seq_len", c.max_seq_len);
  if (c.dim % c.n_heads != 0)
    cfg.fail("n_heads", "dim " + std::to_string(c.dim) + " is not a multiple of n_heads " +
                            std::to_string(c.n_heads));
  if (c.n_heads % c.n_kv_heads != 0)
    cfg.fail("n_kv_heads", "n_heads " + std::to_string(c.n_heads) +
                               " is not a multiple of n_kv_heads " + std::to_string(c.n_kv_heads) +
                               " (each key/value head serves n_heads / n_kv_heads query heads)");
  if (c.head_dim() % 2 != 0)
    cfg.fail("n_heads", "the head width dim / n_heads = " + std::to_string(c.head_dim()) +
                            " is odd; rotary embeddings rotate pairs of elements");
  return c;
}

}  // namespace rh::model
