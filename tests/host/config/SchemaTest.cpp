#include <gtest/gtest.h>

#include "config/Schema.hpp"
#include "config/YamlReader.hpp"
#include "host/config/ConfigTestUtil.hpp"

namespace rh::config {
namespace {

using test::messages;
using Messages = std::vector<std::string>;

// Validates `text` (one document) against a map holding `schema` under key `v`.
Messages check(const Schema& schema, const std::string& text) {
  const NodePtr root = parse_yaml(text, "t.yaml");
  return messages(validate(*root, schema::map({{"v", schema}})));
}

TEST(SchemaTest, Integer) {
  const Schema s = schema::integer(1, 10);
  EXPECT_EQ(check(s, "v: 5\n"), Messages{});
  EXPECT_EQ(check(s, "v: abc\n"), Messages{"t.yaml:1:4: v: expected an integer, got 'abc'"});
  EXPECT_EQ(check(s, "v: 2.5\n"), Messages{"t.yaml:1:4: v: expected an integer, got '2.5'"});
  EXPECT_EQ(check(s, "v: 0\n"), Messages{"t.yaml:1:4: v: must be >= 1, got 0"});
  EXPECT_EQ(check(s, "v: 11\n"), Messages{"t.yaml:1:4: v: must be <= 10, got 11"});
  EXPECT_EQ(check(s, "v: [1]\n"), Messages{"t.yaml:1:4: v: expected an integer, got a list"});
  EXPECT_EQ(check(schema::integer(), "v: -99\n"), Messages{});
}

TEST(SchemaTest, Number) {
  const Schema s = schema::number(0.5, 2);
  EXPECT_EQ(check(s, "v: 1\n"), Messages{});
  EXPECT_EQ(check(s, "v: 1e-0\n"), Messages{});
  EXPECT_EQ(check(s, "v: 0.25\n"), Messages{"t.yaml:1:4: v: must be >= 0.5, got 0.25"});
  EXPECT_EQ(check(s, "v: 3\n"), Messages{"t.yaml:1:4: v: must be <= 2, got 3"});
  EXPECT_EQ(check(s, "v: .nan\n"), Messages{"t.yaml:1:4: v: must be >= 0.5, got .nan"});
  EXPECT_EQ(check(s, "v: fast\n"), Messages{"t.yaml:1:4: v: expected a number, got 'fast'"});
  EXPECT_EQ(check(schema::number(), "v: 3e-4\n"), Messages{});
  EXPECT_EQ(check(schema::number(), "v: -.inf\n"), Messages{});
}

TEST(SchemaTest, NumberAboveIsExclusive) {
  const Schema s = schema::number_above(0);
  EXPECT_EQ(check(s, "v: 1e-9\n"), Messages{});
  EXPECT_EQ(check(s, "v: 0\n"), Messages{"t.yaml:1:4: v: must be > 0, got 0"});
  EXPECT_EQ(check(s, "v: -0.0\n"), Messages{"t.yaml:1:4: v: must be > 0, got -0.0"});
}

TEST(SchemaTest, BooleanAndString) {
  EXPECT_EQ(check(schema::boolean(), "v: false\n"), Messages{});
  EXPECT_EQ(check(schema::boolean(), "v: 3\n"),
            Messages{"t.yaml:1:4: v: expected a boolean, got '3'"});
  EXPECT_EQ(check(schema::string(), "v: 3\n"), Messages{});
  EXPECT_EQ(check(schema::string(), "v: 'x'\n"), Messages{});
  EXPECT_EQ(check(schema::string(), "v: {a: 1}\n"),
            Messages{"t.yaml:1:4: v: expected a string, got a map"});
  EXPECT_EQ(check(schema::string(), "v:\n"),
            Messages{"t.yaml:1:1: v: expected a string, got null"});
}

TEST(SchemaTest, EnumerationListsChoicesAndSuggests) {
  const Schema s = schema::enumeration({"trace", "debug", "info", "warn", "error"});
  EXPECT_EQ(check(s, "v: info\n"), Messages{});
  EXPECT_EQ(check(s, "v: inof\n"),
            Messages{"t.yaml:1:4: v: expected one of trace, debug, info, warn, error, got 'inof' "
                     "(did you mean 'info'?)"});
  EXPECT_EQ(
      check(s, "v: verbose\n"),
      Messages{"t.yaml:1:4: v: expected one of trace, debug, info, warn, error, got 'verbose'"});
  EXPECT_EQ(check(s, "v: [info]\n"),
            Messages{"t.yaml:1:4: v: expected one of trace, debug, info, warn, error, got a list"});
}

TEST(SchemaTest, AnyAcceptsEverything) {
  EXPECT_EQ(check(schema::any(), "v: {a: [1, {b: c}]}\n"), Messages{});
  EXPECT_EQ(check(schema::any(), "v:\n"), Messages{});
  EXPECT_EQ(check(Schema(), "v: 1\n"), Messages{});
}

TEST(SchemaTest, ListChecksEveryItem) {
  const Schema s = schema::list(schema::integer(0));
  EXPECT_EQ(check(s, "v: [1, 2]\n"), Messages{});
  EXPECT_EQ(check(s, "v: []\n"), Messages{});
  EXPECT_EQ(check(s, "v:\n  - 1\n  - x\n  - -1\n"),
            (Messages{"t.yaml:3:5: v.1: expected an integer, got 'x'",
                      "t.yaml:4:5: v.2: must be >= 0, got -1"}));
  EXPECT_EQ(check(s, "v: 1\n"), Messages{"t.yaml:1:4: v: expected a list, got '1'"});
}

const Schema& train_cfg() {
  static const Schema s = schema::map({
      {"by_epoch", schema::boolean()},
      {"max_epochs", schema::integer(1), true},
      {"val_interval", schema::integer(1)},
  });
  return s;
}

TEST(SchemaTest, MapReportsUnknownKeysAtTheKeyWithASuggestion) {
  const NodePtr root = parse_yaml(
      "train_cfg:\n"       // 1
      "  max_epochs: 3\n"  // 2
      "  max_epoch: 10\n"  // 3
      "  foo: 1\n",        // 4
      "job.yaml");
  EXPECT_EQ(messages(validate(*root, schema::map({{"train_cfg", train_cfg()}}))),
            (Messages{"job.yaml:3:3: train_cfg.max_epoch: unknown key (did you mean 'max_epochs'?)",
                      "job.yaml:4:3: train_cfg.foo: unknown key"}));
}

TEST(SchemaTest, MapReportsMissingRequiredKeysAtTheParent) {
  const NodePtr root = parse_yaml("seed: 1\ntrain_cfg:\n  by_epoch: true\n", "job.yaml");
  const auto errors = validate(*root, schema::map({{"seed", schema::integer()},
                                                   {"train_cfg", train_cfg(), true},
                                                   {"model", schema::any(), true}}));
  EXPECT_EQ(messages(errors),
            (Messages{"job.yaml:1:1: missing required key 'model'",
                      "job.yaml:3:3: train_cfg: missing required key 'max_epochs'"}));
  EXPECT_EQ(errors[1].key_path(), "train_cfg");
  EXPECT_EQ(errors[1].message(), "missing required key 'max_epochs'");
}

TEST(SchemaTest, MapOfTheWrongKind) {
  EXPECT_EQ(check(train_cfg(), "v: [1, 2]\n"),
            Messages{"t.yaml:1:4: v: expected a map, got a list"});
  EXPECT_EQ(check(train_cfg(), "v: 5\n"), Messages{"t.yaml:1:4: v: expected a map, got '5'"});
  EXPECT_EQ(check(train_cfg(), "v:\n"), Messages{"t.yaml:1:1: v: expected a map, got null"});
}

TEST(SchemaTest, ErrorsComeInFileOrder) {
  EXPECT_EQ(check(train_cfg(),
                  "v:\n"                   // 1
                  "  by_epoch: 1\n"        // 2
                  "  max_epochs: 0\n"      // 3
                  "  val_intervall: 2\n"   // 4
                  "  val_interval: x\n"),  // 5
            (Messages{"t.yaml:2:13: v.by_epoch: expected a boolean, got '1'",
                      "t.yaml:3:15: v.max_epochs: must be >= 1, got 0",
                      "t.yaml:4:3: v.val_intervall: unknown key (did you mean 'val_interval'?)",
                      "t.yaml:5:17: v.val_interval: expected an integer, got 'x'"}));
}

TEST(SchemaTest, OpenMapChecksKnownFieldsOnly) {
  const Schema s = schema::open_map({{"type", schema::string(), true}, {"lr", schema::number(0)}});
  EXPECT_EQ(check(s, "v: {type: SGD, lr: 0.1, momentum: 0.9, anything: [1]}\n"), Messages{});
  EXPECT_EQ(check(s, "v: {type: SGD, lr: -1}\n"),
            Messages{"t.yaml:1:20: v.lr: must be >= 0, got -1"});
  EXPECT_EQ(check(s, "v: {lr: 1}\n"), Messages{"t.yaml:1:4: v: missing required key 'type'"});
}

TEST(SchemaTest, OneOfTakesTheFirstThatFits) {
  const Schema s = schema::one_of({schema::boolean(), schema::string()},
                                  "true, false, 'auto' or a checkpoint path");
  EXPECT_EQ(check(s, "v: true\n"), Messages{});
  EXPECT_EQ(check(s, "v: auto\n"), Messages{});
  EXPECT_EQ(check(s, "v: /ckpt/epoch_3\n"), Messages{});
  EXPECT_EQ(
      check(s, "v: {a: 1}\n"),
      Messages{"t.yaml:1:4: v: expected true, false, 'auto' or a checkpoint path, got a map"});
  EXPECT_EQ(s.describe(), "true, false, 'auto' or a checkpoint path");
}

TEST(SchemaTest, OneOfReportsTheAlternativeOfTheValuesShape) {
  const Schema typed = schema::open_map({{"type", schema::string(), true}});
  const Schema s =
      schema::one_of({typed, schema::list(typed)}, "a scheduler map or a list of them");
  EXPECT_EQ(check(s, "v: {type: StepLR}\n"), Messages{});
  EXPECT_EQ(check(s, "v: [{type: StepLR}, {type: PolyLR}]\n"), Messages{});
  // A list: the list alternative says what is wrong inside it.
  EXPECT_EQ(check(s, "v:\n  - type: StepLR\n  - begin: 0\n"),
            Messages{"t.yaml:3:5: v.1: missing required key 'type'"});
  EXPECT_EQ(check(s, "v: {begin: 0}\n"), Messages{"t.yaml:1:4: v: missing required key 'type'"});
  EXPECT_EQ(check(s, "v: StepLR\n"),
            Messages{"t.yaml:1:4: v: expected a scheduler map or a list of them, got 'StepLR'"});
}

TEST(SchemaTest, Nullable) {
  const Schema s = schema::nullable(schema::map({{"type", schema::string()}}));
  EXPECT_EQ(check(s, "v:\n"), Messages{});
  EXPECT_EQ(check(s, "v: null\n"), Messages{});
  EXPECT_EQ(check(s, "v: {type: ValLoop}\n"), Messages{});
  EXPECT_EQ(check(s, "v: {typ: ValLoop}\n"),
            Messages{"t.yaml:1:5: v.typ: unknown key (did you mean 'type'?)"});
  EXPECT_EQ(s.describe(), "a map or null");
}

TEST(SchemaTest, PluginSpec) {
  const Schema hook = schema::plugin_spec(true);
  EXPECT_EQ(check(hook, "v: {type: LoggerHook, plugin: ./libx.so, priority: 90, interval: 5}\n"),
            Messages{});
  EXPECT_EQ(check(hook, "v: {type: LoggerHook, priority: VERY_LOW}\n"), Messages{});
  EXPECT_EQ(check(hook, "v: {type: LoggerHook, priority: 101}\n"),
            Messages{"t.yaml:1:33: v.priority: must be <= 100, got 101"});
  EXPECT_EQ(
      check(hook, "v: {type: LoggerHook, priority: HIHG}\n"),
      Messages{"t.yaml:1:33: v.priority: expected one of HIGHEST, VERY_HIGH, HIGH, "
               "ABOVE_NORMAL, NORMAL, BELOW_NORMAL, LOW, VERY_LOW, LOWEST, got 'HIHG' (did you "
               "mean 'HIGH'?)"});
  EXPECT_EQ(check(hook, "v: {type: LoggerHook, priority: 1.5}\n"),
            Messages{"t.yaml:1:33: v.priority: expected an integer 0..100 or one of HIGHEST, "
                     "VERY_HIGH, HIGH, ABOVE_NORMAL, NORMAL, BELOW_NORMAL, LOW, VERY_LOW, LOWEST, "
                     "got '1.5'"});
  EXPECT_EQ(check(hook, "v: {interval: 5}\n"),
            Messages{"t.yaml:1:4: v: missing required key 'type'"});
  EXPECT_EQ(check(hook, "v: {type: [a]}\n"),
            Messages{"t.yaml:1:11: v.type: expected a string, got a list"});

  // Without priority, `priority` is just another key left to the plugin.
  EXPECT_EQ(check(schema::plugin_spec(false), "v: {type: ddp, priority: [1]}\n"), Messages{});
}

TEST(SchemaTest, PriorityLevels) {
  const auto& levels = schema::priority_levels();
  ASSERT_EQ(levels.size(), 9u);
  EXPECT_EQ(levels.front(), (std::pair<std::string, int>{"HIGHEST", 0}));
  EXPECT_EQ(levels[4], (std::pair<std::string, int>{"NORMAL", 50}));
  EXPECT_EQ(levels.back(), (std::pair<std::string, int>{"LOWEST", 100}));
}

TEST(SchemaTest, TypedUnionSelectsTheSchemaByType) {
  const Schema s = schema::typed_union(
      "type",
      {{"StepLR",
        schema::map({{"step_size", schema::integer(1), true}, {"gamma", schema::number()}})},
       {"PolyLR", schema::map({{"power", schema::number()}})},
       {"Anything", schema::any()}},
      "scheduler");
  EXPECT_EQ(check(s, "v: {type: StepLR, step_size: 3}\n"), Messages{});
  EXPECT_EQ(check(s, "v: {type: Anything, x: 1}\n"), Messages{});
  EXPECT_EQ(check(s, "v: {type: StepLR, gama: 0.1}\n"),
            (Messages{"t.yaml:1:4: v: missing required key 'step_size'",
                      "t.yaml:1:19: v.gama: unknown key (did you mean 'gamma'?)"}));
  EXPECT_EQ(check(s, "v: {type: PolyRL}\n"),
            Messages{"t.yaml:1:11: v.type: unknown scheduler type 'PolyRL'; choices: Anything, "
                     "PolyLR, StepLR (did you mean 'PolyLR'?)"});
  EXPECT_EQ(check(s, "v: {power: 1}\n"), Messages{"t.yaml:1:4: v: missing required key 'type'"});
  EXPECT_EQ(check(s, "v: [1]\n"), Messages{"t.yaml:1:4: v: expected a map, got a list"});
}

TEST(SchemaTest, DescribeSaysWhatIsAccepted) {
  EXPECT_EQ(schema::integer().describe(), "an integer");
  EXPECT_EQ(schema::number().describe(), "a number");
  EXPECT_EQ(schema::boolean().describe(), "a boolean");
  EXPECT_EQ(schema::string().describe(), "a string");
  EXPECT_EQ(schema::enumeration({"a", "b"}).describe(), "one of a, b");
  EXPECT_EQ(schema::list(schema::any()).describe(), "a list");
  EXPECT_EQ(schema::map({}).describe(), "a map");
}

}  // namespace
}  // namespace rh::config
