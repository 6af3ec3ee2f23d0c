// model_schema(): one map per type, unknown keys and types named with a
// suggestion, ranges checked; build_model() reports the same errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/Schema.hpp"
#include "host/model/ModelTestUtil.hpp"
#include "model/ModelSchema.hpp"

namespace rh::model::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::string> errors_of(const std::string& body) {
  std::vector<std::string> texts;
  for (const auto& e : config::validate(*model_config(body), model_schema())) {
    texts.push_back(e.key_path() + ": " + e.message());
  }
  return texts;
}

TEST(ModelSchemaTest, AcceptsEveryTypeWithAllItsKeys) {
  EXPECT_THAT(errors_of("type: mlp\nin_features: 8\nhidden: [64, 32]\nnum_classes: 3\n"
                        "activation: gelu\ndropout: 0.1"),
              IsEmpty());
  EXPECT_THAT(errors_of("type: convnet\nin_channels: 1\nnum_classes: 10\nwidth: 16\n"
                        "blocks: [2, 2]\nnorm: group"),
              IsEmpty());
  EXPECT_THAT(errors_of("type: vit\nimage_size: 32\npatch_size: 4\nin_channels: 3\ndim: 64\n"
                        "depth: 4\nheads: 4\nmlp_ratio: 2.5\nnum_classes: 10\ndropout: 0"),
              IsEmpty());
  EXPECT_THAT(errors_of("type: gpt\nvocab_size: 65\nblock_size: 64\ndim: 64\ndepth: 2\n"
                        "heads: 4\nmlp_ratio: 4\ndropout: 0.2\ntie_weights: true"),
              IsEmpty());
  EXPECT_THAT(errors_of("type: torchscript\npath: m.pt\nnum_classes: 3\ntask: language_model"),
              IsEmpty());
}

TEST(ModelSchemaTest, UnknownTypeListsTheChoices) {
  EXPECT_THAT(errors_of("type: mlpp\nin_features: 8"),
              ElementsAre("model.type: unknown model type 'mlpp'; choices: convnet, gpt, llama, "
                          "mlp, torchscript, vit (did you mean 'mlp'?)"));
}

TEST(ModelSchemaTest, UnknownKeySuggestsTheKnownOne) {
  EXPECT_THAT(errors_of("type: mlp\nin_features: 8\nnum_classes: 3\nhiden: [64]"),
              ElementsAre("model.hiden: unknown key (did you mean 'hidden'?)"));
  // A key of another type is unknown here.
  EXPECT_THAT(errors_of("type: gpt\nvocab_size: 8\nnum_classes: 3"),
              ElementsAre(HasSubstr("model.num_classes: unknown key")));
}

TEST(ModelSchemaTest, MissingRequiredKeys) {
  EXPECT_THAT(errors_of("type: mlp\nhidden: [4]"),
              ElementsAre("model: missing required key 'in_features'",
                          "model: missing required key 'num_classes'"));
  EXPECT_THAT(errors_of("type: torchscript"), ElementsAre("model: missing required key 'path'"));
}

TEST(ModelSchemaTest, OutOfRangeAndMistypedValues) {
  EXPECT_THAT(
      errors_of("type: mlp\nin_features: 0\nnum_classes: 1\nhidden: [8, -2]\n"
                "dropout: 1.5\nactivation: relux"),
      ElementsAre("model.in_features: must be >= 1, got 0",
                  "model.num_classes: must be >= 2, got 1", "model.hidden.1: must be >= 1, got -2",
                  "model.dropout: must be <= 1, got 1.5",
                  "model.activation: expected one of relu, gelu, tanh, got 'relux' "
                  "(did you mean 'relu'?)"));
  EXPECT_THAT(errors_of("type: vit\nnum_classes: 10\nmlp_ratio: 0\ndepth: abc"),
              ElementsAre("model.mlp_ratio: must be > 0, got 0",
                          "model.depth: expected an integer, got 'abc'"));
  EXPECT_THAT(errors_of("type: gpt\nvocab_size: 8\ntie_weights: maybe"),
              ElementsAre("model.tie_weights: expected a boolean, got 'maybe'"));
}

TEST(ModelSchemaTest, BuildModelThrowsTheFirstError) {
  const auto node = model_config("type: mlp\nin_features: 8\nnum_classes: 3\nhiden: [64]");
  try {
    build_model(*node, 0, ".");
    FAIL() << "expected a ConfigError";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key_path(), "model.hiden");
    EXPECT_THAT(e.what(), HasSubstr("job.yaml:5:3: model.hiden: unknown key"));
  }
}

// Checks that need more than one key, made when the model is built.
TEST(ModelSchemaTest, BuildersCheckKeysThatDependOnEachOther) {
  const auto error_of = [](const std::string& body) -> std::string {
    try {
      build(body);
    } catch (const config::ConfigError& e) {
      return e.key_path() + ": " + e.message();
    }
    return "no error";
  };
  EXPECT_EQ(error_of("type: vit\nnum_classes: 3\ndim: 60\nheads: 8"),
            "model.heads: dim 60 is not a multiple of heads 8");
  EXPECT_EQ(error_of("type: vit\nnum_classes: 3\nimage_size: 30\npatch_size: 4"),
            "model.patch_size: image_size 30 is not a multiple of patch_size 4");
  EXPECT_EQ(error_of("type: gpt\nvocab_size: 8\ndim: 10\nheads: 4"),
            "model.heads: dim 10 is not a multiple of heads 4");
  EXPECT_EQ(error_of("type: convnet\nnum_classes: 3\nblocks: []"),
            "model.blocks: expected at least one stage, got an empty list");
}

}  // namespace
}  // namespace rh::model::test
