#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/TestUtil.hpp"
#include "data/Cifar10Dataset.hpp"
#include "host/data/DataTestUtil.hpp"

namespace rh::data {
namespace {

using ::testing::HasSubstr;

// `labels.size()` records; record r has red = r, green = 100 + r, blue = 200 + p % 50.
std::vector<uint8_t> batch_file(const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> bytes;
  for (size_t r = 0; r < labels.size(); ++r) {
    bytes.push_back(labels[r]);
    for (size_t p = 0; p < 1024; ++p) bytes.push_back(static_cast<uint8_t>(r));
    for (size_t p = 0; p < 1024; ++p) bytes.push_back(static_cast<uint8_t>(100 + r));
    for (size_t p = 0; p < 1024; ++p) bytes.push_back(static_cast<uint8_t>(200 + p % 50));
  }
  return bytes;
}

class Cifar10DatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 1; i <= 5; ++i) {
      const uint8_t first = static_cast<uint8_t>(2 * i - 2);
      test::write_bytes(dir_ / ("data_batch_" + std::to_string(i) + ".bin"),
                        batch_file({first, static_cast<uint8_t>(first + 1)}));
    }
    test::write_bytes(dir_ / "test_batch.bin", batch_file({3}));
  }
  std::shared_ptr<Dataset> build(const std::string& extra = "") {
    auto cfg = test::yaml("dataset: {type: cifar10, root: " + dir_.string() + extra + "}");
    return build_dataset(*cfg->find("dataset"), "/unused");
  }
  std::string error(const std::string& extra = "") {
    return test::config_error([&] { build(extra); });
  }

  rh::test::TempDir tmp_;
  std::filesystem::path dir_ = tmp_ / "cifar";
};

TEST_F(Cifar10DatasetTest, ReadsTheFiveTrainBatchesInOrder) {
  auto train = build();
  ASSERT_EQ(train->size(), 10u);
  EXPECT_EQ(train->num_classes(), 10);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(train->get(i).target.item<int64_t>(), int64_t(i));
  const Example e = train->get(3);  // record 1 of data_batch_2
  EXPECT_EQ(e.input.sizes(), (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(e.input.scalar_type(), torch::kFloat);
  EXPECT_EQ(e.target.dim(), 0);
  // The dataset computes (x / 255 - mean) / std in float32 (mean and std
  // rounded to float, then 3 roundings) on values up to ~2.2: within
  // ~5u·2.2 = 7e-7 of the double formula (u = 2^-24); 1e-5 leaves 14x.
  EXPECT_NEAR(e.input[0][5][5].item<float>(), (1 / 255.0 - 0.4914) / 0.2470, 1e-5);
  EXPECT_NEAR(e.input[1][0][0].item<float>(), (101 / 255.0 - 0.4822) / 0.2435, 1e-5);
  // Blue pixel (1, 17) is p = 49: 200 + 49 % 50.
  EXPECT_NEAR(e.input[2][1][17].item<float>(), (249 / 255.0 - 0.4465) / 0.2616, 1e-5);
  EXPECT_THROW(train->get(10), std::out_of_range);
}

TEST_F(Cifar10DatasetTest, TestSplitAndPerChannelNormalisation) {
  auto test = build(", split: test, mean: [0.5, 0, 1], std: [0.5, 1, 2]");
  ASSERT_EQ(test->size(), 1u);
  const Example e = test->get(0);
  EXPECT_EQ(e.target.item<int64_t>(), 3);
  // -1 exactly; 100/255 rounded once (<= u·0.4 = 2.4e-8); (200/255 - 1)/2
  // within ~3u (<= 1e-7 at that size): 1e-6 leaves 10x.
  EXPECT_NEAR(e.input[0][0][0].item<float>(), (0 / 255.0 - 0.5) / 0.5, 1e-6);
  EXPECT_NEAR(e.input[1][0][0].item<float>(), 100 / 255.0, 1e-6);
  EXPECT_NEAR(e.input[2][0][0].item<float>(), (200 / 255.0 - 1) / 2, 1e-6);
  EXPECT_THAT(
      error(", mean: [0.5, 0.5]"),
      HasSubstr("dataset.mean: expected a list of 3 numbers (red, green, blue), got 2 items"));
}

TEST_F(Cifar10DatasetTest, AFileThatIsNotWholeRecordsIsCorrupt) {
  std::vector<uint8_t> bytes = batch_file({1, 2});
  bytes.resize(bytes.size() - 1);
  test::write_bytes(dir_ / "data_batch_3.bin", bytes);
  EXPECT_EQ(error(), "job.yaml:1:32: dataset.root: '" + (dir_ / "data_batch_3.bin").string() +
                         "' is corrupt: its size 6145 bytes is not a positive multiple of 3073 (1 "
                         "label byte + 3072 pixel bytes per image; is it the binary version of "
                         "CIFAR-10?)");
  test::write_bytes(dir_ / "data_batch_3.bin", {});
  EXPECT_THAT(error(), HasSubstr("its size 0 bytes is not a positive multiple of 3073"));
  test::write_bytes(dir_ / "data_batch_3.bin", batch_file({1, 10}));
  EXPECT_THAT(error(), HasSubstr("is corrupt: record 1 has label 10, expected 0..9"));
}

TEST_F(Cifar10DatasetTest, MissingFilesAreNamed) {
  std::filesystem::remove(dir_ / "data_batch_4.bin");
  EXPECT_EQ(error(), "job.yaml:1:32: dataset.root: cannot read the CIFAR-10 batch file '" +
                         (dir_ / "data_batch_4.bin").string() + "': No such file or directory");
  // The archive's own folder is pointed out.
  std::filesystem::create_directories(dir_ / "cifar-10-batches-bin");
  std::filesystem::rename(dir_ / "data_batch_1.bin",
                          dir_ / "cifar-10-batches-bin/data_batch_1.bin");
  EXPECT_THAT(error(), HasSubstr("it is in '" + (dir_ / "cifar-10-batches-bin").string() +
                                 "'; set root to that folder"));
}

}  // namespace
}  // namespace rh::data
