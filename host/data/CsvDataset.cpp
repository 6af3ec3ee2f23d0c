#include "data/CsvDataset.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string_view>

#include "config/Suggest.hpp"

namespace rh::data {
namespace {

struct Field {
  std::string_view text;  // trimmed, quotes removed
  int column = 1;         // 1-based byte column of the field in its line
};

// Splits one line at `delimiter`; trims blanks and a pair of double quotes.
std::vector<Field> split_line(std::string_view line, char delimiter) {
  std::vector<Field> fields;
  size_t start = 0;
  while (true) {
    const size_t end = std::min(line.find(delimiter, start), line.size());
    size_t a = start, b = end;
    while (a < b && (line[a] == ' ' || (line[a] == '\t' && delimiter != '\t'))) ++a;
    while (b > a && (line[b - 1] == ' ' || (line[b - 1] == '\t' && delimiter != '\t'))) --b;
    if (b - a >= 2 && line[a] == '"' && line[b - 1] == '"') ++a, --b;
    fields.push_back(Field{line.substr(a, b - a), static_cast<int>(start) + 1});
    if (end == line.size()) break;
    start = end + 1;
  }
  return fields;
}

std::optional<double> parse_number(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string join(const std::vector<std::string>& words) {
  std::string text;
  for (size_t i = 0; i < words.size(); ++i) text += (i > 0 ? ", " : "") + words[i];
  return text;
}

}  // namespace

CsvDataset::CsvDataset(CsvOptions options) {
  const std::vector<uint8_t> bytes = read_data_file(options.file, "CSV file", options.key);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  auto row_error = [&](int line, int column, const std::string& message) {
    throw config::ConfigError(config::Location{options.file, line, column}, options.key.key_path,
                              message);
  };

  // The non-blank lines, with their 1-based numbers.
  std::vector<std::pair<int, std::string_view>> lines;
  int number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    ++number;
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") != std::string_view::npos) lines.emplace_back(number, line);
  }

  std::vector<std::string> names;
  size_t first_row = 0;
  if (options.header && !lines.empty()) {
    for (const Field& f : split_line(lines[0].second, options.delimiter))
      names.emplace_back(f.text);
    first_row = 1;
  }
  if (lines.size() <= first_row) {
    throw_data_error(options.key, in_quotes(options.file) + " has no data rows" +
                                      (options.header ? " after its header" : ""));
  }
  const size_t num_columns =
      options.header ? names.size() : split_line(lines[0].second, options.delimiter).size();
  if (num_columns < 2) {
    throw_data_error(options.key, in_quotes(options.file) + " has " + std::to_string(num_columns) +
                                      " column; it needs feature columns and a label column" +
                                      " (is the delimiter right?)");
  }

  // The label column.
  size_t label = num_columns - 1;
  if (options.label_name) {
    if (!options.header) {
      throw_data_error(options.label_key, "a column name needs a header row (header: true); " +
                                              std::string("give the column's index instead"));
    }
    auto it = std::find(names.begin(), names.end(), *options.label_name);
    if (it == names.end()) {
      const std::string hint = config::suggest(*options.label_name, names);
      throw_data_error(options.label_key,
                       "no column named " + in_quotes(*options.label_name) + " in " +
                           in_quotes(options.file) + " (columns: " + join(names) + ")" +
                           (hint.empty() ? "" : "; did you mean " + in_quotes(hint) + "?"));
    }
    label = static_cast<size_t>(it - names.begin());
  } else if (options.label_index) {
    const int64_t n = static_cast<int64_t>(num_columns);
    const int64_t i = *options.label_index < 0 ? *options.label_index + n : *options.label_index;
    if (i < 0 || i >= n) {
      throw_data_error(options.label_key, "column index " + std::to_string(*options.label_index) +
                                              " is out of range: " + in_quotes(options.file) +
                                              " has " + std::to_string(n) +
                                              " columns (indices 0.." + std::to_string(n - 1) +
                                              ", or -1.." + std::to_string(-n) + " from the end)");
    }
    label = static_cast<size_t>(i);
  }
  auto column_name = [&](size_t c) {
    return options.header ? "column " + in_quotes(names[c]) + " (index " + std::to_string(c) + ")"
                          : "column index " + std::to_string(c);
  };
  for (size_t c = 0; c < num_columns; ++c) {
    if (c != label && options.header) feature_names_.push_back(names[c]);
  }

  // The rows.
  num_features_ = static_cast<int64_t>(num_columns) - 1;
  const size_t num_rows = lines.size() - first_row;
  features_.reserve(num_rows * static_cast<size_t>(num_features_));
  labels_.reserve(num_rows);
  int64_t max_label = -1;
  for (size_t r = first_row; r < lines.size(); ++r) {
    const int line = lines[r].first;
    const std::vector<Field> fields = split_line(lines[r].second, options.delimiter);
    if (fields.size() != num_columns) {
      row_error(line, 1,
                "row has " + std::to_string(fields.size()) + " fields, expected " +
                    std::to_string(num_columns) +
                    (options.header ? " (the header has " + std::to_string(num_columns) + ")"
                                    : " (the first row, line " + std::to_string(lines[0].first) +
                                          ", has " + std::to_string(num_columns) + ")"));
    }
    for (size_t c = 0; c < num_columns; ++c) {
      const Field& f = fields[c];
      const std::optional<double> value = parse_number(f.text);
      if (c == label) {
        if (!value || *value < 0 || *value != std::floor(*value) || *value > 1e9) {
          row_error(line, f.column,
                    "label " + column_name(c) + ": expected a class id (an integer >= 0), got " +
                        in_quotes(std::string(f.text)));
        }
        const int64_t id = static_cast<int64_t>(*value);
        if (options.num_classes && id >= *options.num_classes) {
          row_error(line, f.column,
                    "label " + std::to_string(id) + " is out of range for num_classes " +
                        std::to_string(*options.num_classes) + " (class ids are 0.." +
                        std::to_string(*options.num_classes - 1) + ")");
        }
        labels_.push_back(id);
        max_label = std::max(max_label, id);
      } else {
        if (!value || !std::isfinite(*value)) {
          row_error(line, f.column,
                    column_name(c) + ": expected a number, got " + in_quotes(std::string(f.text)));
        }
        features_.push_back(static_cast<float>(*value));
      }
    }
  }
  num_classes_ = options.num_classes ? *options.num_classes : max_label + 1;
}

Example CsvDataset::get(size_t index) const {
  if (index >= size()) {
    throw std::out_of_range("csv: index " + std::to_string(index) + " >= size " +
                            std::to_string(size()));
  }
  at::Tensor input = at::empty({num_features_}, at::kFloat);
  std::copy_n(features_.begin() + static_cast<std::ptrdiff_t>(index) * num_features_, num_features_,
              input.data_ptr<float>());
  return Example{input, at::scalar_tensor(labels_[index], at::kLong)};
}

}  // namespace rh::data
