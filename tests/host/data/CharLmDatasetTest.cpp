#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>

#include "common/TestUtil.hpp"
#include "data/CharLmDataset.hpp"
#include "host/data/DataTestUtil.hpp"

namespace rh::data {
namespace {

using ::testing::HasSubstr;

const std::string kText = rh::test::read_file(test::files_dir() + "/verses.txt");

std::shared_ptr<Dataset> from_yaml(const std::string& dataset_yaml,
                                   const std::string& job_dir = test::files_dir()) {
  auto cfg = test::yaml("dataset: " + dataset_yaml);
  return build_dataset(*cfg->find("dataset"), job_dir);
}

std::string decode(const CharLmDataset& d, const torch::Tensor& tokens) {
  std::string text;
  for (int64_t i = 0; i < tokens.numel(); ++i) {
    text += static_cast<char>(d.vocabulary()[static_cast<size_t>(tokens[i].item<int64_t>())]);
  }
  return text;
}

TEST(CharLmDataset, VocabularyIsTheSortedBytesOfTheWholeFile) {
  ASSERT_EQ(kText.size(), 237u);
  auto d = std::dynamic_pointer_cast<CharLmDataset>(
      from_yaml("{type: char_lm, path: verses.txt, block_size: 8}"));
  ASSERT_TRUE(d);
  const std::set<unsigned char> bytes(kText.begin(), kText.end());
  EXPECT_EQ(d->vocabulary(), std::vector<uint8_t>(bytes.begin(), bytes.end()));
  EXPECT_EQ(d->num_classes(), static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(d->task(), model::Task::LanguageModel);
  // The val split has its own text but the same vocabulary, even for bytes
  // only the train text has.
  auto val = std::dynamic_pointer_cast<CharLmDataset>(
      from_yaml("{type: char_lm, path: verses.txt, block_size: 8, split: val}"));
  EXPECT_EQ(val->vocabulary(), d->vocabulary());
}

TEST(CharLmDataset, ExampleIIsABlockAndItsNextTokens) {
  auto d = std::dynamic_pointer_cast<CharLmDataset>(
      from_yaml("{type: char_lm, path: verses.txt, block_size: 16}"));
  // Train: the first 237 - floor(23.7) = 214 bytes; 214 - 16 blocks.
  EXPECT_EQ(d->size(), 214u - 16u);
  for (size_t i : {size_t{0}, size_t{5}, d->size() - 1}) {
    const Example e = d->get(i);
    EXPECT_EQ(e.input.sizes(), (std::vector<int64_t>{16}));
    EXPECT_EQ(e.target.sizes(), (std::vector<int64_t>{16}));
    EXPECT_EQ(e.input.scalar_type(), torch::kLong);
    EXPECT_EQ(e.target.scalar_type(), torch::kLong);
    EXPECT_EQ(decode(*d, e.input), kText.substr(i, 16));
    EXPECT_EQ(decode(*d, e.target), kText.substr(i + 1, 16));
  }
  EXPECT_THROW(d->get(d->size()), std::out_of_range);
}

TEST(CharLmDataset, ValIsTheLastFractionOfTheText) {
  auto val = std::dynamic_pointer_cast<CharLmDataset>(from_yaml(
      "{type: char_lm, path: verses.txt, block_size: 10, split: val, val_fraction: 0.2}"));
  // floor(237 * 0.2) = 47 bytes from offset 190.
  EXPECT_EQ(val->size(), 47u - 10u);
  EXPECT_EQ(decode(*val, val->get(0).input), kText.substr(190, 10));
  EXPECT_EQ(decode(*val, val->get(36).target), kText.substr(227, 10));
}

TEST(CharLmDataset, AMissingFileNamesTheKeyAndTheResolvedPath) {
  const std::string error =
      test::config_error([] { from_yaml("{type: char_lm, path: texts/none.txt}", "/jobs/a"); });
  EXPECT_EQ(error,
            "job.yaml:1:32: dataset.path: cannot read the text file '/jobs/a/texts/none.txt': No "
            "such file or directory (relative paths are resolved against the job directory)");
}

TEST(CharLmDataset, ATextShorterThanABlockIsAnError) {
  rh::test::TempDir dir;
  dir.write("short.txt", "abcdefghij");  // 10 bytes: train 9, val 1
  const std::string file = (dir / "short.txt").string();
  EXPECT_EQ(test::config_error(
                [&] { from_yaml("{type: char_lm, path: short.txt, block_size: 9}", dir.path()); }),
            "job.yaml:1:32: dataset.path: '" + file +
                "' is too short for block_size 9: its train split has 9 bytes (the first 90% of "
                "10), at least 10 are needed; use a longer text or a smaller block_size");
  EXPECT_THAT(test::config_error([&] {
                from_yaml("{type: char_lm, path: short.txt, block_size: 1, split: val}",
                          dir.path());
              }),
              HasSubstr("its val split has 1 bytes (the last 10% of 10), at least 2 are needed"));
  EXPECT_NO_THROW(from_yaml("{type: char_lm, path: short.txt, block_size: 8}", dir.path()));
}

}  // namespace
}  // namespace rh::data
