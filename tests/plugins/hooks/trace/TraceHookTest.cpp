// The shipped `trace` hook (plugins/hooks/trace) driven through its C vtable
// by a fake host (common/FakeHost.hpp, the SDK alone): the line format the
// golden lifecycle tests rely on, its config keys, when the lines it keeps
// reach the file, its checkpoint state and its errors.
// TraceHookThroughHostTest.cpp beside it creates the hook from a job file
// with the real factory and host table. Two files because two hosts: the fake
// one defines the ABI's opaque structs (rh_Context, rh_StateDict) itself, the
// real one its own, and one binary can hold only one of them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/FakeHost.hpp"

namespace rh::test {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class TraceHookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_ = LoadedPlugin::open(RH_TRACE_HOOK_PATH);
    const rh_PluginInfo* info = plugin_.info();
    ASSERT_NE(info, nullptr);
    ASSERT_EQ(info->num_components, 1u);
    vtable_ = static_cast<const rh_HookVtable*>(info->components[0].vtable);
    dir_ = fs::temp_directory_path() /
           ("rh-trace-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (instance_ != nullptr) vtable_->Destroy(instance_);
    fs::remove_all(dir_);
  }

  // Creates the hook with `config`; returns the error (code, message).
  std::pair<rh_ErrorCode, std::string> create(const std::map<std::string, std::string>& config) {
    host_.config(config);
    rh_CreateArgs args = host_.create_args("trace", dir_.string());
    return FakeHost::take(vtable_->Create(&args, &instance_));
  }
  std::pair<rh_ErrorCode, std::string> send(rh_HookEvent event) {
    rh_HookEventArgs args = events_.args(event);
    return FakeHost::take(vtable_->OnEvent(instance_, &args));
  }

  FakeHost host_;
  LoadedPlugin plugin_;
  const rh_HookVtable* vtable_ = nullptr;
  rh_HookInstance* instance_ = nullptr;
  EventBuilder events_;
  fs::path dir_;
};

TEST_F(TraceHookTest, DescribesItself) {
  const rh_PluginInfo* info = plugin_.info();
  EXPECT_EQ(view(info->name), "rh_hook_trace");
  EXPECT_EQ(view(info->version), "0.1.0");
  EXPECT_EQ(view(info->native_tag.torch_version), "");
  EXPECT_EQ(info->components[0].kind, RH_COMPONENT_HOOK);
  EXPECT_EQ(view(info->components[0].type_name), "trace");
  EXPECT_EQ(view(info->components[0].description),
            "records every lifecycle event to a text file (golden-sequence tests)");
  ASSERT_EQ(create({}).first, RH_ERROR_OK);
  EXPECT_EQ(vtable_->EventMask(instance_), RH_EVENT_MASK_ALL);
  EXPECT_EQ(vtable_->Priority(instance_), RH_PRIORITY_VERY_LOW);
  vtable_->Destroy(nullptr);  // accepted
}

const std::set<std::string> kAllKeys = {"hooks.0.path", "hooks.0.append", "hooks.0.flush_lines",
                                        "hooks.0.flush_seconds"};

