// The shipped `trace` hook (plugins/hooks/trace) created from a job file by
// the real factory and driven through the real host table: one line per
// event, metrics, and its own state in checkpoints (TraceHookTest.cpp beside
// it says why two files).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "abi/ComponentFactory.hpp"
#include "abi/HostApi.hpp"
#include "abi/StateDict.hpp"
#include "common/TestUtil.hpp"
#include "config/JobLoader.hpp"

namespace rh::test {
namespace {

namespace fs = std::filesystem;
using namespace rh::host;
using ::testing::HasSubstr;

class TraceHookThroughHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry.scan({{fs::path(RH_PLUGIN_OUTPUT_DIR), "install"}});
    fs::path job =
        dir.write("job.yaml", "model: {type: mlp}\nhooks:\n  - {type: trace, path: events.log}\n");
    job_ = rh::config::load_job(job.string(), {});
    ComponentFactory factory(registry, services, dir.path(), dir.path().string());
    hook = factory.create_hook(*job_.root->find("hooks")->seq_items().at(0));
  }
  void fire(rh_HookEvent event, const rh_Metric* metrics = nullptr, size_t n = 0,
            rh_StateDict* ckpt = nullptr, const std::string& ckpt_dir = "") {
    rh_RunState s = services.run_state();
    rh_HookEventArgs ev{RH_HOOK_EVENT_ARGS_STRUCT_SIZE,    event, &s, metrics, n, ckpt,
                        {ckpt_dir.data(), ckpt_dir.size()}};
    hook->on_event(ev);
  }

  rh::test::TempDir dir;
  HostServices services;
  PluginRegistry registry{NativeTag{}, services};
  rh::config::Job job_;
  std::unique_ptr<HookInstance> hook;
};

TEST_F(TraceHookThroughHostTest, WritesOneLinePerEventWithCountersAndMetrics) {
  rh_RunState s = services.run_state();
  s.epoch = 1;
  s.iter = 12;
  s.inner_iter = 2;
  services.set_run_state(s);
  fire(RH_EVENT_BEFORE_TRAIN_ITER);
  rh_Metric m[2] = {{{"loss", 4}, 0.5}, {{"lr", 2}, 0.001}};
  fire(RH_EVENT_AFTER_TRAIN_ITER, m, 2);
  hook.reset();  // per-iteration lines are kept until a later event or Destroy
  EXPECT_EQ(rh::test::read_file(dir / "events.log"),
            "before_train_iter mode=train epoch=1 iter=12 inner_iter=2\n"
            "after_train_iter mode=train epoch=1 iter=12 inner_iter=2 loss=0.5 lr=0.001\n");
}

TEST_F(TraceHookThroughHostTest, KeepsItsEventCountInCheckpoints) {
  fire(RH_EVENT_BEFORE_RUN);
  fire(RH_EVENT_BEFORE_TRAIN);
  rh_StateDict saved;
  fire(RH_EVENT_BEFORE_SAVE_CHECKPOINT, nullptr, 0, &saved, "/ckpt/iter_2");
  rh_StringView blob{};
  ASSERT_EQ(services.api()->StateDict_GetBytes(&saved, "events_seen", 11, &blob), nullptr);
  EXPECT_EQ(std::string(blob.data, blob.size), "3");
  rh_StateDict loaded;
  loaded.entries["events_seen"] = saved.entries["events_seen"];
  fire(RH_EVENT_AFTER_LOAD_CHECKPOINT, nullptr, 0, &loaded, "/ckpt/iter_2");
  std::string log = rh::test::read_file(dir / "events.log");
  EXPECT_THAT(
      log,
      HasSubstr("before_save_checkpoint mode=train epoch=0 iter=0 inner_iter=0 dir=/ckpt/iter_2"));
  EXPECT_THAT(log, HasSubstr("events_seen=3"));
  EXPECT_TRUE(hook->wants(RH_EVENT_AFTER_VAL_ITER));
  EXPECT_EQ(hook->priority(), RH_PRIORITY_VERY_LOW);
}

}  // namespace
}  // namespace rh::test
