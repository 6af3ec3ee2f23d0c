#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "config/ConfigNode.hpp"
#include "config/YamlReader.hpp"
#include "host/config/ConfigTestUtil.hpp"

namespace rh::config {
namespace {

using test::config_error;
using test::messages;

NodePtr parse(const std::string& text) { return parse_yaml(text, "job.yaml"); }

// --- Location and ConfigError ---------------------------------------------------

TEST(ConfigNodeTest, LocationPrintsFileLineAndColumn) {
  EXPECT_EQ((Location{"job.yaml", 3, 7}).str(), "job.yaml:3:7");
  EXPECT_EQ((Location{"job.yaml", 3, 0}).str(), "job.yaml:3");
  EXPECT_EQ((Location{"--set 'a=1'"}).str(), "--set 'a=1'");
}

TEST(ConfigNodeTest, ConfigErrorJoinsLocationPathAndMessage) {
  const ConfigError error(Location{"job.yaml", 3, 7}, "train_cfg.max_epochs",
                          "must be >= 1, got 0");
  EXPECT_STREQ(error.what(), "job.yaml:3:7: train_cfg.max_epochs: must be >= 1, got 0");
  EXPECT_EQ(error.where().line, 3);
  EXPECT_EQ(error.key_path(), "train_cfg.max_epochs");
  EXPECT_EQ(error.message(), "must be >= 1, got 0");

  const ConfigError no_path(Location{"job.yaml"}, "", "cannot read file: Permission denied");
  EXPECT_STREQ(no_path.what(), "job.yaml: cannot read file: Permission denied");
}

// --- parsing: kinds, locations, paths ---------------------------------------------

TEST(ConfigNodeTest, ParseKeepsKindsOrderLocationsAndPaths) {
  const NodePtr root = parse(
      "work_dir: out\n"          // 1
      "hooks:\n"                 // 2
      "  - type: LoggerHook\n"   // 3
      "    interval: 10\n"       // 4
      "strategy: {type: ddp}\n"  // 5
      "empty:\n"                 // 6
      "tilde: ~\n");             // 7
  ASSERT_TRUE(root->is_map());
  ASSERT_EQ(root->map_items().size(), 5u);
  EXPECT_EQ(root->map_items()[0].first, "work_dir");
  EXPECT_EQ(root->map_items()[4].first, "tilde");
  EXPECT_EQ(root->path(), "");

  const Node* hooks = root->find("hooks");
  ASSERT_NE(hooks, nullptr);
  ASSERT_TRUE(hooks->is_sequence());
  const Node* type = hooks->seq_items()[0]->find("type");
  ASSERT_NE(type, nullptr);
  EXPECT_EQ(type->scalar(), "LoggerHook");
  EXPECT_EQ(type->path(), "hooks.0.type");
  EXPECT_EQ(type->location().str(), "job.yaml:3:11");
  EXPECT_EQ(type->location_text(), "job.yaml:3:11");
  EXPECT_EQ(hooks->seq_items()[0]->find("interval")->location().str(), "job.yaml:4:15");
  EXPECT_EQ(root->key_location("strategy").str(), "job.yaml:5:1");
  EXPECT_EQ(root->find("strategy")->find("type")->location().str(), "job.yaml:5:18");
  EXPECT_EQ(root->find("strategy")->find("type")->path(), "strategy.type");

  // An empty value is located at its key, not at the next line.
  EXPECT_TRUE(root->find("empty")->is_null());
  EXPECT_EQ(root->find("empty")->location().str(), "job.yaml:6:1");
  EXPECT_TRUE(root->find("tilde")->is_null());
  EXPECT_EQ(root->find("tilde")->location().str(), "job.yaml:7:8");
}

TEST(ConfigNodeTest, FindPathFollowsDotsAndCanTakeNullForAbsent) {
  const NodePtr root = parse(
      "optim_wrapper: {optimizer: {type: SGD, lr: 0.1}, clip_grad: ~}\n"
      "dist: {backend: gloo}\n");
  const Node* lr = root->find_path("optim_wrapper.optimizer.lr");
  ASSERT_NE(lr, nullptr);
  EXPECT_EQ(lr->scalar(), "0.1");
  EXPECT_EQ(root->find_path("dist"), root->find("dist"));
  EXPECT_EQ(root->find_path("dist.timeout_s"), nullptr);           // absent
  EXPECT_EQ(root->find_path("dist.backend.gloo"), nullptr);        // below a scalar
  EXPECT_EQ(root->find_path("no.such.key"), nullptr);              // absent early
  ASSERT_NE(root->find_path("optim_wrapper.clip_grad"), nullptr);  // null is a node...
  EXPECT_TRUE(root->find_path("optim_wrapper.clip_grad")->is_null());
  EXPECT_EQ(root->find_path("optim_wrapper.clip_grad", true), nullptr);  // ...or absent
}

TEST(ConfigNodeTest, QuotedScalarsAreStrings) {
  const NodePtr root = parse(
      "a: '1'\n"
      "b: \"true\"\n"
      "c: 1\n"
      "d: |\n"
      "  text\n");
  EXPECT_TRUE(root->find("a")->quoted());
  EXPECT_EQ(root->find("a")->kind_name(), "a string");
  EXPECT_TRUE(root->find("b")->quoted());
  EXPECT_EQ(root->find("b")->kind_name(), "a string");
  EXPECT_FALSE(root->find("c")->quoted());
  EXPECT_EQ(root->find("c")->kind_name(), "an integer");
  EXPECT_TRUE(root->find("d")->quoted());
  EXPECT_EQ(root->find("d")->as_string(), "text\n");
}

TEST(ConfigNodeTest, KindNameSaysWhatAValueLooksLike) {
  const NodePtr root = parse(
      "i: -3\nf: 1.5e-3\nb: False\ns: abc\nn: null\nl: [1]\nm: {a: 1}\ninf: -.inf\nyes: yes\n");
  EXPECT_EQ(root->find("i")->kind_name(), "an integer");
  EXPECT_EQ(root->find("f")->kind_name(), "a number");
  EXPECT_EQ(root->find("b")->kind_name(), "a boolean");
  EXPECT_EQ(root->find("s")->kind_name(), "a string");
  EXPECT_EQ(root->find("n")->kind_name(), "null");
  EXPECT_EQ(root->find("l")->kind_name(), "a list");
  EXPECT_EQ(root->find("m")->kind_name(), "a map");
  EXPECT_EQ(root->find("inf")->kind_name(), "a number");
  EXPECT_EQ(root->find("yes")->kind_name(), "a string");  // YAML 1.2 core: not a boolean
}

TEST(ConfigNodeTest, SyntaxErrorIsLocatedAtTheParserMark) {
  const auto error = config_error([] { parse("seed: 1\nmodel:\n  type: MLP\n hidden: 3\n"); });
  ASSERT_TRUE(error);
  EXPECT_STREQ(error->what(), "job.yaml:4:2: YAML syntax error: end of map not found");
  EXPECT_EQ(error->where().line, 4);
  EXPECT_EQ(error->where().column, 2);
  EXPECT_EQ(error->key_path(), "");

  const auto flow = config_error([] { parse("a:\n  b: [1, 2\nc: 3\n"); });
  ASSERT_TRUE(flow);
  EXPECT_STREQ(flow->what(), "job.yaml:3:2: YAML syntax error: end of sequence flow not found");
}

TEST(ConfigNodeTest, DuplicateKeyIsAnError) {
  const auto error = config_error([] { parse("a:\n  x: 1\n  y: 2\n  x: 3\n"); });
  ASSERT_TRUE(error);
  EXPECT_STREQ(error->what(), "job.yaml:4:3: a.x: duplicate key 'x' (first defined at line 2)");
}

TEST(ConfigNodeTest, NonStringKeyIsAnError) {
  const auto error = config_error([] { parse("a:\n  [1, 2]: x\n"); });
  ASSERT_TRUE(error);
  EXPECT_STREQ(error->what(), "job.yaml:2:3: a: map keys must be strings, got a list");
}

TEST(ConfigNodeTest, RecursiveAliasIsAnErrorNotACrash) {
  const auto error = config_error([] { parse("a: &x [*x]\n"); });
  ASSERT_TRUE(error);
  EXPECT_NE(error->message().find("nesting is too deep"), std::string::npos) << error->what();
}

TEST(ConfigNodeTest, AliasesAreCopied) {
  const NodePtr root = parse("base: &b {lr: 0.1}\nother: *b\n");
  EXPECT_EQ(root->find("other")->find("lr")->scalar(), "0.1");
  EXPECT_EQ(root->find("other")->find("lr")->path(), "other.lr");
  EXPECT_NE(root->find("other"), root->find("base"));
}

TEST(ConfigNodeTest, MoreThanOneDocumentIsAnError) {
  const auto error = config_error([] { parse("a: 1\n---\nb: 2\n"); });
  ASSERT_TRUE(error);
  EXPECT_STREQ(error->what(),
               "job.yaml:2:1: expected one YAML document, found 2 (remove the '---' separators or "
               "split the file)");
  EXPECT_EQ(parse("---\na: 1\n")->find("a")->as_int(), 1);  // one document with a marker is fine
}

// yaml-cpp 0.7's LoadAll loops forever (allocating) on these (found by the
// job_config fuzzer; yaml-cpp #1040): a syntax error, at once.
TEST(ConfigNodeTest, AStrayCommaIsASyntaxErrorNotAHang) {
  for (const char* text : {",", ",\na:\n b:\n c}\n"}) {
    const auto error = config_error([&] { parse(text); });
    ASSERT_TRUE(error) << text;
    EXPECT_STREQ(error->what(),
                 "job.yaml:1:1: YAML syntax error: the parser cannot read on from here (a stray "
                 "',', '}' or ']'?)");
  }
}

TEST(ConfigNodeTest, EmptyDocumentIsNull) {
  EXPECT_TRUE(parse("")->is_null());
  EXPECT_TRUE(parse("# only a comment\n")->is_null());
}

// --- typed reads --------------------------------------------------------------------

TEST(ConfigNodeTest, AsIntReadsDecimalIntegers) {
  const NodePtr root = parse("a: 42\nb: -7\nc: +3\nd: 0\ne: 9223372036854775807\n");
  EXPECT_EQ(root->find("a")->as_int(), 42);
  EXPECT_EQ(root->find("b")->as_int(), -7);
  EXPECT_EQ(root->find("c")->as_int(), 3);
  EXPECT_EQ(root->find("d")->as_int(), 0);
  EXPECT_EQ(root->find("e")->as_int(), std::numeric_limits<int64_t>::max());
}

TEST(ConfigNodeTest, AsIntRejectsEverythingElse) {
  const NodePtr root = parse(
      "abc: abc\n"
      "float: 1.5\n"
      "quoted: '1'\n"
      "bool: true\n"
      "list: [1]\n"
      "nothing:\n"
      "big: 9223372036854775808\n");
  const auto what = [&](const char* key) {
    const auto error = config_error([&] { root->find(key)->as_int(); });
    return error ? std::string(error->what()) : "";
  };
  EXPECT_EQ(what("abc"), "job.yaml:1:6: abc: expected an integer, got 'abc'");
  EXPECT_EQ(what("float"), "job.yaml:2:8: float: expected an integer, got '1.5'");
  EXPECT_EQ(
      what("quoted"),
      "job.yaml:3:9: quoted: expected an integer, got '1' (a quoted string; remove the quotes)");
  EXPECT_EQ(what("bool"), "job.yaml:4:7: bool: expected an integer, got 'true'");
  EXPECT_EQ(what("list"), "job.yaml:5:7: list: expected an integer, got a list");
  EXPECT_EQ(what("nothing"), "job.yaml:6:1: nothing: expected an integer, got null");
  EXPECT_EQ(what("big"),
            "job.yaml:7:6: big: expected an integer, got '9223372036854775808' (out of the 64-bit "
            "range)");
}

TEST(ConfigNodeTest, AsDoubleReadsIntsFloatsAndSpecials) {
  const NodePtr root = parse(
      "a: 1\nb: -2\nc: 1.5\nd: 1e-3\ne: 3e-4\nf: .5\ng: .inf\nh: -.inf\ni: .nan\nj: +1.0E+2\n");
  EXPECT_DOUBLE_EQ(root->find("a")->as_double(), 1.0);
  EXPECT_DOUBLE_EQ(root->find("b")->as_double(), -2.0);
  EXPECT_DOUBLE_EQ(root->find("c")->as_double(), 1.5);
  EXPECT_DOUBLE_EQ(root->find("d")->as_double(), 1e-3);
  EXPECT_DOUBLE_EQ(root->find("e")->as_double(), 3e-4);
  EXPECT_DOUBLE_EQ(root->find("f")->as_double(), 0.5);
  EXPECT_EQ(root->find("g")->as_double(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(root->find("h")->as_double(), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(root->find("i")->as_double()));
  EXPECT_DOUBLE_EQ(root->find("j")->as_double(), 100.0);
}

TEST(ConfigNodeTest, AsDoubleRejectsNonNumbers) {
  const NodePtr root = parse("a: abc\nb: '1.5'\nc: true\nd: {x: 1}\ne: 1e999\n");
  const auto what = [&](const char* key) {
    const auto error = config_error([&] { root->find(key)->as_double(); });
    return error ? std::string(error->what()) : "";
  };
  EXPECT_EQ(what("a"), "job.yaml:1:4: a: expected a number, got 'abc'");
  EXPECT_EQ(what("b"),
            "job.yaml:2:4: b: expected a number, got '1.5' (a quoted string; remove the quotes)");
  EXPECT_EQ(what("c"), "job.yaml:3:4: c: expected a number, got 'true'");
  EXPECT_EQ(what("d"), "job.yaml:4:4: d: expected a number, got a map");
  EXPECT_EQ(what("e"), "job.yaml:5:4: e: expected a number, got '1e999' (out of the double range)");
}

TEST(ConfigNodeTest, AsBoolReadsTheCoreSpellingsOnly) {
  const NodePtr root = parse("a: true\nb: False\nc: TRUE\nd: yes\ne: 3\nf: 'true'\ng: tRue\n");
  EXPECT_TRUE(root->find("a")->as_bool());
  EXPECT_FALSE(root->find("b")->as_bool());
  EXPECT_TRUE(root->find("c")->as_bool());
  const auto what = [&](const char* key) {
    const auto error = config_error([&] { root->find(key)->as_bool(); });
    return error ? std::string(error->what()) : "";
  };
  EXPECT_EQ(what("d"), "job.yaml:4:4: d: expected a boolean, got 'yes'");
  EXPECT_EQ(what("e"), "job.yaml:5:4: e: expected a boolean, got '3'");
  EXPECT_EQ(what("f"),
            "job.yaml:6:4: f: expected a boolean, got 'true' (a quoted string; remove the quotes)");
  EXPECT_EQ(what("g"), "job.yaml:7:4: g: expected a boolean, got 'tRue'");
}

TEST(ConfigNodeTest, AsStringAcceptsAnyScalar) {
  const NodePtr root = parse("a: abc\nb: '1'\nc: 1\nd: [x]\ne:\n");
  EXPECT_EQ(root->find("a")->as_string(), "abc");
  EXPECT_EQ(root->find("b")->as_string(), "1");
  EXPECT_EQ(root->find("c")->as_string(), "1");
  const auto list = config_error([&] { root->find("d")->as_string(); });
  ASSERT_TRUE(list);
  EXPECT_STREQ(list->what(), "job.yaml:4:4: d: expected a string, got a list");
  const auto null = config_error([&] { root->find("e")->as_string(); });
  ASSERT_TRUE(null);
  EXPECT_STREQ(null->what(), "job.yaml:5:1: e: expected a string, got null");
}

// --- construction ---------------------------------------------------------------

TEST(ConfigNodeTest, BuildersSetEraseAndAssignPaths) {
  const NodePtr root = Node::make_map(Location{"built"});
  root->set("a", Node::make_scalar("1", false, Location{"built", 1, 1}), Location{"built", 1, 1});
  const NodePtr list = Node::make_sequence(Location{"built"});
  list->append(Node::make_scalar("x", true, Location{"built"}));
  root->set("list", list, Location{"built"});
  root->set("a", Node::make_scalar("2", false, Location{"built"}), Location{"built", 9, 1});
  root->assign_paths();

  ASSERT_EQ(root->map_items().size(), 2u);
  EXPECT_EQ(root->map_items()[0].first, "a");  // replaced in place
  EXPECT_EQ(root->find("a")->as_int(), 2);
  EXPECT_EQ(root->key_location("a").line, 9);
  EXPECT_EQ(list->seq_items()[0]->path(), "list.0");
  EXPECT_TRUE(root->erase("a"));
  EXPECT_FALSE(root->erase("a"));
  EXPECT_EQ(root->find("a"), nullptr);
}

TEST(ConfigNodeTest, CloneIsDeep) {
  const NodePtr root = parse("a: {b: [1, 2]}\n");
  const NodePtr copy = root->clone();
  copy->get("a")->set("c", Node::make_null(Location{}), Location{});
  EXPECT_EQ(root->find("a")->find("c"), nullptr);
  EXPECT_TRUE(test::same_tree(*root->find("a")->find("b"), *copy->find("a")->find("b")));
  EXPECT_EQ(copy->find("a")->find("b")->location().str(), "job.yaml:1:8");
}

// --- usage tracking and unknown_keys ----------------------------------------------------

TEST(ConfigNodeTest, FindDoesNotRecordLookupDoes) {
  const NodePtr root = parse("strategy: {type: ddp, bucket_cap_mb: 25}\n");
  const Node* strategy = root->find("strategy");
  EXPECT_NE(strategy->find("bucket_cap_mb"), nullptr);
  EXPECT_TRUE(strategy->lookups().empty());
  EXPECT_NE(strategy->lookup("bucket_cap_mb"), nullptr);
  EXPECT_EQ(strategy->lookup("find_unused_parameters"), nullptr);  // absent keys count too
  EXPECT_EQ(strategy->lookups(),
            (std::set<std::string>{"bucket_cap_mb", "find_unused_parameters"}));
  EXPECT_EQ(strategy->find("type")->find("x"), nullptr);  // not a map
}

TEST(ConfigNodeTest, UnknownKeysReportsWhatThePluginNeverLookedUp) {
  const NodePtr root = parse(
      "strategy:\n"             // 1
      "  type: ddp\n"           // 2
      "  plugin: libddp.so\n"   // 3
      "  bucket_cap_md: 25\n"   // 4  typo
      "  find_unused: true\n"   // 5  no close match
      "  comm:\n"               // 6
      "    backend: nccl\n"     // 7
      "    timout: 5\n"         // 8  nested typo
      "  stages:\n"             // 9
      "    - name: a\n"         // 10
      "      extra: 1\n"        // 11
      "  ignored: {deep: 1}\n"  // 12 not looked up: one error, not one per key
      "  plugn: x\n");          // 13 close to a host key
  const Node& strategy = *root->find("strategy");
  strategy.lookup("bucket_cap_mb");
  strategy.lookup("find_unused_parameters");
  const Node* comm = strategy.lookup("comm");
  comm->lookup("backend");
  comm->lookup("timeout");
  const Node* stages = strategy.lookup("stages");
  stages->seq_items()[0]->lookup("name");

  const auto errors = unknown_keys(strategy, {"type", "plugin", "priority"}, "strategy 'ddp'");
  EXPECT_EQ(
      messages(errors),
      (std::vector<std::string>{
          "job.yaml:4:3: strategy.bucket_cap_md: unknown key for strategy 'ddp' (did you mean "
          "'bucket_cap_mb'?)",
          "job.yaml:5:3: strategy.find_unused: unknown key for strategy 'ddp'",
          "job.yaml:8:5: strategy.comm.timout: unknown key for strategy 'ddp' (did you mean "
          "'timeout'?)",
          "job.yaml:11:7: strategy.stages.0.extra: unknown key for strategy 'ddp'",
          "job.yaml:12:3: strategy.ignored: unknown key for strategy 'ddp'",
          "job.yaml:13:3: strategy.plugn: unknown key for strategy 'ddp' (did you mean "
          "'plugin'?)",
      }));
}

TEST(ConfigNodeTest, UnknownKeysIsEmptyWhenEverythingWasRead) {
  const NodePtr root = parse("hook: {type: Logger, priority: 10, interval: 5}\n");
  const Node& hook = *root->find("hook");
  hook.lookup("interval");
  EXPECT_TRUE(unknown_keys(hook, {"type", "plugin", "priority"}, "hook 'Logger'").empty());
  // Host keys are only skipped at the top level of the component.
  EXPECT_EQ(unknown_keys(*root->find("hook")->find("type"), {}, "x").size(), 0u);  // not a map
}

}  // namespace
}  // namespace rh::config
