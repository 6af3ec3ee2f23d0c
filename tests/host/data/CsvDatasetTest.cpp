#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/TestUtil.hpp"
#include "data/CsvDataset.hpp"
#include "host/data/DataTestUtil.hpp"

namespace rh::data {
namespace {

using ::testing::HasSubstr;

class CsvDatasetTest : public ::testing::Test {
 protected:
  // Writes `text` to data.csv and builds `dataset: {type: csv, path: data.csv<extra>}`.
  std::shared_ptr<CsvDataset> build(const std::string& text, const std::string& extra = "") {
    dir_.write("data.csv", text);
    auto cfg = test::yaml("dataset: {type: csv, path: data.csv" + extra + "}");
    return std::dynamic_pointer_cast<CsvDataset>(build_dataset(*cfg->find("dataset"), dir()));
  }
  std::string error(const std::string& text, const std::string& extra = "") {
    return test::config_error([&] { build(text, extra); });
  }
  std::string dir() const { return dir_.path().string(); }
  std::string file() const { return (dir_ / "data.csv").string(); }

  rh::test::TempDir dir_;
};

std::vector<float> floats(const torch::Tensor& t) {
  return std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
}

TEST_F(CsvDatasetTest, ReadsFeaturesAndTheLastColumnAsLabels) {
  auto d = build("a,b,c,label\n1,2,3,0\n4.5, -5 ,6e-1,2\n\n7,8,9,1\n");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->size(), 3u);
  EXPECT_EQ(d->num_features(), 3);
  EXPECT_EQ(d->num_classes(), 3);  // the largest label + 1
  EXPECT_EQ(d->feature_names(), (std::vector<std::string>{"a", "b", "c"}));
  const Example e = d->get(1);
  EXPECT_EQ(e.input.scalar_type(), torch::kFloat);
  EXPECT_EQ(floats(e.input), (std::vector<float>{4.5f, -5.f, 0.6f}));
  EXPECT_EQ(e.target.dim(), 0);
  EXPECT_EQ(e.target.item<int64_t>(), 2);
  EXPECT_EQ(d->get(2).target.item<int64_t>(), 1);
  EXPECT_THROW(d->get(3), std::out_of_range);
}

TEST_F(CsvDatasetTest, TheLabelColumnByNameOrIndex) {
  const std::string text = "\"species\",len,width\r\n1,0.5,0.25\r\n0,1.5,1.25\r\n";
  auto by_name = build(text, ", label_column: species, num_classes: 4");
  EXPECT_EQ(by_name->num_classes(), 4);
  EXPECT_EQ(by_name->feature_names(), (std::vector<std::string>{"len", "width"}));
  EXPECT_EQ(floats(by_name->get(0).input), (std::vector<float>{0.5f, 0.25f}));
  EXPECT_EQ(by_name->get(0).target.item<int64_t>(), 1);

  auto by_index = build(text, ", label_column: 0");
  EXPECT_EQ(floats(by_index->get(1).input), (std::vector<float>{1.5f, 1.25f}));
  auto from_end = build(text, ", label_column: -3");
  EXPECT_EQ(from_end->get(1).target.item<int64_t>(), 0);
}

TEST_F(CsvDatasetTest, WithoutHeaderAndWithAnotherDelimiter) {
  auto d = build("1;2;1\n3;4;0\n", ", header: false, delimiter: ';'");
  EXPECT_EQ(d->size(), 2u);
  EXPECT_EQ(d->feature_names(), std::vector<std::string>{});
  EXPECT_EQ(floats(d->get(1).input), (std::vector<float>{3.f, 4.f}));
  auto tabs = build("1\t2\t1\n", ", header: false, delimiter: \"\\t\"");
  EXPECT_EQ(floats(tabs->get(0).input), (std::vector<float>{1.f, 2.f}));
}

TEST_F(CsvDatasetTest, ARowWithTheWrongNumberOfFieldsNamesItsLine) {
  EXPECT_EQ(error("a,b,c,d,label\n1,2,3,4,0\n\n1,2,0\n"),
            file() + ":4:1: dataset.path: row has 3 fields, expected 5 (the header has 5)");
  EXPECT_EQ(error("1,2,0\n1,2,3,0\n", ", header: false"),
            file() +
                ":2:1: dataset.path: row has 4 fields, expected 3 (the first row, line 1, "
                "has 3)");
}

TEST_F(CsvDatasetTest, ANonNumericFieldNamesItsColumn) {
  EXPECT_EQ(error("a,width,label\n1,2,0\n1,abc,0\n"),
            file() + ":3:3: dataset.path: column 'width' (index 1): expected a number, got 'abc'");
  EXPECT_EQ(error("1,,0\n", ", header: false"),
            file() + ":1:3: dataset.path: column index 1: expected a number, got ''");
  EXPECT_THAT(error("a,label\nnan,0\n"), HasSubstr("expected a number, got 'nan'"));
}

TEST_F(CsvDatasetTest, LabelsMustBeClassIds) {
  EXPECT_EQ(error("a,label\n1,0\n2,1.5\n"),
            file() +
                ":3:3: dataset.path: label column 'label' (index 1): expected a class id (an "
                "integer >= 0), got '1.5'");
  EXPECT_THAT(error("a,label\n1,-1\n"), HasSubstr("got '-1'"));
  EXPECT_THAT(error("a,label\n1,cat\n"), HasSubstr("got 'cat'"));
  EXPECT_EQ(error("a,label\n1,0\n1,5\n", ", num_classes: 5"),
            file() +
                ":3:3: dataset.path: label 5 is out of range for num_classes 5 (class ids "
                "are 0..4)");
}

TEST_F(CsvDatasetTest, AnUnknownLabelColumnIsAnErrorAtItsKey) {
  EXPECT_EQ(error("a,b,label\n1,2,0\n", ", label_column: lable"),
            "job.yaml:1:52: dataset.label_column: no column named 'lable' in '" + file() +
                "' (columns: a, b, label); did you mean 'label'?");
  EXPECT_EQ(error("a,b,label\n1,2,0\n", ", label_column: 3"),
            "job.yaml:1:52: dataset.label_column: column index 3 is out of range: '" + file() +
                "' has 3 columns (indices 0..2, or -1..-3 from the end)");
  EXPECT_THAT(error("1,2,0\n", ", header: false, label_column: b"),
              HasSubstr("a column name needs a header row"));
}

TEST_F(CsvDatasetTest, EmptyFilesAndMissingFiles) {
  EXPECT_EQ(error("a,b,label\n\n"),
            "job.yaml:1:28: dataset.path: '" + file() + "' has no data rows after its header");
  EXPECT_THAT(error("1\n2\n", ", header: false"), HasSubstr("is the delimiter right?"));
  EXPECT_THAT(error("a,label\n1,0\n", ", delimiter: ';;'"),
              HasSubstr("dataset.delimiter: expected one character, got ';;'"));
  auto cfg = test::yaml("dataset: {type: csv, path: /no/such.csv}");
  EXPECT_EQ(test::config_error([&] { build_dataset(*cfg->find("dataset"), dir()); }),
            "job.yaml:1:28: dataset.path: cannot read the CSV file '/no/such.csv': No such file or "
            "directory");
}

}  // namespace
}  // namespace rh::data
