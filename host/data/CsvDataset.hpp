// `type: csv` — a table of numbers: feature columns and one label column
// holding class ids 0..C-1. The whole file is parsed up front, so a bad row is
// reported before training starts, as <file>:<line>:<column>.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/DataFiles.hpp"
#include "data/Dataset.hpp"

namespace rh::data {

struct CsvOptions {
  std::string file;  // resolved path
  FileKey key;       // the `path:` key, for errors
  // The label column: a name (needs a header) or an index (negative counts from
  // the end); neither = the last column.
  std::optional<std::string> label_name;
  std::optional<int64_t> label_index;
  FileKey label_key;  // the `label_column:` key, for errors
  bool header = true;
  char delimiter = ',';
  std::optional<int64_t> num_classes;  // default: the largest label + 1
};

class CsvDataset : public Dataset {
 public:
  // Throws ConfigError: at `key` (unreadable file, no data rows, fewer than 2
  // columns), at `label_key` (unknown label column), or at <file>:<line>:<col>
  // for a bad row:
  //   row has 3 fields, expected 5 (the header has 5)
  //   column 'width' (index 2): expected a number, got 'abc'
  //   label column 'species' (index 4): expected a class id (an integer >= 0), got '1.5'
  //   label 7 is out of range for num_classes 5
  explicit CsvDataset(CsvOptions options);

  size_t size() const override { return labels_.size(); }
  Example get(size_t index) const override;  // input (F) float32, target () int64
  model::Task task() const override { return model::Task::Classification; }
  int64_t num_classes() const override { return num_classes_; }

  int64_t num_features() const { return num_features_; }
  // Header names of the feature columns (empty without a header).
  const std::vector<std::string>& feature_names() const { return feature_names_; }

 private:
  int64_t num_features_ = 0;
  int64_t num_classes_ = 0;
  std::vector<std::string> feature_names_;
  std::vector<float> features_;  // (N, F) row-major
  std::vector<int64_t> labels_;
};

}  // namespace rh::data
