#include "model/ClassifierSchema.hpp"

namespace rh::model {

config::Schema preprocessor_schema() {
  using namespace config::schema;
  return map({
      {"type", enumeration({"ClsDataPreprocessor"}), false, "MMPretrain's (the only one)"},
      {"mean", list(number()), false, "3 values subtracted per channel (after to_rgb)"},
      {"std", list(number_above(0)), false, "3 values divided per channel"},
      {"to_rgb", boolean(), false,
       "reverse the channels (the pipeline's BGR to RGB; default false)"},
      {"num_classes", integer(2), false, "checked against model.num_classes"},
  });
}

config::Schema batch_augments_schema() {
  using namespace config::schema;
  const config::Schema mixup = map({
      {"type", string(), true},
      {"alpha", number_above(0), true, "lambda ~ Beta(alpha, alpha)"},
  });
  const config::Schema cutmix = map({
      {"type", string(), true},
      {"alpha", number_above(0), true, "lambda ~ Beta(alpha, alpha)"},
      {"cutmix_minmax", nullable(list(number(0, 1))), false,
       "[min, max]: the box's sides as fractions of the image's (default: from lambda)"},
      {"correct_lam", boolean(), false, "lambda from the box after clipping (default true)"},
  });
  return map({
      {"augments",
       list(typed_union("type", {{"Mixup", mixup}, {"CutMix", cutmix}}, "batch augment")), false,
       "one per batch, chosen uniformly (or by probs); the targets become soft scores"},
      {"probs", one_of({number(0, 1), list(number(0, 1))}, "a probability or one per augment"),
       false, "each augment's probability; the rest: none"},
  });
}

config::Schema classifier_head_schema() {
  using namespace config::schema;
  const config::Schema ce = map({
      {"type", string(), true},
      {"loss_weight", number(0), false, "default 1"},
  });
  const config::Schema smooth = map({
      {"type", string(), true},
      {"label_smooth_val", number(0, 1), true, "eps: target (1 - eps) + eps / C"},
      {"mode", enumeration({"original", "classy_vision"}), false,
       "original (default) or classy_vision (eps = v / (1 + v))"},
      {"loss_weight", number(0), false, "default 1"},
  });
  return map({
      {"loss", typed_union("type", {{"CrossEntropyLoss", ce}, {"LabelSmoothLoss", smooth}}, "loss"),
       false,
       "the training loss (default cross entropy); the built-in models' head has only this key"},
  });
}

}  // namespace rh::model
