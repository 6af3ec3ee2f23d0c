#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data/DataLoader.hpp"
#include "data/DataSchema.hpp"
#include "host/data/DataTestUtil.hpp"

namespace rh::data {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> validate_loader(const std::string& text) {
  std::vector<std::string> messages;
  for (const auto& e : config::validate(*test::yaml(text), loader_schema())) {
    messages.emplace_back(e.what());
  }
  return messages;
}

TEST(DataSchema, AcceptsTheQuickstartLoaders) {
  EXPECT_THAT(validate_loader("dataset: {type: synthetic_classification, num_samples: 8192, "
                              "num_features: 32, num_classes: 10}\n"
                              "batch_size: 64\nshuffle: true\n"),
              ElementsAre());
  EXPECT_THAT(validate_loader("dataset: {type: synthetic_classification, num_samples: 2048, "
                              "num_features: 32, num_classes: 10, split: val, seed: 3, "
                              "noise: 0.2}\nbatch_size: 256\ndrop_last: false\nnum_workers: 0\n"
                              "prefetch: 4\n"),
              ElementsAre());
}

TEST(DataSchema, AcceptsEveryDatasetType) {
  for (const std::string dataset : {
           "{type: char_lm, path: a.txt, block_size: 32, split: val, val_fraction: 0.05}",
           "{type: csv, path: a.csv, label_column: species, header: true, delimiter: ';', "
           "num_classes: 3}",
           "{type: csv, path: a.csv, label_column: -1}",
           "{type: mnist, root: data/mnist, split: test, mean: 0.5, std: 0.5}",
           "{type: token_bin, path: train.bin, dtype: uint32, block_size: 1024, stride: 1, "
           "vocab_size: 50304}",
           "{type: megatron_indexed, path_prefix: data/corpus_text_document, block_size: 2048, "
           "stride: 2048, vocab_size: 50304}",
           "{type: cifar10, root: data/cifar, split: train, mean: [0.5, 0.5, 0.5], std: [0.2, "
           "0.2, 0.2]}",
       }) {
    EXPECT_THAT(validate_loader("dataset: " + dataset + "\nbatch_size: 8\n"), ElementsAre())
        << dataset;
  }
}

TEST(DataSchema, ReportsEveryMistakeWithItsKey) {
  EXPECT_THAT(validate_loader("dataset: {type: synthetic_classfication}\nbatch_size: 0\n"
                              "num_workers: -1\nprefetch: 0\nshufle: true\n"),
              ElementsAre("job.yaml:1:17: dataset.type: unknown dataset type "
                          "'synthetic_classfication'; choices: CustomDataset, ImageNet, char_lm, "
                          "cifar10, csv, "
                          "megatron_indexed, mnist, synthetic_classification, token_bin (did you "
                          "mean 'synthetic_classification'?)",
                          "job.yaml:2:13: batch_size: must be >= 1, got 0",
                          "job.yaml:3:14: num_workers: must be >= 0, got -1",
                          "job.yaml:4:11: prefetch: must be >= 1, got 0",
                          "job.yaml:5:1: shufle: unknown key (did you mean 'shuffle'?)"));
  EXPECT_THAT(validate_loader("dataset: {type: char_lm, paht: a.txt, split: test}\n"),
              ElementsAre("job.yaml:1:1: missing required key 'batch_size'",
                          "job.yaml:1:10: dataset: missing required key 'path'",
                          "job.yaml:1:26: dataset.paht: unknown key (did you mean 'path'?)",
                          "job.yaml:1:46: dataset.split: expected one of train, val, got 'test'"));
  EXPECT_THAT(validate_loader("batch_size: 2\n"),
              ElementsAre("job.yaml:1:1: missing required key 'dataset'"));
}

TEST(DataSchema, LoaderOptionsReadTheValidatedTree) {
  auto cfg = test::yaml(
      "dataset: {type: csv, path: a.csv}\nbatch_size: 32\nshuffle: true\ndrop_last: true\n"
      "num_workers: 3\nprefetch: 5\n");
  const LoaderOptions o = loader_options(*cfg, 99);
  EXPECT_EQ(o.batch_size, 32u);
  EXPECT_TRUE(o.shuffle);
  EXPECT_TRUE(o.drop_last);
  EXPECT_EQ(o.num_workers, 3);
  EXPECT_EQ(o.prefetch, 5);
  EXPECT_EQ(o.seed, 99u);

  const LoaderOptions defaults = loader_options(*test::yaml("batch_size: 4\n"), 1);
  EXPECT_EQ(defaults.batch_size, 4u);
  EXPECT_FALSE(defaults.shuffle);
  EXPECT_FALSE(defaults.drop_last);
  EXPECT_EQ(defaults.num_workers, 1);
  EXPECT_EQ(defaults.prefetch, 2);
  EXPECT_FALSE(defaults.persistent_workers);
  EXPECT_FALSE(defaults.pin_memory);

  // MMEngine's and PyTorch's spellings: prefetch_factor is per worker;
  // sampler: DefaultSampler shuffles unless it says otherwise.
  const LoaderOptions mm = loader_options(
      *test::yaml("batch_size: 4\nnum_workers: 3\nprefetch_factor: 2\npersistent_workers: true\n"
                  "pin_memory: true\nsampler: {type: DefaultSampler}\n"),
      1);
  EXPECT_EQ(mm.prefetch, 6);
  EXPECT_TRUE(mm.persistent_workers);
  EXPECT_TRUE(mm.pin_memory);
  EXPECT_TRUE(mm.shuffle);
  const auto no_shuffle =
      test::yaml("batch_size: 4\nsampler: {type: DefaultSampler, shuffle: false}\n");
  EXPECT_FALSE(loader_options(*no_shuffle, 1).shuffle);
}

}  // namespace
}  // namespace rh::data
