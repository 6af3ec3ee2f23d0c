// runner-host training on image folders, end to end (real processes per
// rank): configs/vit_imagenet.yaml (MMPretrain's ImageNet pipelines,
// Mixup/CutMix, LabelSmoothLoss) on a folder tools/data/make_image_folder.py
// writes, and a resume in the middle of an epoch giving the uninterrupted
// run's weights bit for bit, for 1 and 2 ranks and 1 and 3 workers: every
// random choice of the pipeline and of the batch augments is keyed by
// (seed, epoch, index) or (seed, iteration, rank), none by a worker.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "common/DistributedTestUtil.hpp"
#include "common/TestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::quote;
using ::testing::HasSubstr;

namespace {

const fs::path kSource = fs::path(RH_CONFIGS_DIR).parent_path();

// ROOT/{train,val}/<class>/*.JPEG and ROOT/meta/classes.txt: 4 classes.
void make_folder(const fs::path& root, int per_class) {
  fs::create_directories(root / "meta");
  const std::string tool = quote((kSource / "tools/data/make_image_folder.py").string());
  auto r = rh::test::run_command(
      "/usr/bin/python3 " + tool + " " + quote((root / "train").string()) +
      " --classes 4 --per-class " + std::to_string(per_class) + " --meta " +
      quote((root / "meta/classes.txt").string()) + " && /usr/bin/python3 " + tool + " " +
      quote((root / "val").string()) + " --classes 4 --per-class 2 --seed 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

TEST(ImageJobTest, TheRecipesDataSideTrainsAVitOnTwoRanksAndValidates) {
  rh::test::TempDir dir;
  make_folder(dir / "work_dirs/imagenet_like", 8);
  fs::create_directories(dir / "configs");
  fs::copy_file(kSource / "configs/vit_imagenet.yaml", dir / "configs/vit_imagenet.yaml");
  const fs::path work = dir / "work";
  // The job as shipped, smaller: a 1-block model, 4 images a batch per rank.
  auto r = rh::test::run_command(
      "cd " + quote(dir.path().string()) + " && " + quote(RH_RUNNER_HOST) +
      " --config configs/vit_imagenet.yaml --nproc-per-node 2"
      " --set model.dim=32 --set model.depth=1 --set model.heads=2 --set data.train.batch_size=4 "
      "--set data.val.batch_size=4 --set train_cfg.max_epochs=2 --set work_dir=" +
      quote(work.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto train = rh::test::metric_lines(work / "metrics.jsonl", "train");
  ASSERT_EQ(train.size(), 8u) << r.output;  // 32 images / (2 ranks x 4), 2 epochs
  for (const auto& m : train) {
    EXPECT_TRUE(std::isfinite(m.at("loss")));
    EXPECT_GE(m.at("data/queue_depth"), 0);
  }
  const auto val = rh::test::metric_lines(work / "metrics.jsonl", "val");
  ASSERT_EQ(val.size(), 2u) << r.output;  // the test pipeline, after each epoch
  EXPECT_TRUE(val.back().count("accuracy/top1") > 0) << r.output;
}

// A small vit on 32 x 32 crops through the recipe's pipeline (RandAugment,
// RandomErasing), Mixup and CutMix; saved at iteration 3 (mid-epoch 0) and
// resumed to 6 (into epoch 1).
std::string job(int workers, const std::string& extra) {
  return "seed: 7\n"
         "strategy: {type: ddp}\n"
         "data_preprocessor: {mean: [123.675, 116.28, 103.53], std: [58.395, 57.12, 57.375], "
         "to_rgb: true}\n"
         "model:\n"
         "  type: vit\n"
         "  image_size: 32\n"
         "  patch_size: 8\n"
         "  dim: 32\n"
         "  depth: 1\n"
         "  heads: 2\n"
         "  num_classes: 4\n"
         "  dropout: 0.1\n"
         "  head: {loss: {type: LabelSmoothLoss, label_smooth_val: 0.1}}\n"
         "  train_cfg: {augments: [{type: Mixup, alpha: 0.8}, {type: CutMix, alpha: 1.0}]}\n"
         "data:\n"
         "  train:\n"
         "    batch_size: 4\n"
         "    num_workers: " +
         std::to_string(workers) +
         "\n"
         "    sampler: {type: DefaultSampler, shuffle: true}\n"
         "    dataset:\n"
         "      type: ImageNet\n"
         "      data_root: data\n"
         "      split: train\n"
         "      classes: data/meta/classes.txt\n"
         "      pipeline:\n"
         "        - {type: LoadImageFromFile}\n"
         "        - {type: RandomResizedCrop, scale: 32, backend: pillow, interpolation: bicubic}\n"
         "        - {type: RandomFlip, prob: 0.5, direction: horizontal}\n"
         "        - {type: RandAugment, policies: timm_increasing, num_policies: 2, total_level: "
         "10, magnitude_level: 9, magnitude_std: 0.5, hparams: {pad_val: [104, 116, 124], "
         "interpolation: bicubic}}\n"
         "        - {type: RandomErasing, erase_prob: 0.25, mode: rand, min_area_ratio: 0.02, "
         "max_area_ratio: 0.3333, fill_color: [103.53, 116.28, 123.675], fill_std: [57.375, "
         "57.12, 58.395]}\n"
         "        - {type: PackInputs}\n"
         "optim_wrapper:\n"
         "  optimizer: {type: AdamW, lr: 0.001, weight_decay: 0.05}\n"
         "train_cfg: {by_epoch: false, max_iters: 6}\n"
         "hooks:\n"
         "  - {type: checkpoint, by_epoch: false, interval: 3}\n" +
         extra;
}

TEST(ImageJobTest, AResumeMidEpochGivesTheUninterruptedRunsWeights) {
  rh::test::TempDir dir;
  make_folder(dir / "data", 4);  // 16 images: 4 batches an epoch on 1 rank, 2 on 2
  for (const auto& [ranks, workers] : {std::pair{1, 1}, {1, 3}, {2, 1}, {2, 3}}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks, " + std::to_string(workers) + " workers");
    const std::string a = "straight" + std::to_string(ranks) + std::to_string(workers);
    const std::string b = "resumed" + std::to_string(ranks) + std::to_string(workers);
    auto straight = rh::test::run_job(dir, a, job(workers, ""), ranks, "", true);
    ASSERT_EQ(straight.exit_code, 0) << straight.output;
    auto resumed = rh::test::run_job(
        dir, b, job(workers, "resume: " + (dir / a / "iter_3").string() + "\n"), ranks, "", true);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_THAT(resumed.output, HasSubstr("resumed from"));
    rh::test::expect_equal_bytes(dir / a / "iter_6/model.safetensors",
                                 dir / b / "iter_6/model.safetensors");
  }
  // The workers change nothing: 1 and 3 workers train the same weights.
  rh::test::expect_equal_bytes(dir / "straight11/iter_6/model.safetensors",
                               dir / "straight13/iter_6/model.safetensors");
  rh::test::expect_equal_bytes(dir / "straight21/iter_6/model.safetensors",
                               dir / "straight23/iter_6/model.safetensors");
}

}  // namespace