TEST_F(TraceHookTest, WritesOneLinePerEventKeepingIterationLinesUntilTheNextOtherEvent) {
  ASSERT_EQ(create({}).first, RH_ERROR_OK);
  EXPECT_EQ(host_.lookups(), kAllKeys);
  EXPECT_EQ(send(RH_EVENT_BEFORE_RUN).first, RH_ERROR_OK);
  // Not a per-iteration event: written at once, readable while the hook is alive.
  EXPECT_EQ(read_text(dir_ / "trace.log"), "before_run mode=train epoch=0 iter=0 inner_iter=0\n");

  events_.state.epoch = 1;
  events_.state.iter = 12;
  events_.state.inner_iter = 2;
  EXPECT_EQ(send(RH_EVENT_BEFORE_TRAIN_ITER).first, RH_ERROR_OK);
  events_.metrics = {{RH_STR("loss"), 0.25}, {RH_STR("lr"), 3e-4}, {RH_STR("big"), 1234567.0}};
  EXPECT_EQ(send(RH_EVENT_AFTER_TRAIN_ITER).first, RH_ERROR_OK);
  events_.metrics.clear();
  // Per-iteration lines are kept (default flush_lines 100, flush_seconds 0.5).
  EXPECT_EQ(read_text(dir_ / "trace.log"), "before_run mode=train epoch=0 iter=0 inner_iter=0\n");
  events_.state.mode = RH_MODE_VAL;
  events_.state.inner_iter = 0;
  EXPECT_EQ(send(RH_EVENT_AFTER_VAL_EPOCH).first, RH_ERROR_OK);
  events_.state.mode = RH_MODE_TEST;
  EXPECT_EQ(send(RH_EVENT_AFTER_TEST).first, RH_ERROR_OK);
  EXPECT_EQ(send(static_cast<rh_HookEvent>(RH_EVENT_COUNT_V1)).first, RH_ERROR_OK);

  EXPECT_EQ(read_text(dir_ / "trace.log"),
            "before_run mode=train epoch=0 iter=0 inner_iter=0\n"
            "before_train_iter mode=train epoch=1 iter=12 inner_iter=2\n"
            "after_train_iter mode=train epoch=1 iter=12 inner_iter=2 loss=0.25 lr=0.0003 "
            "big=1.23457e+06\n"
            "after_val_epoch mode=val epoch=1 iter=12 inner_iter=0\n"
            "after_test mode=test epoch=1 iter=12 inner_iter=0\n"
            "event_23 mode=test epoch=1 iter=12 inner_iter=0\n");
}

// Per-iteration lines reach the file once flush_lines are kept, and with them
// the file only ever holds whole lines.
TEST_F(TraceHookTest, WritesKeptIterationLinesEveryFlushLines) {
  ASSERT_EQ(create({{"flush_lines", "3"}, {"flush_seconds", "3600"}}).first, RH_ERROR_OK);
  send(RH_EVENT_BEFORE_TRAIN_ITER);
  send(RH_EVENT_AFTER_TRAIN_ITER);
  EXPECT_TRUE(fs::exists(dir_ / "trace.log"));  // opened at the first event
  EXPECT_EQ(read_text(dir_ / "trace.log"), "");
  send(RH_EVENT_BEFORE_TRAIN_ITER);
  EXPECT_EQ(read_text(dir_ / "trace.log"),
            "before_train_iter mode=train epoch=0 iter=0 inner_iter=0\n"
            "after_train_iter mode=train epoch=0 iter=0 inner_iter=0\n"
            "before_train_iter mode=train epoch=0 iter=0 inner_iter=0\n");
  const std::string three_lines = read_text(dir_ / "trace.log");
  send(RH_EVENT_AFTER_TRAIN_ITER);
  send(RH_EVENT_BEFORE_VAL_ITER);
  EXPECT_EQ(read_text(dir_ / "trace.log"), three_lines);
}

TEST_F(TraceHookTest, FlushLinesOneOrFlushSecondsZeroWritesEveryLine) {
  ASSERT_EQ(create({{"flush_lines", "1"}}).first, RH_ERROR_OK);
  send(RH_EVENT_AFTER_TRAIN_ITER);
  EXPECT_EQ(read_text(dir_ / "trace.log"),
            "after_train_iter mode=train epoch=0 iter=0 inner_iter=0\n");
  vtable_->Destroy(instance_);
  instance_ = nullptr;

  ASSERT_EQ(create({{"flush_seconds", "0"}, {"path", "b.log"}}).first, RH_ERROR_OK);
  send(RH_EVENT_AFTER_VAL_ITER);
  EXPECT_EQ(read_text(dir_ / "b.log"), "after_val_iter mode=train epoch=0 iter=0 inner_iter=0\n");
}

