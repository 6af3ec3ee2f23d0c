// rh/cpp/fault_injection.hpp: the one reader of RH_FAULT_INJECT, which the
// host (checkpoint store, shared-memory all-reduce, the AMP step) and the
// async checkpoint IO use; each fault's own effect is tested where it is
// read.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "rh/cpp/fault_injection.hpp"

namespace {

class FaultInjectionTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("RH_FAULT_INJECT"); }
  static void set(const char* value) { setenv("RH_FAULT_INJECT", value, 1); }
};

TEST_F(FaultInjectionTest, UnsetOrEmptyInjectsNothing) {
  unsetenv("RH_FAULT_INJECT");
  EXPECT_TRUE(rh::fault_entries().empty());
  EXPECT_FALSE(rh::fault_injected("shm_full"));
  set("");
  EXPECT_TRUE(rh::fault_entries().empty());
  EXPECT_TRUE(rh::fault_values("amp_inf_grad:0").empty());
}

// An entry matches whole: "ckpt_remove:slow" is not "ckpt_remove"; empty
// entries between commas are skipped.
TEST_F(FaultInjectionTest, EntriesMatchWhole) {
  set("shm_full,,ckpt_remove:slow");
  EXPECT_EQ(rh::fault_entries(), (std::vector<std::string>{"shm_full", "ckpt_remove:slow"}));
  EXPECT_TRUE(rh::fault_injected("shm_full"));
  EXPECT_TRUE(rh::fault_injected("ckpt_remove:slow"));
  EXPECT_FALSE(rh::fault_injected("ckpt_remove"));
  EXPECT_FALSE(rh::fault_injected("shm"));
}

// Values in order; a value keeps its own colons; a name that is only a
// prefix of another entry's name gives nothing.
TEST_F(FaultInjectionTest, ValuesOfANameInOrder) {
  set("amp_inf_grad:1:3,async_write_delay_ms:200,amp_inf_grad:1:7,amp_inf_grad:10:2");
  EXPECT_EQ(rh::fault_values("amp_inf_grad:1"), (std::vector<std::string>{"3", "7"}));
  EXPECT_EQ(rh::fault_values("amp_inf_grad"), (std::vector<std::string>{"1:3", "1:7", "10:2"}));
  EXPECT_EQ(rh::fault_values("async_write_delay_ms"), std::vector<std::string>{"200"});
  EXPECT_TRUE(rh::fault_values("async_write").empty());
}

}  // namespace
