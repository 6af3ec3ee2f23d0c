// The LibTorch-backed dataset readers: each input is written to the files a
// dataset reads, the dataset is built, and its first and last examples read.
#include <ATen/ATen.h>

#include "FuzzEntries.hpp"
#include "config/ConfigNode.hpp"
#include "data/Cifar10Dataset.hpp"
#include "data/CsvDataset.hpp"
#include "data/MnistDataset.hpp"

namespace rh::fuzz {
namespace {

void read_ends(const data::Dataset& dataset) {
  if (dataset.size() == 0) return;
  (void)dataset.get(0);
  (void)dataset.get(dataset.size() - 1);
}

}  // namespace

void csv_dataset(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const uint8_t flags = data[0];
  data::CsvOptions options;
  options.file = scratch_dir() + "/table.csv";
  options.header = (flags & 1u) != 0;
  options.delimiter = (flags & 2u) != 0 ? ';' : ',';
  if ((flags & 4u) != 0) options.label_name = "label";
  if ((flags & 8u) != 0) options.label_index = -1;
  write_file(options.file, data + 1, size - 1);
  try {
    const data::CsvDataset dataset(options);
    read_ends(dataset);
  } catch (const config::ConfigError&) {
    // A bad table, reported at its file:line:column: what the reader promises.
  }
}

void mnist_dataset(const uint8_t* data, size_t size) {
  if (size < 4) return;
  const size_t declared =
      size_t{data[0]} | size_t{data[1]} << 8 | size_t{data[2]} << 16 | size_t{data[3]} << 24;
  const size_t images = std::min(declared, size - 4);
  data::MnistOptions options;
  options.root = scratch_dir();
  write_file(options.root + "/train-images-idx3-ubyte", data + 4, images);
  write_file(options.root + "/train-labels-idx1-ubyte", data + 4 + images, size - 4 - images);
  try {
    const data::MnistDataset dataset(options);
    read_ends(dataset);
  } catch (const config::ConfigError&) {
    // A bad idx file, named: what the reader promises.
  }
}

void cifar10_dataset(const uint8_t* data, size_t size) {
  data::Cifar10Options options;
  options.root = scratch_dir();
  options.split = data::Cifar10Options::Split::Test;
  write_file(options.root + "/test_batch.bin", data, size);
  try {
    const data::Cifar10Dataset dataset(options);
    read_ends(dataset);
  } catch (const config::ConfigError&) {
    // A bad batch file, named: what the reader promises.
  }
}

}  // namespace rh::fuzz
