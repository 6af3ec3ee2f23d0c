// model.head.loss (ClassifierLoss.hpp) against the formulas written out in
// double precision: cross entropy on labels and on soft scores, MMPretrain's
// label smoothing (original and classy_vision), loss_weight. The loss is
// float32 arithmetic over 3 classes: a few ulps of values near 1, so 1e-6.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "config/YamlReader.hpp"
#include "model/ClassifierLoss.hpp"

namespace rh::model {
namespace {

const double kLogits[2][3] = {{1.0, 2.0, 3.0}, {0.5, -1.0, 0.25}};

torch::Tensor logits() {
  return torch::tensor({kLogits[0][0], kLogits[0][1], kLogits[0][2], kLogits[1][0], kLogits[1][1],
                        kLogits[1][2]},
                       torch::kFloat)
      .view({2, 3});
}

// -sum_c t_c log softmax(z)_c, averaged over the 2 rows.
double soft_ce(const double target[2][3]) {
  double total = 0;
  for (int r = 0; r < 2; ++r) {
    double z = 0;
    for (int c = 0; c < 3; ++c) z += std::exp(kLogits[r][c]);
    for (int c = 0; c < 3; ++c) total -= target[r][c] * (kLogits[r][c] - std::log(z));
  }
  return total / 2;
}

std::unique_ptr<ClassifierLoss> loss(const std::string& head) {
  return ClassifierLoss::from_job(
      *config::parse_yaml("model: {type: vit, head: " + head + "}", "j.yaml"));
}

TEST(ClassifierLossTest, LabelSmoothingAsMMPretrainWritesIt) {
  const torch::Tensor labels = torch::tensor({2, 0}, torch::kLong);
  const double hard[2][3] = {{0, 0, 1}, {1, 0, 0}};
  EXPECT_NEAR(classification_loss(logits(), labels).item<double>(), soft_ce(hard), 1e-6);

  // original: eps 0.1 -> target 0.9 one-hot + 0.1 / 3.
  double smooth[2][3];
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) smooth[r][c] = hard[r][c] * 0.9 + 0.1 / 3;
  EXPECT_NEAR((*loss("{loss: {type: LabelSmoothLoss, label_smooth_val: 0.1}}"))(logits(), labels)
                  .item<double>(),
              soft_ce(smooth), 1e-6);
  // classy_vision: eps 0.1 / 1.1; loss_weight 2.
  const double eps = 0.1 / 1.1;
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) smooth[r][c] = hard[r][c] * (1 - eps) + eps / 3;
  EXPECT_NEAR((*loss("{loss: {type: LabelSmoothLoss, label_smooth_val: 0.1, mode: classy_vision, "
                     "loss_weight: 2}}"))(logits(), labels)
                  .item<double>(),
              2 * soft_ce(smooth), 2e-6);
  EXPECT_FALSE(loss("{}"));
}

TEST(ClassifierLossTest, SoftScoresFromMixupAreSmoothedToo) {
  const double mixed[2][3] = {{0.3, 0, 0.7}, {0.6, 0.4, 0}};
  const torch::Tensor target =
      torch::tensor({0.3, 0.0, 0.7, 0.6, 0.4, 0.0}, torch::kFloat).view({2, 3});
  EXPECT_NEAR((*loss("{loss: {type: CrossEntropyLoss}}"))(logits(), target).item<double>(),
              soft_ce(mixed), 1e-6);
  double smooth[2][3];
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) smooth[r][c] = mixed[r][c] * 0.8 + 0.2 / 3;
  EXPECT_NEAR((*loss("{loss: {type: LabelSmoothLoss, label_smooth_val: 0.2}}"))(logits(), target)
                  .item<double>(),
              soft_ce(smooth), 1e-6);
}

}  // namespace
}  // namespace rh::model
