// The `tensorboard` hook (plugins/hooks/tensorboard), loaded from the build
// tree and driven through its vtable: what it writes (read back with the C++
// protobuf parser), where, for which ranks, and when it flushes. The format
// against an independent reader is tensorboard.real_run (read_events.py).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <ctime>

#include "Crc32c.hpp"
#include "common/PluginTestHost.hpp"
#include "tensorboard/compat/proto/event.pb.h"

namespace rh::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

struct Scalar {
  std::string tag;
  int64_t step;
  float value;
  bool operator==(const Scalar& o) const {
    return tag == o.tag && step == o.step && value == o.value;
  }
};
std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  return os << s.tag << "@" << s.step << "=" << s.value;
}

uint32_t tensorboard_mask(const std::string& bytes) {
  return rh::tfrecord::mask_crc32c(rh::tfrecord::crc32c(bytes.data(), bytes.size()));
}

uint64_t le(const std::string& s, size_t pos, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[pos + i]);
  return v;
}

// Every record of an event file, CRCs checked (ADD_FAILURE on a bad one).
std::vector<tensorboard::Event> read_events(const fs::path& path) {
  const std::string data = read_file(path);
  std::vector<tensorboard::Event> events;
  size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < 16) {
      ADD_FAILURE() << path << ": truncated record at " << pos;
      break;
    }
    const uint64_t length = le(data, pos, 8);
    EXPECT_EQ(le(data, pos + 8, 4), tensorboard_mask(data.substr(pos, 8)))
        << "length CRC at " << pos;
    if (data.size() - pos - 16 < length) {
      ADD_FAILURE() << path << ": truncated data at " << pos;
      break;
    }
    const std::string body = data.substr(pos + 12, length);
    EXPECT_EQ(le(data, pos + 12 + length, 4), tensorboard_mask(body)) << "data CRC at " << pos;
    tensorboard::Event event;
    EXPECT_TRUE(event.ParseFromString(body)) << "record at " << pos;
    events.push_back(event);
    pos += 16 + length;
  }
  return events;
}

std::vector<Scalar> scalars_of(const std::vector<tensorboard::Event>& events) {
  std::vector<Scalar> out;
  for (const auto& e : events)
    for (const auto& v : e.summary().value()) out.push_back({v.tag(), e.step(), v.simple_value()});
  return out;
}

class TensorboardHookTest : public ::testing::Test {
 protected:
  void SetUp() override { host_.load("rh_hook_tensorboard"); }

  // The one event file under `dir`.
  fs::path event_file(const fs::path& dir) const {
    std::vector<fs::path> files;
    if (fs::exists(dir))
      for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_regular_file()) files.push_back(entry.path());
    EXPECT_EQ(files.size(), 1u) << dir;
    return files.empty() ? fs::path() : files.front();
  }
  fs::path log_dir() const { return host_.work_dir() / "tensorboard"; }

  void send(host::HookInstance& hook, rh_HookEvent event, int64_t epoch, int64_t iter,
            std::vector<std::pair<std::string, double>> metrics = {}) {
    event_.state.epoch = epoch;
    event_.state.iter = iter;
    event_.metrics = std::move(metrics);
    ASSERT_EQ(event_.send(hook, event), "");
  }

  PluginTestHost host_;
  Event event_;
};

