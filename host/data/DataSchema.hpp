// The schema of `data.train` / `data.val` / `data.test` (no LibTorch here).
#pragma once

#include "config/Schema.hpp"

namespace rh::data {

// {dataset: <typed union of dataset types>, batch_size, shuffle, drop_last, num_workers, prefetch}
config::Schema loader_schema();
// The data_preprocessor, batch augments and head: model/ClassifierSchema.hpp.

}  // namespace rh::data