// The host destroys its hooks when a run fails, with no event after the last
// iteration: Destroy writes what is kept.
TEST_F(TraceHookTest, DestroyWritesTheKeptLines) {
  ASSERT_EQ(create({{"flush_lines", "1000"}, {"flush_seconds", "3600"}}).first, RH_ERROR_OK);
  for (int64_t i = 0; i < 300; ++i) {
    events_.state.iter = i;
    send(RH_EVENT_BEFORE_TRAIN_ITER);
    send(RH_EVENT_AFTER_TRAIN_ITER);
  }
  EXPECT_EQ(read_text(dir_ / "trace.log"), "");
  vtable_->Destroy(instance_);
  instance_ = nullptr;
  std::istringstream lines(read_text(dir_ / "trace.log"));
  std::vector<std::string> read;
  for (std::string line; std::getline(lines, line);) read.push_back(line);
  ASSERT_EQ(read.size(), 600u);
  EXPECT_EQ(read.front(), "before_train_iter mode=train epoch=0 iter=0 inner_iter=0");
  EXPECT_EQ(read.back(), "after_train_iter mode=train epoch=0 iter=299 inner_iter=0");
  EXPECT_TRUE(host_.context()->logs.empty());
}

// A last write that fails in Destroy cannot be returned: it is logged.
TEST_F(TraceHookTest, AFailedLastWriteIsLogged) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  ASSERT_EQ(create({{"path", "/dev/full"}, {"append", "true"}}).first, RH_ERROR_OK);
  EXPECT_EQ(send(RH_EVENT_AFTER_TRAIN_ITER).first, RH_ERROR_OK);  // kept, not written
  vtable_->Destroy(instance_);
  instance_ = nullptr;
  ASSERT_EQ(host_.context()->logs.size(), 1u);
  EXPECT_EQ(host_.context()->logs[0].first, RH_LOG_ERROR);
  EXPECT_NE(host_.context()->logs[0].second.find("cannot write trace file '/dev/full'"),
            std::string::npos)
      << host_.context()->logs[0].second;
}

TEST_F(TraceHookTest, AFailedWriteIsAnIoError) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  ASSERT_EQ(create({{"path", "/dev/full"}, {"append", "true"}}).first, RH_ERROR_OK);
  auto [code, message] = send(RH_EVENT_BEFORE_RUN);
  EXPECT_EQ(code, RH_ERROR_IO);
  EXPECT_NE(message.find("cannot write trace file '/dev/full': No space left on device"),
            std::string::npos)
      << message;
  vtable_->Destroy(instance_);  // the lines were dropped with the error: nothing logged twice
  instance_ = nullptr;
  EXPECT_TRUE(host_.context()->logs.empty());
}

TEST_F(TraceHookTest, EveryEventHasItsName) {
  ASSERT_EQ(create({}).first, RH_ERROR_OK);
  for (int e = 0; e < RH_EVENT_COUNT_V1; ++e) {
    ASSERT_EQ(send(static_cast<rh_HookEvent>(e)).first, RH_ERROR_OK);
  }
  std::istringstream lines(read_text(dir_ / "trace.log"));
  std::string line;
  std::vector<std::string> names;
  while (std::getline(lines, line)) names.push_back(line.substr(0, line.find(' ')));
  EXPECT_EQ(names, (std::vector<std::string>{"before_run",
                                             "after_run",
                                             "before_train",
                                             "after_train",
                                             "before_train_epoch",
                                             "after_train_epoch",
                                             "before_train_iter",
                                             "after_train_iter",
                                             "before_val",
                                             "after_val",
                                             "before_val_epoch",
                                             "after_val_epoch",
                                             "before_val_iter",
                                             "after_val_iter",
                                             "before_test",
                                             "after_test",
                                             "before_test_epoch",
                                             "after_test_epoch",
                                             "before_test_iter",
                                             "after_test_iter",
                                             "before_save_checkpoint",
                                             "after_save_checkpoint",
                                             "after_load_checkpoint"}));
}