TEST(Crc32cTest, MatchesTheCastagnoliCheckValueAndTfRecordsMask) {
  EXPECT_EQ(rh::tfrecord::crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(rh::tfrecord::crc32c("", 0), 0u);
  // 32 zero bytes: the iSCSI test vector (RFC 3720 B.4).
  const std::string zeros(32, '\0');
  EXPECT_EQ(rh::tfrecord::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(rh::tfrecord::mask_crc32c(0), 0xa282ead8u);
  EXPECT_EQ(rh::tfrecord::mask_crc32c(0xE3069283u),
            ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
}

TEST_F(TensorboardHookTest, DescribesItselfAndSubscribesToWhatItUses) {
  auto hook = host_.create_hook("{type: tensorboard}");
  EXPECT_EQ(host_.load("rh_hook_tensorboard").components.at(0).type_name, "tensorboard");
  EXPECT_EQ(hook->priority(), RH_PRIORITY_NORMAL);
  for (rh_HookEvent e : {RH_EVENT_BEFORE_RUN, RH_EVENT_AFTER_RUN, RH_EVENT_AFTER_TRAIN_ITER,
                         RH_EVENT_AFTER_TRAIN_EPOCH, RH_EVENT_AFTER_VAL_EPOCH,
                         RH_EVENT_AFTER_TEST_EPOCH, RH_EVENT_AFTER_SAVE_CHECKPOINT})
    EXPECT_TRUE(hook->wants(e)) << e;
  EXPECT_FALSE(hook->wants(RH_EVENT_AFTER_VAL_ITER));
  EXPECT_FALSE(hook->wants(RH_EVENT_BEFORE_TRAIN_ITER));
}

TEST_F(TensorboardHookTest, RejectsBadConfigNamingTheKey) {
  EXPECT_THAT(host_.create_hook_error("{type: tensorboard, flush_secs: -1}"),
              HasSubstr("flush_secs: must be >= 0 seconds"));
  EXPECT_THAT(host_.create_hook_error("{type: tensorboard, interval: 0}"),
              HasSubstr("interval: must be >= 1"));
  EXPECT_THAT(host_.create_hook_error("{type: tensorboard, log_dir: ''}"),
              HasSubstr("log_dir: must not be empty"));
  EXPECT_THAT(host_.create_hook_error("{type: tensorboard, flush_sec: 5}"),
              HasSubstr("did you mean 'flush_secs'"));
  EXPECT_THAT(host_.create_hook_error("{type: tensorboard, all_ranks: maybe}"),
              HasSubstr("all_ranks"));
}

TEST_F(TensorboardHookTest, ADryRunWritesNothing) {
  { auto hook = host_.create_hook("{type: tensorboard}"); }
  EXPECT_FALSE(fs::exists(host_.work_dir()));
}

TEST_F(TensorboardHookTest, WritesEveryScalarAtTheIterationsDone) {
  const std::time_t before = std::time(nullptr);
  {
    auto hook = host_.create_hook("{type: tensorboard}");
    send(*hook, RH_EVENT_BEFORE_RUN, 0, 0);
    send(*hook, RH_EVENT_AFTER_TRAIN_ITER, 0, 0,
         {{"loss", 2.5}, {"lr", 2e-4}, {"grad_norm", 1.25}, {"time", 0.0123}, {"memory", 512}});
    send(*hook, RH_EVENT_AFTER_TRAIN_ITER, 0, 1, {{"loss", 2.25}, {"lr", 4e-4}});
    send(*hook, RH_EVENT_AFTER_TRAIN_EPOCH, 0, 2);
    send(*hook, RH_EVENT_AFTER_VAL_EPOCH, 1, 2, {{"accuracy/top1", 91.25}, {"loss", 0.5}});
    send(*hook, RH_EVENT_AFTER_TEST_EPOCH, 1, 2, {{"accuracy/top1", 90.0}});
    send(*hook, RH_EVENT_AFTER_RUN, 1, 2);
  }
  const fs::path file = event_file(log_dir());
  EXPECT_THAT(file.filename().string(), MatchesRegex("events\\.out\\.tfevents\\.[0-9]{10}\\..+\\." +
                                                     std::to_string(::getpid())));
  const auto events = read_events(file);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_EQ(events[0].source_metadata().writer(), "runner-host");
  // Unix seconds of the event, give or take a minute (the wall clock may be
  // stepped while the test runs).
  const double after = static_cast<double>(std::time(nullptr));
  for (const auto& e : events) {
    EXPECT_GE(e.wall_time(), before - 60.0);
    EXPECT_LE(e.wall_time(), after + 60.0);
  }
  EXPECT_EQ(scalars_of(events), (std::vector<Scalar>{{"loss", 1, 2.5f},
                                                     {"lr", 1, 2e-4f},
                                                     {"grad_norm", 1, 1.25f},
                                                     {"time", 1, 0.0123f},
                                                     {"memory", 1, 512.0f},
                                                     {"loss", 2, 2.25f},
                                                     {"lr", 2, 4e-4f},
                                                     {"val/accuracy/top1", 2, 91.25f},
                                                     {"val/loss", 2, 0.5f},
                                                     {"test/accuracy/top1", 2, 90.0f}}));
}

TEST_F(TensorboardHookTest, TrainScalarsEveryIntervalIterations) {
  auto hook = host_.create_hook("{type: tensorboard, interval: 2, flush_secs: 0}");
  for (int64_t i = 0; i < 5; ++i) send(*hook, RH_EVENT_AFTER_TRAIN_ITER, 0, i, {{"loss", 1.0 + i}});
  EXPECT_EQ(scalars_of(read_events(event_file(log_dir()))),
            (std::vector<Scalar>{{"loss", 2, 2.0f}, {"loss", 4, 4.0f}}));
}

TEST_F(TensorboardHookTest, BuffersUntilFlushSecsOrAnEpochEndOrACheckpoint) {
  auto hook = host_.create_hook("{type: tensorboard}");  // flush_secs: 120
  send(*hook, RH_EVENT_BEFORE_RUN, 0, 0);
  const fs::path file = event_file(log_dir());
  EXPECT_EQ(read_events(file).size(), 1u);  // the file_version record, written at once
  send(*hook, RH_EVENT_AFTER_TRAIN_ITER, 0, 0, {{"loss", 1.0}});
  send(*hook, RH_EVENT_AFTER_TRAIN_ITER, 0, 1, {{"loss", 0.5}});
  EXPECT_EQ(read_events(file).size(), 1u);
  send(*hook, RH_EVENT_AFTER_TRAIN_EPOCH, 0, 2);
  EXPECT_EQ(read_events(file).size(), 3u);
  send(*hook, RH_EVENT_AFTER_TRAIN_ITER, 1, 2, {{"loss", 0.25}});
  EXPECT_EQ(read_events(file).size(), 3u);
  send(*hook, RH_EVENT_AFTER_SAVE_CHECKPOINT, 1, 3);
  EXPECT_EQ(read_events(file).size(), 4u);
  send(*hook, RH_EVENT_AFTER_TRAIN_ITER, 1, 3, {{"loss", 0.125}});
  EXPECT_EQ(read_events(file).size(), 4u);
  hook.reset();  // a failed run: no after_run, the hook is destroyed
  EXPECT_EQ(read_events(file).size(), 5u);
}

TEST_F(TensorboardHookTest, FlushSecsZeroWritesEveryEvent) {
  auto hook = host_.create_hook("{type: tensorboard, flush_secs: 0}");
  send(*hook, RH_EVENT_AFTER_TRAIN_ITER, 0, 0, {{"loss", 1.0}});
  EXPECT_EQ(read_events(event_file(log_dir())).size(), 2u);
}

TEST_F(TensorboardHookTest, OnlyRankZeroWritesUnlessAllRanks) {
  event_.state.world_size = 2;
  event_.state.rank = 1;
  {
    auto hook = host_.create_hook("{type: tensorboard, flush_secs: 0}");
    send(*hook, RH_EVENT_BEFORE_RUN, 0, 0);
    send(*hook, RH_EVENT_AFTER_TRAIN_ITER, 0, 0, {{"loss", 1.0}});
  }
  EXPECT_FALSE(fs::exists(host_.work_dir()));
  for (int32_t rank : {0, 1}) {
    event_.state.rank = rank;
    auto hook =
        host_.create_hook("{type: tensorboard, all_ranks: true, log_dir: tb, flush_secs: 0}");
    send(*hook, RH_EVENT_AFTER_TRAIN_ITER, 0, 0, {{"loss", 1.0 + rank}});
  }
  for (int32_t rank : {0, 1})
    EXPECT_EQ(scalars_of(read_events(
                  event_file(host_.work_dir() / "tb" / ("rank" + std::to_string(rank))))),
              (std::vector<Scalar>{{"loss", 1, 1.0f + rank}}));
}

TEST_F(TensorboardHookTest, TwoWritersInOneSecondGetTwoFiles) {
  auto first = host_.create_hook("{type: tensorboard, flush_secs: 0}");
  auto second = host_.create_hook("{type: tensorboard, flush_secs: 0}");
  send(*first, RH_EVENT_AFTER_TRAIN_ITER, 0, 0, {{"loss", 1.0}});
  send(*second, RH_EVENT_AFTER_TRAIN_ITER, 0, 0, {{"loss", 2.0}});
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(log_dir())) {
    EXPECT_EQ(read_events(entry.path()).size(), 2u) << entry.path();
    ++files;
  }
  EXPECT_EQ(files, 2u);
}

TEST_F(TensorboardHookTest, AnUnwritableLogDirIsAnIoErrorNamingIt) {
  fs::create_directories(host_.work_dir());
  host_.dir.write("work/blocker", "a file where the directory should be");
  auto hook = host_.create_hook("{type: tensorboard, log_dir: blocker/tb}");
  event_.metrics = {{"loss", 1.0}};
  EXPECT_THAT(event_.send(*hook, RH_EVENT_AFTER_TRAIN_ITER),
              HasSubstr((host_.work_dir() / "blocker/tb").string()));
}

}  // namespace
}  // namespace rh::test
