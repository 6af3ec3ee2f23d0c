#include "data/ImageFolderDataset.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "data/image/Pipeline.hpp"

namespace rh::data {
namespace fs = std::filesystem;

ImageFolderDataset::ImageFolderDataset(ImageFolderOptions options,
                                       std::shared_ptr<const image::Pipeline> pipeline)
    : options_(std::move(options)), pipeline_(std::move(pipeline)) {
  std::error_code ec;
  if (!fs::is_directory(options_.images, ec))
    throw_data_error(options_.images_key,
                     "the image folder " + in_quotes(options_.images) + " does not exist");
  if (options_.ann_file.empty())
    find_in_folders();
  else
    read_annotations();
  if (samples_.empty()) {
    std::string exts;
    for (const auto& e : options_.extensions) exts += (exts.empty() ? "" : ", ") + e;
    throw_data_error(
        options_.ann_file.empty() ? options_.images_key : options_.ann_key,
        "no image in " +
            in_quotes(options_.ann_file.empty() ? options_.images : options_.ann_file) +
            " (extensions " + exts + ")");
  }
}

ImageFolderDataset::~ImageFolderDataset() = default;

namespace {

bool has_extension(const std::string& name, const std::vector<std::string>& extensions) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& e : extensions)
    if (lower.size() >= e.size() && lower.compare(lower.size() - e.size(), e.size(), e) == 0)
      return true;
  return false;
}

}  // namespace

// MMPretrain's find_folders + get_samples: class i is the i-th sub-folder by
// name; its files, found recursively, in the order of their relative paths.
void ImageFolderDataset::find_in_folders() {
  std::vector<std::string> folders;
  for (const auto& entry : fs::directory_iterator(options_.images))
    if (entry.is_directory()) folders.push_back(entry.path().filename().string());
  std::sort(folders.begin(), folders.end());
  if (folders.empty())
    throw_data_error(options_.images_key,
                     in_quotes(options_.images) +
                         " has no class sub-folders (CustomDataset's layout: one folder per "
                         "class; or give ann_file)");
  const size_t expected = !options_.classes.empty() ? options_.classes.size()
                                                    : static_cast<size_t>(options_.default_classes);
  if (expected != 0 && expected != folders.size())
    throw_data_error(options_.classes.empty() ? options_.images_key : options_.classes_key,
                     std::to_string(folders.size()) + " class folders in " +
                         in_quotes(options_.images) + " but " + std::to_string(expected) +
                         " classes" +
                         (options_.classes.empty() ? " (ImageNet's; give `classes:` or use type "
                                                     "CustomDataset)"
                                                   : ""));
  for (size_t c = 0; c < folders.size(); ++c) {
    const fs::path dir = fs::path(options_.images) / folders[c];
    std::vector<std::string> files;
    for (const auto& entry :
         fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink))
      if (!entry.is_directory() &&
          has_extension(entry.path().filename().string(), options_.extensions))
        files.push_back(entry.path().lexically_relative(dir).string());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) samples_.push_back({(dir / f).string(), static_cast<int64_t>(c)});
  }
  num_classes_ = static_cast<int64_t>(folders.size());
}

// `relative/path label` per line (split at the last space); blank lines skipped.
void ImageFolderDataset::read_annotations() {
  const std::vector<uint8_t> bytes =
      read_data_file(options_.ann_file, "annotation file", options_.ann_key);
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  std::string line;
  int64_t largest = -1;
  const int64_t given = !options_.classes.empty() ? static_cast<int64_t>(options_.classes.size())
                                                  : options_.default_classes;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    size_t start = 0;
    while (start < line.size() && std::isspace(static_cast<unsigned char>(line[start]))) ++start;
    if (start == line.size()) continue;
    const size_t space = line.rfind(' ');
    const std::string where = in_quotes(options_.ann_file) + " line " + std::to_string(number);
    int64_t label = -1;
    size_t used = 0;
    try {
      if (space != std::string::npos && space > start)
        label = std::stoll(line.substr(space + 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (space == std::string::npos || space <= start || used != line.size() - space - 1)
      throw_data_error(options_.ann_key, where + ": expected `relative/path label`, got " +
                                             in_quotes(line.substr(start)));
    if (label < 0 || (given > 0 && label >= given))
      throw_data_error(
          options_.ann_key,
          where + ": label " + std::to_string(label) +
              (given > 0 ? " outside the " + std::to_string(given) + " classes" : " is negative"));
    largest = std::max(largest, label);
    samples_.push_back(
        {(fs::path(options_.images) / line.substr(start, space - start)).string(), label});
  }
  num_classes_ = given > 0 ? given : largest + 1;
}

Example ImageFolderDataset::sample(size_t index, SampleKey key) const {
  const Entry& e = samples_.at(index);
  image::Sample s;
  s.path = e.path;
  s.label = e.label;
  image::SampleRng rng(key.seed, key.epoch, index);
  try {
    pipeline_->run(s, rng);
  } catch (const std::exception& err) {
    const std::string what = err.what();
    // An ImageError names the file already.
    throw std::runtime_error("sample " + std::to_string(index) + ": " +
                             (what.rfind(e.path, 0) == 0 ? what : e.path + ": " + what));
  }
  const image::Image& img = s.img;
  at::Tensor hwc = at::empty({img.height, img.width, img.channels}, at::kByte);
  std::memcpy(hwc.data_ptr<uint8_t>(), img.pixels.data(), img.pixels.size());
  // A (3, H, W) view: the loader's stack writes the channels-first batch
  // in its one copy.
  return Example{hwc.permute({2, 0, 1}), at::scalar_tensor(e.label, at::kLong)};
}

}  // namespace rh::data
