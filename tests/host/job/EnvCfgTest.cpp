// env_cfg (MMEngine's environment settings) in the job schema: runner-host
// takes blas_coretype (auto or an OpenBLAS core name, checked by probing
// before LibTorch loads: tests/host/cli/BlasCoretypeTest.cpp) and refuses
// MMEngine's other env_cfg keys as unknown, with their location.
#include <gtest/gtest.h>

#include "config/YamlReader.hpp"
#include "host/config/ConfigTestUtil.hpp"
#include "job/JobSchema.hpp"

namespace rh::config {
namespace {

using test::messages;
using Messages = std::vector<std::string>;

const std::string kModel = "model: {type: mlp, in_features: 4, num_classes: 2}\n";

Messages check(const std::string& text) {
  return messages(validate_job(*parse_yaml(text, "job.yaml")));
}

TEST(EnvCfgTest, BlasCoretypeTakesAutoOrACoreName) {
  EXPECT_EQ(check(kModel + "env_cfg: {blas_coretype: auto}\n"), Messages{});
  EXPECT_EQ(check(kModel + "env_cfg: {blas_coretype: SkylakeX}\n"), Messages{});
  EXPECT_EQ(check(kModel + "env_cfg: {}\n"), Messages{});
  EXPECT_EQ(check(kModel + "env_cfg: {blas_coretype: [SkylakeX]}\n"),
            Messages{"job.yaml:2:26: env_cfg.blas_coretype: expected a string, got a list"});
}

TEST(EnvCfgTest, HeapTakesReleaseOrKeep) {
  EXPECT_EQ(check(kModel + "env_cfg: {heap: release}\n"), Messages{});
  EXPECT_EQ(check(kModel + "env_cfg: {heap: keep}\n"), Messages{});
  const Messages got = check(kModel + "env_cfg: {heap: hold}\n");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(got[0].find("job.yaml:2:17: env_cfg.heap:"), std::string::npos) << got[0];
  EXPECT_NE(got[0].find("release"), std::string::npos) << got[0];
}

TEST(EnvCfgTest, OtherEnvCfgKeysAreUnknownWithTheirLocation) {
  EXPECT_EQ(check(kModel + "env_cfg:\n  cudnn_benchmark: false\n  blas_coretyp: auto\n"),
            (Messages{"job.yaml:3:3: env_cfg.cudnn_benchmark: unknown key",
                      "job.yaml:4:3: env_cfg.blas_coretyp: unknown key (did you mean "
                      "'blas_coretype'?)"}));
}

}  // namespace
}  // namespace rh::config
