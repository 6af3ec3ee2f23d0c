// The schemas of MMPretrain's image-classifier keys beside a built-in
// model's own: the data_preprocessor (data/BatchPreprocessor.hpp, at the top
// of the job or in `model:`), the batch augments (model.train_cfg) and the
// head's loss (model/ClassifierLoss.hpp). Here, in model/, because the
// model's schema holds them and data/ builds on model/ (never the other
// way). No LibTorch.
#pragma once

#include "config/Schema.hpp"

namespace rh::model {

// MMPretrain's data_preprocessor (data::BatchPreprocessor): mean, std,
// to_rgb, num_classes.
config::Schema preprocessor_schema();
// model.train_cfg: {augments: [Mixup | CutMix], probs}.
config::Schema batch_augments_schema();
// model.head: {loss: CrossEntropyLoss | LabelSmoothLoss} (ClassifierLoss.hpp).
config::Schema classifier_head_schema();

}  // namespace rh::model
