// The keys of every transform an image pipeline implements (Pipeline.hpp),
// as MMPretrain and mmcv name them. Part of rh_config (no image code), as
// every schema is, so the job is validated before anything is built.
#pragma once

#include "config/Schema.hpp"

namespace rh::data::image {

// A `pipeline:` list: each entry's `type` picks its keys; another type is
// "unknown transform type", a key a transform lacks "unknown key".
config::Schema pipeline_schema();

// The keys of RandAugment and RandomErasing (their builders validate a map
// against them too: they are also built alone, in tests).
config::Schema rand_augment_schema();
config::Schema random_erasing_schema();

}  // namespace rh::data::image
