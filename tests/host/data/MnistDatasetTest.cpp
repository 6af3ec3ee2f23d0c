#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/TestUtil.hpp"
#include "data/MnistDataset.hpp"
#include "host/data/DataTestUtil.hpp"

namespace rh::data {
namespace {

using ::testing::HasSubstr;

// idx3 image file: magic, count, rows, cols, then count·rows·cols pixels
// (image i is filled with (i * 40 + p) % 256).
std::vector<uint8_t> image_file(uint32_t count, uint32_t rows = 28, uint32_t cols = 28,
                                uint32_t magic = 2051) {
  std::vector<uint8_t> bytes;
  for (uint32_t v : {magic, count, rows, cols}) test::append_u32_big_endian(bytes, v);
  for (uint32_t i = 0; i < count; ++i) {
    for (uint32_t p = 0; p < rows * cols; ++p)
      bytes.push_back(static_cast<uint8_t>((i * 40 + p) % 256));
  }
  return bytes;
}

std::vector<uint8_t> label_file(const std::vector<uint8_t>& labels, uint32_t magic = 2049) {
  std::vector<uint8_t> bytes;
  test::append_u32_big_endian(bytes, magic);
  test::append_u32_big_endian(bytes, static_cast<uint32_t>(labels.size()));
  bytes.insert(bytes.end(), labels.begin(), labels.end());
  return bytes;
}

class MnistDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_bytes(dir_ / "train-images-idx3-ubyte", image_file(3));
    test::write_bytes(dir_ / "train-labels-idx1-ubyte", label_file({7, 0, 9}));
    test::write_bytes(dir_ / "t10k-images-idx3-ubyte", image_file(2));
    test::write_bytes(dir_ / "t10k-labels-idx1-ubyte", label_file({1, 2}));
  }
  std::shared_ptr<Dataset> build(const std::string& extra = "") {
    auto cfg = test::yaml("dataset: {type: mnist, root: mnist" + extra + "}");
    return build_dataset(*cfg->find("dataset"), tmp_.path().string());
  }
  std::string error(const std::string& extra = "") {
    return test::config_error([&] { build(extra); });
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  rh::test::TempDir tmp_;
  std::filesystem::path dir_ = tmp_ / "mnist";
};

TEST_F(MnistDatasetTest, ReadsImagesAndLabels) {
  auto train = build();
  EXPECT_EQ(train->size(), 3u);
  EXPECT_EQ(train->num_classes(), 10);
  const Example e = train->get(1);
  EXPECT_EQ(e.input.sizes(), (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(e.input.scalar_type(), torch::kFloat);
  EXPECT_EQ(e.target.dim(), 0);
  EXPECT_EQ(e.target.item<int64_t>(), 0);
  // Pixel p of image 1 is 40 + p: scaled to [0, 1], then (x - 0.1307) / 0.3081,
  // in float32 (mean and std rounded to float, then 3 roundings) on values
  // up to ~2.8: within ~5u·2.8 = 8e-7 of the double formula (u = 2^-24).
  EXPECT_NEAR(e.input[0][0][0].item<float>(), (40 / 255.0 - 0.1307) / 0.3081, 1e-5);
  EXPECT_NEAR(e.input[0][1][2].item<float>(), (70 / 255.0 - 0.1307) / 0.3081, 1e-5);
  EXPECT_EQ(train->get(2).target.item<int64_t>(), 9);
  EXPECT_THROW(train->get(3), std::out_of_range);

  auto test = build(", split: test, mean: 0.5, std: 0.5");
  EXPECT_EQ(test->size(), 2u);
  EXPECT_EQ(test->get(1).target.item<int64_t>(), 2);
  EXPECT_NEAR(test->get(0).input[0][0][0].item<float>(), -1.0, 1e-6);  // (0 - 0.5) / 0.5: exact
}

TEST_F(MnistDatasetTest, AMissingFileNamesIt) {
  std::filesystem::remove(dir_ / "train-labels-idx1-ubyte");
  test::write_bytes(dir_ / "train-labels-idx1-ubyte.gz", {0x1f, 0x8b});
  EXPECT_EQ(error(), "job.yaml:1:30: dataset.root: cannot read the MNIST label file '" +
                         file("train-labels-idx1-ubyte") +
                         "': No such file or directory (relative paths are resolved against the "
                         "job directory); found '" +
                         file("train-labels-idx1-ubyte.gz") + "': decompress it with gunzip");
}

TEST_F(MnistDatasetTest, AWrongMagicNumberIsAnError) {
  test::write_bytes(dir_ / "train-images-idx3-ubyte", image_file(3, 28, 28, 2049));
  EXPECT_EQ(error(), "job.yaml:1:30: dataset.root: '" + file("train-images-idx3-ubyte") +
                         "' is not an idx image (idx3) file: magic number 2049, expected 2051 (is "
                         "it still gzip-compressed?)");
  SetUp();
  test::write_bytes(dir_ / "train-labels-idx1-ubyte", label_file({1, 2, 3}, 2051));
  EXPECT_THAT(error(),
              HasSubstr("is not an idx label (idx1) file: magic number 2051, expected 2049"));
}

TEST_F(MnistDatasetTest, ATruncatedFileSaysWhatWasExpected) {
  std::vector<uint8_t> images = image_file(3);
  images.resize(images.size() - 100);
  test::write_bytes(dir_ / "train-images-idx3-ubyte", images);
  EXPECT_EQ(error(), "job.yaml:1:30: dataset.root: '" + file("train-images-idx3-ubyte") +
                         "' is truncated: expected 2368 bytes (16-byte header + 3 images of "
                         "28x28), found 2268");

  test::write_bytes(dir_ / "train-images-idx3-ubyte", {0, 0, 8, 3, 0});
  EXPECT_THAT(error(), HasSubstr("is truncated: expected a 16-byte idx header, found 5 bytes"));

  SetUp();
  std::vector<uint8_t> labels = label_file({1, 2, 3});
  labels.push_back(4);
  test::write_bytes(dir_ / "train-labels-idx1-ubyte", labels);
  EXPECT_THAT(error(), HasSubstr("is larger than its header says: expected 11 bytes (8-byte "
                                 "header + 3 labels), found 12"));
}

TEST_F(MnistDatasetTest, ImagesAndLabelsMustAgree) {
  test::write_bytes(dir_ / "train-labels-idx1-ubyte", label_file({1, 2}));
  EXPECT_THAT(error(),
              HasSubstr("has 2 labels but '" + file("train-images-idx3-ubyte") + "' has 3 images"));
  test::write_bytes(dir_ / "train-labels-idx1-ubyte", label_file({1, 12, 3}));
  EXPECT_THAT(error(), HasSubstr("label 12 of image 1 is not a digit 0..9"));
}

}  // namespace
}  // namespace rh::data