TEST_F(TraceHookTest, SavesAndRestoresItsEventCount) {
  rh_StateDict checkpoint;
  ASSERT_EQ(create({{"path", "a.log"}}).first, RH_ERROR_OK);
  send(RH_EVENT_BEFORE_RUN);
  send(RH_EVENT_BEFORE_TRAIN);
  events_.checkpoint = &checkpoint;
  events_.dir = "/ckpt/iter_2";
  EXPECT_EQ(send(RH_EVENT_BEFORE_SAVE_CHECKPOINT).first, RH_ERROR_OK);
  events_.checkpoint = nullptr;
  EXPECT_EQ(send(RH_EVENT_AFTER_SAVE_CHECKPOINT).first, RH_ERROR_OK);
  EXPECT_EQ(checkpoint.bytes, (std::map<std::string, std::string>{{"events_seen", "3"}}));
  vtable_->Destroy(instance_);
  instance_ = nullptr;

  // A resumed run: the load is its first event and continues the count.
  ASSERT_EQ(create({{"path", "b.log"}}).first, RH_ERROR_OK);
  events_.checkpoint = &checkpoint;
  EXPECT_EQ(send(RH_EVENT_AFTER_LOAD_CHECKPOINT).first, RH_ERROR_OK);
  events_.checkpoint = nullptr;
  events_.dir.clear();
  EXPECT_EQ(send(RH_EVENT_BEFORE_RUN).first, RH_ERROR_OK);
  events_.checkpoint = &checkpoint;
  EXPECT_EQ(send(RH_EVENT_BEFORE_SAVE_CHECKPOINT).first, RH_ERROR_OK);
  EXPECT_EQ(checkpoint.bytes.at("events_seen"), "6");

  EXPECT_EQ(read_text(dir_ / "a.log"),
            "before_run mode=train epoch=0 iter=0 inner_iter=0\n"
            "before_train mode=train epoch=0 iter=0 inner_iter=0\n"
            "before_save_checkpoint mode=train epoch=0 iter=0 inner_iter=0 dir=/ckpt/iter_2 "
            "events_seen=3\n"
            "after_save_checkpoint mode=train epoch=0 iter=0 inner_iter=0 dir=/ckpt/iter_2\n");
  EXPECT_EQ(read_text(dir_ / "b.log"),
            "after_load_checkpoint mode=train epoch=0 iter=0 inner_iter=0 dir=/ckpt/iter_2 "
            "events_seen=4\n"
            "before_run mode=train epoch=0 iter=0 inner_iter=0\n"
            "before_save_checkpoint mode=train epoch=0 iter=0 inner_iter=0 events_seen=6\n");
}

TEST_F(TraceHookTest, LoadWithoutItsStateKeepsCounting) {
  rh_StateDict checkpoint;
  ASSERT_EQ(create({}).first, RH_ERROR_OK);
  send(RH_EVENT_BEFORE_RUN);
  events_.checkpoint = &checkpoint;
  EXPECT_EQ(send(RH_EVENT_AFTER_LOAD_CHECKPOINT).first, RH_ERROR_OK);
  EXPECT_NE(read_text(dir_ / "trace.log")
                .find("after_load_checkpoint mode=train epoch=0 iter=0 "
                      "inner_iter=0 events_seen=2\n"),
            std::string::npos);

  checkpoint.bytes["events_seen"] = "12x";
  auto [code, message] = send(RH_EVENT_AFTER_LOAD_CHECKPOINT);
  EXPECT_EQ(code, RH_ERROR_DATA_LOSS);
  EXPECT_NE(message.find("events_seen"), std::string::npos) << message;
}

TEST_F(TraceHookTest, TruncatesOrAppends) {
  std::ofstream(dir_ / "trace.log") << "old line\n";
  ASSERT_EQ(create({}).first, RH_ERROR_OK);
  send(RH_EVENT_BEFORE_RUN);
  vtable_->Destroy(instance_);
  instance_ = nullptr;
  EXPECT_EQ(read_text(dir_ / "trace.log"), "before_run mode=train epoch=0 iter=0 inner_iter=0\n");

  ASSERT_EQ(create({{"append", "true"}}).first, RH_ERROR_OK);
  send(RH_EVENT_AFTER_RUN);
  EXPECT_EQ(read_text(dir_ / "trace.log"),
            "before_run mode=train epoch=0 iter=0 inner_iter=0\n"
            "after_run mode=train epoch=0 iter=0 inner_iter=0\n");
}

