// CustomDataset / ImageNet (ImageFolderDataset.hpp) on folders Pillow
// writes: MMPretrain's layouts and orders, its annotation files, the errors
// naming the file and line, and the loader's guarantees for images: a
// sample's transforms drawn from (seed, epoch, index), so any number of
// workers and ranks and a resume at any batch give the same bytes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "common/TestUtil.hpp"
#include "data/DataLoader.hpp"
#include "data/ImageFolderDataset.hpp"
#include "host/data/DataTestUtil.hpp"

namespace rh::data {
namespace {

using ::testing::HasSubstr;

// Three classes (folders b_cat, a_dog, c_eel: sorted a, b, c), JPEGs and
// PNGs of several sizes, one in a nested folder, a text file (skipped), and
// MMPretrain's ImageNet meta/train.txt over the same files.
void write_folder(const rh::test::TempDir& dir) {
  const auto script = dir.write("make.py", R"(
import os, numpy as np
from PIL import Image
rng = np.random.default_rng(0)
lines = []
for c, name in enumerate(['a_dog', 'b_cat', 'c_eel']):
    for i in range(5):
        sub = os.path.join('train', name, 'nested' if i == 4 else '')
        os.makedirs(sub, exist_ok=True)
        h, w = 20 + 3 * i, 28 + 5 * c
        img = Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
        ext = 'png' if i == 1 else 'JPEG'
        path = os.path.join(sub, f'{i}.{ext}')
        img.save(path)
        lines.append(f'{os.path.relpath(path, "train")} {c}')
open('train/a_dog/notes.txt', 'w').write('not an image')
os.makedirs('meta', exist_ok=True)
open('meta/train.txt', 'w').write('\n'.join(lines) + '\n')
)");
  const auto r = rh::test::run_command("cd " + rh::test::quote(dir.path().string()) +
                                       " && /usr/bin/python3 make.py");
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

const std::string kPipeline =
    "[{type: LoadImageFromFile}, {type: RandomResizedCrop, scale: 12, backend: pillow, "
    "interpolation: bicubic}, {type: RandomFlip, prob: 0.5, direction: horizontal}, "
    "{type: PackInputs}]";

std::shared_ptr<Dataset> dataset(const rh::test::TempDir& dir, const std::string& keys) {
  auto cfg = test::yaml("dataset: {" + keys + ", pipeline: " + kPipeline + "}");
  return build_dataset(*cfg->find("dataset"), dir.path().string());
}

TEST(ImageFolderDatasetTest, ClassFoldersSortedAndTheirFilesInOrder) {
  rh::test::TempDir dir;
  write_folder(dir);
  const auto ds = dataset(dir, "type: CustomDataset, data_root: ., data_prefix: train");
  ASSERT_EQ(ds->size(), 15u);
  EXPECT_EQ(ds->num_classes(), 3);
  const auto& folder = dynamic_cast<const ImageFolderDataset&>(*ds);
  EXPECT_THAT(folder.path(0), HasSubstr("train/a_dog/0.JPEG"));
  EXPECT_THAT(folder.path(1), HasSubstr("train/a_dog/1.png"));
  EXPECT_THAT(folder.path(4), HasSubstr("train/a_dog/nested/4.JPEG"));
  EXPECT_EQ(folder.label(5), 1);
  EXPECT_EQ(folder.label(14), 2);
  const Example e = ds->sample(7, SampleKey{3, 1});
  EXPECT_EQ(e.input.sizes(), (std::vector<int64_t>{3, 12, 12}));
  EXPECT_EQ(e.input.scalar_type(), torch::kByte);
  EXPECT_EQ(e.target.item<int64_t>(), 1);
}

TEST(ImageFolderDatasetTest, ImageNetsSplitFindsItsAnnotationFile) {
  rh::test::TempDir dir;
  write_folder(dir);
  const auto ds =
      dataset(dir, "type: ImageNet, data_root: ., split: train, classes: [dog, cat, eel]");
  ASSERT_EQ(ds->size(), 15u);  // from meta/train.txt, in its order
  const auto& folder = dynamic_cast<const ImageFolderDataset&>(*ds);
  EXPECT_THAT(folder.path(4), HasSubstr("train/a_dog/nested/4.JPEG"));
  EXPECT_EQ(folder.label(10), 2);
  EXPECT_EQ(ds->num_classes(), 3);
  // The same files by folders: ImageNet's default is its 1000 classes.
  EXPECT_THAT(
      test::config_error([&] { dataset(dir, "type: ImageNet, data_root: ., data_prefix: train"); }),
      HasSubstr("3 class folders in"));
  EXPECT_THAT(
      test::config_error([&] { dataset(dir, "type: ImageNet, data_root: ., split: test"); }),
      HasSubstr("dataset.split: test has no labels"));
}

TEST(ImageFolderDatasetTest, BadAnnotationsAndFoldersAreErrorsNamingTheFile) {
  rh::test::TempDir dir;
  write_folder(dir);
  dir.write("bad_label.txt", "a_dog/0.JPEG 0\nb_cat/0.JPEG 7\n");
  dir.write("no_label.txt", "a_dog/0.JPEG 0\n\nb_cat/0.JPEG\n");
  EXPECT_THAT(test::config_error([&] {
                dataset(dir,
                        "type: CustomDataset, data_prefix: train, ann_file: bad_label.txt, "
                        "classes: [a, b, c]");
              }),
              HasSubstr("bad_label.txt' line 2: label 7 outside the 3 classes"));
  EXPECT_THAT(test::config_error([&] {
                dataset(dir, "type: CustomDataset, data_prefix: train, ann_file: no_label.txt");
              }),
              HasSubstr("no_label.txt' line 3: expected `relative/path label`"));
  EXPECT_THAT(
      test::config_error([&] { dataset(dir, "type: CustomDataset, data_prefix: nowhere"); }),
      HasSubstr("job.yaml:1:45: dataset.data_prefix: the image folder"));
  EXPECT_THAT(test::config_error([&] {
                dataset(dir, "type: CustomDataset, data_prefix: train, classes: [a, b]");
              }),
              HasSubstr("3 class folders in"));
}

TEST(ImageFolderDatasetTest, ACorruptImageStopsTheLoaderNamingTheSampleAndFile) {
  rh::test::TempDir dir;
  write_folder(dir);
  const std::string victim = (dir.path() / "train/b_cat/2.JPEG").string();
  const std::string bytes = rh::test::read_file(victim);
  dir.write("train/b_cat/2.JPEG", bytes.substr(0, bytes.size() / 2));
  DataLoader loader(dataset(dir, "type: CustomDataset, data_prefix: train"),
                    LoaderOptions{4, false, false, 2, 2, 0}, 0, 1);
  loader.start_epoch(0);
  try {
    while (loader.next()) {
    }
    ADD_FAILURE() << "the epoch ended without the error";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("sample 7: " + victim + ": a corrupt or truncated JPEG"));
  }
}

// Every batch of epochs 0 and 1, rank by rank, as bytes.
std::vector<std::string> batches(const std::shared_ptr<Dataset>& ds, int workers, int ranks,
                                 size_t skip = 0, bool persistent = false) {
  std::vector<std::string> out;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    for (int rank = 0; rank < ranks; ++rank) {
      LoaderOptions o;
      o.batch_size = 2;
      o.shuffle = true;
      o.num_workers = workers;
      o.seed = 11;
      o.persistent_workers = persistent;
      DataLoader loader(ds, o, rank, ranks);
      loader.start_epoch(epoch, epoch == 0 ? skip : 0);
      while (auto b = loader.next()) {
        const auto* p = static_cast<const char*>(b->input.data_ptr());
        out.push_back(std::string(p, p + b->input.nbytes()));
      }
    }
  }
  return out;
}

TEST(ImageFolderDatasetTest, TheBatchesAreTheSameForAnyWorkersAndOnResume) {
  rh::test::TempDir dir;
  write_folder(dir);
  const auto ds = dataset(dir, "type: CustomDataset, data_prefix: train");
  const auto one = batches(ds, 1, 1);
  ASSERT_EQ(one.size(), 16u);  // 8 batches (15 samples, the last alone) x 2 epochs
  EXPECT_NE(one[0], one[8]);   // epoch 1 draws again
  EXPECT_EQ(batches(ds, 3, 1), one);
  EXPECT_EQ(batches(ds, 0, 1), one);
  // A resume at batch 3 of epoch 0: the uninterrupted run's batches from there.
  const auto resumed = batches(ds, 3, 1, 3);
  EXPECT_EQ(resumed, std::vector<std::string>(one.begin() + 3, one.end()));
  // Two ranks: rank r takes the global order's samples r, r + 2, ...; its
  // batches hold the bytes the one-rank run made for the same samples.
  const auto two = batches(ds, 3, 2);
  const auto two_one_worker = batches(ds, 1, 2);
  EXPECT_EQ(two, two_one_worker);
  const auto two_resumed = batches(ds, 1, 2, 2);
  ASSERT_GE(two.size(), 4u);
  EXPECT_EQ(two_resumed.front(), two[2]);
}

// The per-sample key: the bytes of sample i are the same whichever batch,
// rank or worker loads it (so two ranks together hold one rank's samples).
TEST(ImageFolderDatasetTest, ASamplesBytesDependOnlyOnSeedEpochAndIndex) {
  rh::test::TempDir dir;
  write_folder(dir);
  const auto ds = dataset(dir, "type: CustomDataset, data_prefix: train");
  const auto a = ds->sample(6, SampleKey{11, 0});
  EXPECT_TRUE(torch::equal(a.input, ds->sample(6, SampleKey{11, 0}).input));
  EXPECT_FALSE(torch::equal(a.input, ds->sample(6, SampleKey{11, 1}).input));
  EXPECT_FALSE(torch::equal(a.input, ds->sample(6, SampleKey{12, 0}).input));
}

TEST(ImageFolderDatasetTest, PersistentWorkersGiveTheSameBatches) {
  rh::test::TempDir dir;
  write_folder(dir);
  const auto ds = dataset(dir, "type: CustomDataset, data_prefix: train");
  EXPECT_EQ(batches(ds, 3, 1, 0, true), batches(ds, 3, 1));
  // One loader through three epochs, its workers kept.
  LoaderOptions o;
  o.batch_size = 4;
  o.num_workers = 2;
  o.prefetch = 2;
  o.persistent_workers = true;
  DataLoader loader(ds, o, 0, 1);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    loader.start_epoch(epoch);
    size_t n = 0;
    while (auto b = loader.next()) {
      ++n;
      EXPECT_LE(loader.queue_depth(), 2u);
    }
    EXPECT_EQ(n, 4u);
  }
}

TEST(ImageFolderDatasetTest, ImagesOfDifferentSizesCannotShareABatch) {
  rh::test::TempDir dir;
  write_folder(dir);
  auto cfg = test::yaml(
      "dataset: {type: CustomDataset, data_prefix: train, pipeline: [{type: LoadImageFromFile}, "
      "{type: PackInputs}]}");
  DataLoader loader(build_dataset(*cfg->find("dataset"), dir.path().string()),
                    LoaderOptions{2, false, false, 0, 2, 0}, 0, 1);
  try {
    loader.next();
    ADD_FAILURE() << "stacked";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("sample 1 is 3x23x28 but sample 0 of its batch 3x20x28"));
  }
}

}  // namespace
}  // namespace rh::data
