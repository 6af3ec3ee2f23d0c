// The schema of `data.train` / `data.val` / `data.test` (no LibTorch here).
#pragma once

#include "config/Schema.hpp"

namespace rh::data {

// {dataset: <typed union of dataset types>, batch_size, shuffle, drop_last, num_workers, prefetch}
config::Schema loader_schema();
// MMPretrain's data_preprocessor (BatchPreprocessor.hpp): mean, std, to_rgb,
// num_classes.
config::Schema preprocessor_schema();
// model.train_cfg: {augments: [Mixup | CutMix], probs}.
config::Schema batch_augments_schema();
// model.head: {loss: CrossEntropyLoss | LabelSmoothLoss} (ClassifierLoss.hpp).
config::Schema classifier_head_schema();

}  // namespace rh::data
