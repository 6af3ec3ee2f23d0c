// dist.keep_global_batch after an elastic restart on fewer ranks
// (host/lifecycle/ElasticBatch.hpp): the loader's per-rank batch and the
// micro-batches that keep the first world's global batch, or the refusal.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/ConfigNode.hpp"
#include "config/YamlReader.hpp"
#include "job/JobSettings.hpp"
#include "lifecycle/ElasticBatch.hpp"

using rh::lifecycle::elastic_batch;
using ::testing::HasSubstr;

namespace {

rh::config::NodePtr job(const std::string& yaml) {
  return rh::config::parse_yaml(yaml, "job.yaml");
}

// The dist keys as the Runner reads them (config::read_settings).
rh::config::DistCfg dist(const std::string& yaml) {
  return rh::config::read_settings(*job(yaml)).dist;
}

std::string refusal(const std::string& yaml, size_t batch, int first, int now) {
  try {
    elastic_batch(dist(yaml), batch, first, now);
  } catch (const rh::config::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ElasticBatch, NotElasticOrTheSameWorldChangesNothing) {
  auto j = job("seed: 1\n");
  auto b = elastic_batch(rh::config::read_settings(*j).dist, 16, 0, 2);
  EXPECT_EQ(b.batch_size, 16u);
  EXPECT_EQ(b.micro_batches, 1);
  EXPECT_EQ(b.log, "");
  b = elastic_batch(rh::config::read_settings(*j).dist, 16, 4, 4);
  EXPECT_EQ(b.batch_size, 16u);
  EXPECT_EQ(b.micro_batches, 1);
}

TEST(ElasticBatch, AccumulationIsTheDefault) {
  for (const char* yaml : {"seed: 1\n", "dist: {keep_global_batch: accumulate}\n",
                           "dist: {keep_global_batch: true}\n"}) {
    auto b = elastic_batch(dist(yaml), 16, 4, 2);
    EXPECT_EQ(b.batch_size, 32u) << yaml;
    EXPECT_EQ(b.micro_batches, 2) << yaml;
    EXPECT_THAT(b.log, HasSubstr("the global batch of 64 (16 per rank x 4 ranks at the first "
                                 "start) is kept by accumulation: each rank takes 2 "
                                 "micro-batches of 16 per iteration"));
  }
}

TEST(ElasticBatch, ALargerBatchOrNone) {
  auto b = elastic_batch(dist("dist: {keep_global_batch: batch_size}\n"), 8, 6, 4);
  EXPECT_EQ(b.batch_size, 12u);
  EXPECT_EQ(b.micro_batches, 1);
  EXPECT_THAT(b.log, HasSubstr("is kept by a larger batch: 12 per rank"));
  b = elastic_batch(dist("dist: {keep_global_batch: false}\n"), 8, 6, 4);
  EXPECT_EQ(b.batch_size, 8u);
  EXPECT_EQ(b.micro_batches, 1);
  EXPECT_THAT(b.log, HasSubstr("is not kept (dist.keep_global_batch: false): it is 32 now"));
}

TEST(ElasticBatch, WhatCannotBeKeptWholeIsRefusedAtTheKey) {
  EXPECT_THAT(refusal("dist: {keep_global_batch: accumulate}\n", 8, 3, 2),
              HasSubstr("job.yaml:1:27: dist.keep_global_batch: the global batch of 24 (8 per "
                        "rank x 3 ranks at the first start) cannot be kept on 2 ranks by "
                        "accumulation: 3/2 is no whole number of micro-batches"));
  EXPECT_THAT(refusal("dist: {keep_global_batch: batch_size}\n", 5, 3, 2),
              HasSubstr("cannot be kept on 2 ranks: 15/2 is no whole batch"));
  EXPECT_THAT(refusal("seed: 1\n", 8, 2, 4),
              HasSubstr("cannot be kept on more ranks (4): an elastic restart only shrinks"));
}

}  // namespace
