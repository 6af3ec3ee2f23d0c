#include <gtest/gtest.h>

#include <filesystem>

#include "config/JobLoader.hpp"
#include "config/YamlReader.hpp"
#include "host/config/ConfigTestUtil.hpp"

namespace rh::config {
namespace {

using test::config_error;
using test::data_path;
using test::same_tree;
using test::TempDir;

// Follows a dotted path (digits index lists); fails the test when it is not there.
const Node& at(const Node& root, const std::string& path) {
  const Node* node = &root;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string segment = path.substr(start, dot - start);
    const Node* next = nullptr;
    if (node->is_sequence()) {
      const size_t index = std::stoul(segment);
      if (index < node->seq_items().size()) next = node->seq_items()[index].get();
    } else {
      next = node->find(segment);
    }
    if (next == nullptr) throw std::runtime_error("no value at " + path);
    node = next;
    start = dot + 1;
  }
  return *node;
}

std::vector<std::string> keys(const Node& map) {
  std::vector<std::string> names;
  for (const auto& item : map.map_items()) names.push_back(item.first);
  return names;
}

// --- _base_ includes and merging ------------------------------------------------

TEST(JobLoaderTest, MergesBasesInOrderThenTheFileItself) {
  const Job job = load_job(data_path("jobs/mlp_ddp.yaml"), {});
  const Node& root = *job.root;

  EXPECT_EQ(job.files, (std::vector<std::string>{
                           data_path("jobs/mlp_ddp.yaml"), data_path("base/default_runtime.yaml"),
                           data_path("base/schedule.yaml"), data_path("models/mlp.yaml")}));
  // Base keys first (in base order), then the file's new keys; _base_ is gone.
  EXPECT_EQ(keys(root), (std::vector<std::string>{"work_dir", "seed", "log_level", "hooks", "dist",
                                                  "optim_wrapper", "param_scheduler", "train_cfg",
                                                  "model", "strategy"}));

  // Scalars replace.
  EXPECT_EQ(at(root, "work_dir").scalar(), "work_dirs/mlp_ddp");
  EXPECT_EQ(at(root, "seed").as_int(), 0);
  // Maps merge recursively, each value keeping the file it came from.
  EXPECT_EQ(at(root, "model.type").scalar(), "mlp");
  EXPECT_EQ(at(root, "model.type").location().str(), data_path("models/mlp.yaml") + ":2:9");
  EXPECT_EQ(at(root, "model.activation").scalar(), "relu");
  // Lists replace.
  ASSERT_EQ(at(root, "model.hidden").seq_items().size(), 1u);
  EXPECT_EQ(at(root, "model.hidden.0").as_int(), 128);
  EXPECT_EQ(at(root, "model.hidden.0").location().str(), data_path("jobs/mlp_ddp.yaml") + ":7:12");
  ASSERT_EQ(at(root, "hooks").seq_items().size(), 1u);
  EXPECT_EQ(at(root, "hooks.0.interval").as_int(), 50);
  // _delete_: true replaces the base's map instead of merging, and is removed.
  EXPECT_EQ(keys(at(root, "optim_wrapper.optimizer")), (std::vector<std::string>{"type", "lr"}));
  EXPECT_EQ(at(root, "optim_wrapper.optimizer.type").scalar(), "AdamW");
  // Without it, the nested map merges: max_norm from the job, norm_type from the base.
  EXPECT_DOUBLE_EQ(at(root, "optim_wrapper.clip_grad.max_norm").as_double(), 5.0);
  EXPECT_EQ(at(root, "optim_wrapper.clip_grad.norm_type").as_int(), 2);
  EXPECT_EQ(at(root, "optim_wrapper.clip_grad.norm_type").location().str(),
            data_path("base/schedule.yaml") + ":8:16");
  // Untouched base values survive.
  EXPECT_EQ(at(root, "param_scheduler.1.type").scalar(), "CosineAnnealingLR");
  // Paths describe the merged tree.
  EXPECT_EQ(at(root, "param_scheduler.1.T_max").path(), "param_scheduler.1.T_max");
  EXPECT_EQ(at(root, "hooks.0.priority").path(), "hooks.0.priority");
}

TEST(JobLoaderTest, IncludePathsAreRelativeToTheIncludingFile) {
  const Job job = load_job(data_path("jobs/sub/child.yaml"), {});
  EXPECT_EQ(at(*job.root, "seed").as_int(), 42);
  EXPECT_EQ(at(*job.root, "model.type").scalar(), "mlp");
  EXPECT_EQ(at(*job.root, "strategy.type").scalar(), "ddp");
  EXPECT_EQ(job.files, (std::vector<std::string>{
                           data_path("jobs/sub/child.yaml"), data_path("jobs/mlp_ddp.yaml"),
                           data_path("base/default_runtime.yaml"), data_path("base/schedule.yaml"),
                           data_path("models/mlp.yaml")}));
}

TEST(JobLoaderTest, IncludesWorkFromARelativeMainPath) {
  struct InDataDir {  // restores the working directory even when load_job throws
    const std::filesystem::path previous = std::filesystem::current_path();
    InDataDir() { std::filesystem::current_path(test::data_dir()); }
    ~InDataDir() { std::filesystem::current_path(previous); }
  };
  Job job;
  {
    InDataDir in_data_dir;
    job = load_job("jobs/sub/child.yaml", {});
  }
  EXPECT_EQ(job.files[1], "jobs/mlp_ddp.yaml");
  EXPECT_EQ(at(*job.root, "model.type").location().str(), "models/mlp.yaml:2:9");
}

TEST(JobLoaderTest, LaterBasesWinAndBaseMayBeAString) {
  TempDir dir;
  dir.write("one.yaml", "a: 1\nm: {x: 1, y: 1}\n");
  dir.write("two.yaml", "a: 2\nm: {y: 2, z: 2}\n");
  const std::string main = dir.write("main.yaml", "_base_: [one.yaml, two.yaml]\nm: {z: 3}\n");
  const Job job = load_job(main, {});
  EXPECT_EQ(at(*job.root, "a").as_int(), 2);
  EXPECT_EQ(keys(at(*job.root, "m")), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(at(*job.root, "m.x").as_int(), 1);
  EXPECT_EQ(at(*job.root, "m.y").as_int(), 2);
  EXPECT_EQ(at(*job.root, "m.z").as_int(), 3);

  const std::string single = dir.write("single.yaml", "_base_: one.yaml\nb: 1\n");
  EXPECT_EQ(load_job(single, {}).root->find("a")->as_int(), 1);
}

TEST(JobLoaderTest, NullAndScalarsReplaceMapsAndDeleteFalseMerges) {
  TempDir dir;
  dir.write("base.yaml", "val_cfg: {type: ValLoop}\nm: {a: 1, b: 1}\nn: {a: 1}\nl: [1, 2]\n");
  const std::string main = dir.write(
      "main.yaml", "_base_: base.yaml\nval_cfg:\nm: {_delete_: false, b: 2}\nn: 5\nl: {a: 1}\n");
  const Job job = load_job(main, {});
  EXPECT_TRUE(at(*job.root, "val_cfg").is_null());
  EXPECT_EQ(keys(at(*job.root, "m")), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(at(*job.root, "m.b").as_int(), 2);
  EXPECT_EQ(at(*job.root, "n").as_int(), 5);
  EXPECT_TRUE(at(*job.root, "l").is_map());
}

TEST(JobLoaderTest, DeleteIsRemovedEvenWithNothingToReplace) {
  TempDir dir;
  const std::string main =
      dir.write("main.yaml", "m: {_delete_: true, a: 1}\nl: [{_delete_: true}]\n");
  const Job job = load_job(main, {});
  EXPECT_EQ(keys(at(*job.root, "m")), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(at(*job.root, "l.0").map_items().empty());
}

TEST(JobLoaderTest, DeleteMustBeABoolean) {
  TempDir dir;
  dir.write("base.yaml", "m: {a: 1}\n");
  const std::string main = dir.write("main.yaml", "_base_: base.yaml\nm:\n  _delete_: yes\n");
  const auto error = config_error([&] { load_job(main, {}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->what(), main + ":3:13: m._delete_: expected a boolean, got 'yes'");
}

TEST(JobLoaderTest, IncludeCycleNamesTheCycle) {
  const auto error = config_error([] { load_job(data_path("cycle/a.yaml"), {}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->what(), data_path("cycle/b.yaml") + ":1:10: _base_.0: include cycle: " +
                               data_path("cycle/a.yaml") + " -> " + data_path("cycle/b.yaml") +
                               " -> " + data_path("cycle/a.yaml"));
}

TEST(JobLoaderTest, SelfIncludeIsACycle) {
  TempDir dir;
  const std::string main = dir.write("self.yaml", "x: 1\n_base_: ./self.yaml\n");
  const auto error = config_error([&] { load_job(main, {}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->message(), "include cycle: " + main + " -> " + main);
  EXPECT_EQ(error->where().line, 2);
  EXPECT_EQ(error->where().column, 9);
}

TEST(JobLoaderTest, DiamondIncludeIsNoCycle) {
  TempDir dir;
  dir.write("common.yaml", "seed: 1\n");
  dir.write("left.yaml", "_base_: common.yaml\nleft: 1\n");
  dir.write("right.yaml", "_base_: common.yaml\nright: 1\n");
  const std::string main = dir.write("main.yaml", "_base_: [left.yaml, right.yaml]\n");
  const Job job = load_job(main, {});
  EXPECT_EQ(keys(*job.root), (std::vector<std::string>{"seed", "left", "right"}));
  EXPECT_EQ(job.files.size(), 4u);  // common.yaml listed once
}

TEST(JobLoaderTest, MissingIncludeNamesTheResolvedPath) {
  const auto error = config_error([] { load_job(data_path("missing_base.yaml"), {}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->what(), data_path("missing_base.yaml") +
                               ":3:5: _base_.1: cannot read included file "
                               "'base/does_not_exist.yaml' (resolved to " +
                               data_path("base/does_not_exist.yaml") +
                               "): No such file or directory");
}

TEST(JobLoaderTest, MissingMainFile) {
  const auto error = config_error([] { load_job("/nonexistent/job.yaml", {}); });
  ASSERT_TRUE(error);
  EXPECT_STREQ(error->what(), "/nonexistent/job.yaml: cannot read file: No such file or directory");
}

TEST(JobLoaderTest, SyntaxErrorInTheJobFile) {
  const auto error = config_error([] { load_job(data_path("syntax_error.yaml"), {}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->what(),
            data_path("syntax_error.yaml") + ":4:2: YAML syntax error: end of map not found");
}

TEST(JobLoaderTest, SyntaxErrorInABaseIsLocatedInTheBase) {
  TempDir dir;
  const std::string base = dir.write("base.yaml", "a: [1,\n");
  const std::string main = dir.write("main.yaml", "_base_: base.yaml\n");
  const auto error = config_error([&] { load_job(main, {}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->where().file, base);
  EXPECT_EQ(error->message().rfind("YAML syntax error: ", 0), 0u) << error->what();
}

TEST(JobLoaderTest, TheJobFileMustBeAMap) {
  TempDir dir;
  const std::string list = dir.write("list.yaml", "- a\n- b\n");
  const auto error = config_error([&] { load_job(list, {}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->what(), list + ":1:1: the job file must be a map of keys, got a list");

  const std::string empty = dir.write("empty.yaml", "# nothing\n");
  const auto empty_error = config_error([&] { load_job(empty, {}); });
  ASSERT_TRUE(empty_error);
  EXPECT_EQ(empty_error->what(), empty + ": the job file must be a map of keys, got null");
}

TEST(JobLoaderTest, BaseMustBeFileNames) {
  TempDir dir;
  const std::string map = dir.write("map.yaml", "_base_: {a: 1}\n");
  const auto error = config_error([&] { load_job(map, {}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->what(),
            map + ":1:9: _base_: expected a file name or a list of file names, got a map");

  const std::string nested = dir.write("nested.yaml", "_base_:\n  - [a.yaml]\n");
  const auto nested_error = config_error([&] { load_job(nested, {}); });
  ASSERT_TRUE(nested_error);
  EXPECT_EQ(nested_error->what(), nested + ":2:5: _base_.0: expected a file name, got a list");
}

// --- --set overrides -------------------------------------------------------------------

class JobLoaderSetTest : public ::testing::Test {
 protected:
  Job load(const std::vector<std::string>& sets) {
    return load_job(dir_.write("job.yaml",
                               "model: {type: MLP, hidden: [64, 64]}\n"
                               "seed: 1\n"
                               "hooks:\n"
                               "  - type: LoggerHook\n"
                               "    interval: 10\n"
                               "  - type: CheckpointHook\n"
                               "val_cfg:\n"),
                    sets);
  }
  std::string error_of(const std::vector<std::string>& sets) {
    const auto error = config_error([&] { load(sets); });
    return error ? error->what() : "";
  }
  TempDir dir_;
};

TEST_F(JobLoaderSetTest, NumberReplacesAndKeepsTheOverrideLocation) {
  const Job job = load({"optim_wrapper.optimizer.lr=3e-4", "seed=7"});
  const Node& lr = at(*job.root, "optim_wrapper.optimizer.lr");
  EXPECT_DOUBLE_EQ(lr.as_double(), 3e-4);
  EXPECT_EQ(lr.kind_name(), "a number");
  EXPECT_EQ(lr.location().str(), "--set 'optim_wrapper.optimizer.lr=3e-4'");
  EXPECT_EQ(lr.location_text(), "--set 'optim_wrapper.optimizer.lr=3e-4'");
  EXPECT_EQ(lr.path(), "optim_wrapper.optimizer.lr");
  // Missing maps on the way were created, located at the override.
  EXPECT_EQ(at(*job.root, "optim_wrapper").location().str(),
            "--set 'optim_wrapper.optimizer.lr=3e-4'");
  EXPECT_EQ(job.root->key_location("optim_wrapper").str(),
            "--set 'optim_wrapper.optimizer.lr=3e-4'");
  EXPECT_EQ(at(*job.root, "seed").as_int(), 7);
  EXPECT_EQ(job.root->map_items()[1].first, "seed");  // replaced in place
}

TEST_F(JobLoaderSetTest, ListMapQuotedStringAndNull) {
  const Job job = load({"model.hidden=[256, 128, 64]", "dist={backend: gloo, timeout_s: 60}",
                        "work_dir='123'", "seed="});
  const Node& hidden = at(*job.root, "model.hidden");
  ASSERT_TRUE(hidden.is_sequence());
  ASSERT_EQ(hidden.seq_items().size(), 3u);
  EXPECT_EQ(at(*job.root, "model.hidden.2").as_int(), 64);
  EXPECT_EQ(at(*job.root, "model.hidden.2").path(), "model.hidden.2");
  EXPECT_EQ(at(*job.root, "model.hidden.2").location().str(),
            "--set 'model.hidden=[256, 128, 64]'");
  EXPECT_EQ(at(*job.root, "dist.backend").scalar(), "gloo");
  EXPECT_EQ(at(*job.root, "dist.timeout_s").location().line, 0);
  EXPECT_TRUE(at(*job.root, "work_dir").quoted());
  EXPECT_EQ(at(*job.root, "work_dir").kind_name(), "a string");
  EXPECT_TRUE(at(*job.root, "seed").is_null());
}

TEST_F(JobLoaderSetTest, IndexIntoAList) {
  const Job job =
      load({"hooks.0.interval=5", "hooks.1={type: EMAHook, momentum: 0.9}", "model.hidden.1=32"});
  EXPECT_EQ(at(*job.root, "hooks.0.interval").as_int(), 5);
  EXPECT_EQ(at(*job.root, "hooks.0.type").scalar(), "LoggerHook");
  EXPECT_EQ(at(*job.root, "hooks.1.type").scalar(), "EMAHook");
  EXPECT_EQ(at(*job.root, "hooks.1.momentum").path(), "hooks.1.momentum");
  EXPECT_EQ(at(*job.root, "model.hidden.1").as_int(), 32);
  EXPECT_EQ(at(*job.root, "model.hidden.0").as_int(), 64);
}

TEST_F(JobLoaderSetTest, CreatesKeysAndTurnsNullIntoAMap) {
  const Job job = load({"strategy.type=ddp", "val_cfg.type=ValLoop", "a.b.c.d=x"});
  EXPECT_EQ(at(*job.root, "strategy.type").scalar(), "ddp");
  EXPECT_EQ(at(*job.root, "val_cfg.type").scalar(), "ValLoop");
  EXPECT_EQ(at(*job.root, "a.b.c.d").path(), "a.b.c.d");
  EXPECT_EQ(at(*job.root, "a.b").location().str(), "--set 'a.b.c.d=x'");
}

TEST_F(JobLoaderSetTest, AppliesInOrderAndSplitsAtTheFirstEquals) {
  const Job job = load({"seed=2", "seed=3", "work_dir=a=b"});
  EXPECT_EQ(at(*job.root, "seed").as_int(), 3);
  EXPECT_EQ(at(*job.root, "work_dir").scalar(), "a=b");
}

TEST_F(JobLoaderSetTest, ThroughAScalarIsAnError) {
  EXPECT_EQ(error_of({"seed.value=1"}),
            "--set 'seed.value=1': seed: cannot set 'seed.value': 'seed' is an integer, not a map");
  EXPECT_EQ(error_of({"model.type.x=1"}),
            "--set 'model.type.x=1': model.type: cannot set 'model.type.x': 'model.type' is a "
            "string, not a map");
  EXPECT_EQ(error_of({"seed.0=1"}),
            "--set 'seed.0=1': seed: cannot set 'seed.0': 'seed' is an integer, not a list");
}

TEST_F(JobLoaderSetTest, ListNeedsAnIndexInRange) {
  EXPECT_EQ(error_of({"hooks.2.interval=1"}),
            "--set 'hooks.2.interval=1': hooks: cannot set 'hooks.2.interval': index 2 is out of "
            "range, 'hooks' has 2 items");
  EXPECT_EQ(error_of({"hooks.interval=1"}),
            "--set 'hooks.interval=1': hooks: cannot set 'hooks.interval': 'hooks' is a list, "
            "'interval' is not an item index");
}

TEST_F(JobLoaderSetTest, MalformedArguments) {
  EXPECT_EQ(error_of({"xyz"}), "--set: expected key.path=value, got 'xyz'");
  EXPECT_EQ(error_of({"=5"}), "--set: expected key.path=value, got '=5'");
  EXPECT_EQ(error_of({"a..b=1"}),
            "--set 'a..b=1': expected key.path=value, got 'a..b=1' (empty key segment)");
  EXPECT_EQ(error_of({"seed=[1, 2"}),
            "--set 'seed=[1, 2': seed: cannot parse the value: YAML syntax error: end of sequence "
            "flow not found (column 1)");
}

TEST(JobLoaderTest, ApplySetWorksOnAnyTree) {
  const NodePtr root = parse_yaml("a: 1\n", "t.yaml");
  apply_set(*root, "b.c=2");
  EXPECT_EQ(at(*root, "b.c").as_int(), 2);
  EXPECT_EQ(at(*root, "b.c").path(), "b.c");
}

// --- to_yaml ------------------------------------------------------------------------

TEST(JobLoaderTest, ToYamlWritesBlockStyleInKeyOrder) {
  const NodePtr root = parse_yaml(
      "b: 1\na:\n  list: [1, {x: y}, [2, 3]]\n  empty_map: {}\n  empty_list: []\n  n: ~\n"
      "s: '1'\n",
      "t.yaml");
  EXPECT_EQ(to_yaml(*root),
            "b: 1\n"
            "a:\n"
            "  list:\n"
            "    - 1\n"
            "    - x: y\n"
            "    - - 2\n"
            "      - 3\n"
            "  empty_map: {}\n"
            "  empty_list: []\n"
            "  n: null\n"
            "s: \"1\"\n");
}

TEST(JobLoaderTest, ToYamlRoundTripsTheMergedJob) {
  const Job job = load_job(data_path("jobs/mlp_ddp.yaml"), {"model.hidden=[1, 2]", "name='true'"});
  const NodePtr again = parse_yaml(to_yaml(*job.root), "printed.yaml");
  EXPECT_TRUE(same_tree(*job.root, *again)) << to_yaml(*job.root);
}

TEST(JobLoaderTest, ToYamlQuotesStringsThatWouldReadBackAsSomethingElse) {
  const NodePtr root = parse_yaml(
      "int: '1'\n"
      "float: '1e-3'\n"
      "bool: 'true'\n"
      "nul: 'null'\n"
      "tilde: '~'\n"
      "empty: ''\n"
      "spaces: '  padded  '\n"
      "colon: 'a: b'\n"
      "hash: 'a #b'\n"
      "dash: '- x'\n"
      "flow: '[1, 2]'\n"
      "anchor: '&a'\n"
      "quote: 'it''s \"q\"'\n"
      "backslash: 'C:\\dir'\n"
      "multi: |\n"
      "  line 1\n"
      "  line 2\n"
      "doc: '---'\n"
      "plain_ok: hello world\n"
      "quoted_ok: 'hello'\n"
      "url: http://x/y\n"
      "specials: [.inf, -.inf, .nan, 3e-4, -5, +5, TRUE]\n"
      "'1': key that looks like an int\n"
      "'a: b': key with a colon\n"
      "unicode: 'ünïcödé'\n"
      "tab: \"a\\tb\"\n"
      "bell: \"\\a\"\n",
      "t.yaml");
  const std::string text = to_yaml(*root);
  const NodePtr again = parse_yaml(text, "printed.yaml");
  EXPECT_TRUE(same_tree(*root, *again)) << text;
  EXPECT_NE(text.find("int: \"1\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("bool: \"true\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("plain_ok: hello world\n"), std::string::npos) << text;
  EXPECT_NE(text.find("quoted_ok: hello\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  - 3e-4\n"), std::string::npos) << text;
}

// Found by fuzz_job_config: an implicit key may be at most 1024 characters
// long, so a longer one printed as "key: value" did not read back.
TEST(JobLoaderTest, ToYamlWritesKeysLongerThanAnImplicitKeyMayBeAsExplicitKeys) {
  const std::string long_key(1100, 'k');
  const NodePtr root = parse_yaml(
      "? " + long_key + "\n: 1\n" + "list:\n  - ? " + long_key + "\n    : {a: 2}\n" + "short: 3\n",
      "t.yaml");
  const std::string text = to_yaml(*root);
  const NodePtr again = parse_yaml(text, "printed.yaml");
  EXPECT_TRUE(same_tree(*root, *again)) << text;
  EXPECT_EQ(text, "? " + long_key + "\n: 1\n" + "list:\n  - ? " + long_key +
                      "\n    :\n      a: 2\n" + "short: 3\n");
}

}  // namespace
}  // namespace rh::config