TEST_F(TraceHookTest, AbsolutePathIgnoresWorkDir) {
  fs::path absolute = dir_ / "sub" / "abs.log";
  fs::create_directories(absolute.parent_path());
  ASSERT_EQ(create({{"path", absolute.string()}}).first, RH_ERROR_OK);
  send(RH_EVENT_BEFORE_RUN);
  EXPECT_TRUE(fs::exists(absolute));
  EXPECT_FALSE(fs::exists(dir_ / "trace.log"));
}

TEST_F(TraceHookTest, NullValuesMeanDefaults) {
  ASSERT_EQ(create({{"path", "~"}, {"append", "~"}}).first, RH_ERROR_OK);
  send(RH_EVENT_BEFORE_RUN);
  EXPECT_TRUE(fs::exists(dir_ / "trace.log"));
}

TEST_F(TraceHookTest, CreateWritesNothingSoADryRunLeavesNoFile) {
  ASSERT_EQ(create({}).first, RH_ERROR_OK);
  EXPECT_FALSE(fs::exists(dir_ / "trace.log"));
  ASSERT_EQ(send(RH_EVENT_BEFORE_RUN).first, RH_ERROR_OK);
  EXPECT_TRUE(fs::exists(dir_ / "trace.log"));
}

TEST_F(TraceHookTest, UnopenableFileIsAnIoErrorNamingThePath) {
  ASSERT_EQ(create({{"path", "missing/dir/trace.log"}}).first, RH_ERROR_OK);
  auto [code, message] = send(RH_EVENT_BEFORE_RUN);
  EXPECT_EQ(code, RH_ERROR_IO);
  EXPECT_NE(
      message.find("cannot open trace file '" + (dir_ / "missing/dir/trace.log").string() + "'"),
      std::string::npos)
      << message;
  EXPECT_NE(message.find("No such file or directory"), std::string::npos) << message;
}

TEST_F(TraceHookTest, BadTypesAreConfigErrors) {
  auto [code, message] = create({{"append", "sometimes"}});
  EXPECT_EQ(code, RH_ERROR_INVALID_CONFIG);
  EXPECT_EQ(message, "job.yaml:7:3: hooks.0.append: expected a bool, got 'sometimes'");
  // Every key was looked up although the second was wrong.
  EXPECT_EQ(host_.lookups(), kAllKeys);

  auto [empty_code, empty_message] = create({{"path", ""}});
  EXPECT_EQ(empty_code, RH_ERROR_INVALID_CONFIG);
  EXPECT_EQ(empty_message, "job.yaml:7:3: hooks.0.path: must not be empty");
  EXPECT_EQ(instance_, nullptr);

  auto [lines_code, lines_message] = create({{"flush_lines", "0"}});
  EXPECT_EQ(lines_code, RH_ERROR_INVALID_CONFIG);
  EXPECT_EQ(lines_message, "job.yaml:7:3: hooks.0.flush_lines: must be >= 1, got 0");
  auto [seconds_code, seconds_message] = create({{"flush_seconds", "-1"}});
  EXPECT_EQ(seconds_code, RH_ERROR_INVALID_CONFIG);
  EXPECT_EQ(seconds_message,
            "job.yaml:7:3: hooks.0.flush_seconds: must be between 0 and 3600, got -1");
  auto [type_code, type_message] = create({{"flush_lines", "many"}});
  EXPECT_EQ(type_code, RH_ERROR_INVALID_CONFIG);
  EXPECT_NE(type_message.find("hooks.0.flush_lines"), std::string::npos) << type_message;
  EXPECT_EQ(instance_, nullptr);
}

}  // namespace
}  // namespace rh::test
