#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "common/TestUtil.hpp"
#include "host/model/ModelTestUtil.hpp"

namespace rh::model::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string data_dir() { return RH_TEST_DATA_DIR; }

TEST(TorchScriptModelTest, LoadsTheFileRelativeToTheJobDir) {
  auto model = build("type: torchscript\npath: model/tiny_mlp_scripted.pt", 0, data_dir());
  EXPECT_EQ(param_names(*model), (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias",
                                                           "fc2.weight", "fc2.bias"}));
  // `act` (a ReLU) holds no parameters and is no unit.
  const std::vector<Unit> units = model->units();
  ASSERT_EQ(units.size(), 3u);
  EXPECT_EQ(units[0].name, "root");
  EXPECT_EQ(units[0].param_names, (std::vector<std::string>{"scale"}));
  EXPECT_EQ(units[1].name, "fc1");
  EXPECT_EQ(units[1].param_names, (std::vector<std::string>{"fc1.weight", "fc1.bias"}));
  EXPECT_EQ(units[2].name, "fc2");
  EXPECT_EQ(model->task(), Task::Classification);
  EXPECT_TRUE(model->named_buffers().empty());
  // The file's weights: an absolute path gives the same ones.
  auto again = build(
      "type: torchscript\npath: " + data_path("tiny_mlp_scripted.pt") + "\ntask: language_model",
      99, "/nonexistent");
  EXPECT_TRUE(torch::equal(snapshot(*again)[1], snapshot(*model)[1]));
  EXPECT_EQ(again->task(), Task::LanguageModel);
}

TEST(TorchScriptModelTest, NumClassesIsCheckedAgainstTheLogits) {
  auto model =
      build("type: torchscript\npath: model/tiny_mlp_scripted.pt\nnum_classes: 5", 0, data_dir());
  EXPECT_THROW(model->forward(torch::randn({2, 4})), std::runtime_error);
}

TEST(TorchScriptModelTest, MissingFileNamesTheKeyAndTheResolvedPath) {
  rh::test::TempDir dir;
  try {
    build("type: torchscript\npath: nope/model.pt", 0, dir.path().string());
    FAIL() << "expected a ConfigError";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key_path(), "model.path");
    EXPECT_EQ(e.message(), "cannot load TorchScript module '" +
                               (dir.path() / "nope/model.pt").string() + "': no such file");
    EXPECT_THAT(e.what(), StartsWith(e.where().file + ":3:9: model.path: "));
  }
}

TEST(TorchScriptModelTest, CorruptFileNamesTheKeyAndTheReason) {
  rh::test::TempDir dir;
  const std::string garbage =
      dir.write("garbage.pt", "this is not a TorchScript archive\n").string();
  try {
    build("type: torchscript\npath: garbage.pt", 0, dir.path().string());
    FAIL() << "expected a ConfigError";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key_path(), "model.path");
    EXPECT_THAT(e.message(), StartsWith("cannot load TorchScript module '" + garbage + "': "));
    EXPECT_THAT(e.message(), Not(HasSubstr("\n")));
    EXPECT_GT(e.message().size(), ("cannot load TorchScript module '" + garbage + "': ").size());
  }
}

TEST(TorchScriptModelTest, RunsInTrainingAndEvaluationMode) {
  auto model = build("type: torchscript\npath: model/tiny_mlp_scripted.pt", 0, data_dir());
  model->train(false);
  torch::NoGradGuard no_grad;
  const at::Tensor x = torch::randn({2, 4});
  EXPECT_TRUE(torch::equal(model->forward(x), model->forward(x)));
  model->train(true);
  EXPECT_EQ(model->forward(x).sizes(), at::IntArrayRef({2, 3}));
}

}  // namespace
}  // namespace rh::model::test
