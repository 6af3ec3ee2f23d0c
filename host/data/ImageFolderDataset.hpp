// `type: CustomDataset` and `type: ImageNet` — images on disk with
// MMPretrain's keys and layouts:
//   a folder of class sub-folders (classes sorted by name, files found
//   recursively and sorted), or an annotation file of `relative/path label`
//   lines (MMPretrain's ImageNet with meta/train.txt);
//   data_root joined with data_prefix (the images) and ann_file; ImageNet's
//   `split` defaults data_prefix to the split's name and ann_file to
//   meta/<split>.txt where that exists.
// Each example is its file run through the `pipeline` (image/Pipeline.hpp)
// with the sample's own generator (seed, epoch, index): input (3, H, W)
// uint8 in the pipeline's channel order (BGR), for the data_preprocessor
// (BatchPreprocessor.hpp); target () int64.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/DataFiles.hpp"
#include "data/Dataset.hpp"

namespace rh::data {
namespace image {
class Pipeline;
}

struct ImageFolderOptions {
  std::string images;    // resolved folder the paths are relative to (data_root/data_prefix)
  FileKey images_key;    // data_prefix's key (or data_root's), for errors
  std::string ann_file;  // resolved annotation file; empty: find class folders
  FileKey ann_key;
  std::vector<std::string> classes;  // given names; empty: the folders' (or labels')
  FileKey classes_key;
  int64_t default_classes = 0;  // ImageNet: 1000 when `classes` is not given
  std::vector<std::string> extensions = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif"};
};

class ImageFolderDataset : public Dataset {
 public:
  // Lists the images. Throws ConfigError at the key: no such folder, no
  // image in it, an annotation line that is not `path label` (file:line), a
  // label outside the classes, classes that do not match the folders.
  ImageFolderDataset(ImageFolderOptions options, std::shared_ptr<const image::Pipeline> pipeline);
  ~ImageFolderDataset() override;

  size_t size() const override { return samples_.size(); }
  Example get(size_t index) const override { return sample(index, SampleKey{}); }
  // Throws std::runtime_error "sample <index>: <file>: <why>" for a file
  // that does not decode or a transform that fails.
  Example sample(size_t index, SampleKey key) const override;
  model::Task task() const override { return model::Task::Classification; }
  int64_t num_classes() const override { return num_classes_; }

  const std::string& path(size_t index) const { return samples_[index].path; }
  int64_t label(size_t index) const { return samples_[index].label; }

 private:
  struct Entry {
    std::string path;  // absolute
    int64_t label;
  };
  void find_in_folders();
  void read_annotations();

  ImageFolderOptions options_;
  std::shared_ptr<const image::Pipeline> pipeline_;
  std::vector<Entry> samples_;
  int64_t num_classes_ = 0;
};

}  // namespace rh::data
