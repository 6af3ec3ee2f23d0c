#include "model/ModelSchema.hpp"

#include "model/ClassifierSchema.hpp"

namespace rh::model {
namespace {

config::Schema build_model_schema() {
  using namespace config::schema;
  const config::Schema dropout = number(0, 1);
  const config::Schema positive = integer(1);
  const config::Schema classes = integer(2);
  // Every model type: parameters whose name is a prefix or starts with
  // "<prefix>." are frozen (requires_grad false: never in the optimizer,
  // never communicated).
  const Field frozen{"frozen", list(string()), false,
                     "module path prefixes to freeze, e.g. [embed, blocks.0] (default [])"};
  auto with_frozen = [&](std::vector<Field> fields) {
    fields.push_back(frozen);
    return map(std::move(fields));
  };
  // The image classifiers: MMPretrain's keys beside the model's own
  // (data::BatchPreprocessor, model::ClassifierLoss).
  auto image_classifier = [&](std::vector<Field> fields) {
    fields.push_back({"data_preprocessor", preprocessor_schema(), false,
                      "mean, std, to_rgb (or at the top of the job)"});
    fields.push_back(
        {"train_cfg", batch_augments_schema(), false, "batch augments: Mixup, CutMix"});
    fields.push_back(
        {"head", classifier_head_schema(), false, "only `loss`: the head's size is num_classes"});
    return with_frozen(std::move(fields));
  };

  return typed_union(
      "type",
      {
          {"mlp", with_frozen({
                      {"in_features", positive, true, "input features F"},
                      {"hidden", list(positive), false, "hidden layer widths (default [128])"},
                      {"num_classes", classes, true, "output classes C"},
                      {"activation", enumeration({"relu", "gelu", "tanh"}), false,
                       "between layers (default relu)"},
                      {"dropout", dropout, false, "after each activation (default 0)"},
                  })},
          {"convnet", image_classifier({
                          {"in_channels", positive, false, "image channels (default 3)"},
                          {"num_classes", classes, true, "output classes C"},
                          {"width", positive, false, "channels of the first stage (default 32)"},
                          {"blocks", list(positive), false,
                           "residual blocks per stage; stage s has width*2^s channels "
                           "(default [1, 1, 1])"},
                          {"norm", enumeration({"batch", "group", "none"}), false,
                           "normalisation layers (default batch)"},
                      })},
          {"vit", image_classifier({
                      {"image_size", positive, false, "input height and width (default 32)"},
                      {"patch_size", positive, false, "divides image_size (default 4)"},
                      {"in_channels", positive, false, "image channels (default 3)"},
                      {"dim", positive, false, "embedding width, a multiple of heads (default 64)"},
                      {"depth", positive, false, "transformer blocks (default 4)"},
                      {"heads", positive, false, "attention heads (default 4)"},
                      {"mlp_ratio", number_above(0), false, "MLP width / dim (default 2)"},
                      {"num_classes", classes, true, "output classes C"},
                      {"dropout", dropout, false, "default 0"},
                  })},
          {"gpt", with_frozen({
                      {"vocab_size", positive, true, "tokens V"},
                      {"block_size", positive, false, "context length, the longest T (default 64)"},
                      {"dim", positive, false, "embedding width, a multiple of heads (default 64)"},
                      {"depth", positive, false, "transformer blocks (default 2)"},
                      {"heads", positive, false, "attention heads (default 4)"},
                      {"mlp_ratio", number_above(0), false, "MLP width / dim (default 4)"},
                      {"dropout", dropout, false, "default 0"},
                      {"tie_weights", boolean(), false,
                       "the head reuses the token embedding (default false)"},
                  })},
          {"llama",
           with_frozen({
               {"vocab_size", positive, true, "tokens V"},
               {"dim", positive, false, "embedding width D, a multiple of n_heads (default 64)"},
               {"n_layers", positive, false, "transformer layers (default 2)"},
               {"n_heads", positive, false, "query heads H; D / H even (default 4)"},
               {"n_kv_heads", positive, false,
                "key/value heads, dividing n_heads (grouped-query attention; default n_heads)"},
               {"multiple_of", positive, false,
                "the feed-forward width is rounded up to a multiple of it (default 256)"},
               {"ffn_dim_multiplier", number_above(0), false,
                "scales the feed-forward width 2/3 * 4D (default none)"},
               {"norm_eps", number_above(0), false, "RMSNorm's epsilon (default 1e-5)"},
               {"rope_theta", number_above(0), false,
                "rotary embeddings' base (default 10000; Llama 3: 500000)"},
               {"max_seq_len", positive, false, "the longest T (default 2048)"},
           })},
          {"torchscript",
           with_frozen({
               {"path", string(), true, "the .pt file; a relative path starts at the job's folder"},
               {"num_classes", classes, false, "checked against the logits"},
               {"task", enumeration({"classification", "language_model"}), false,
                "what the module computes (default classification)"},
           })},
      },
      "model");
}

}  // namespace

config::Schema model_schema() {
  static const config::Schema kSchema = build_model_schema();
  return kSchema;
}

}  // namespace rh::model
