// Replays every fuzz input kept in the tree through the entry function its
// libFuzzer target uses: tests/fuzz/regressions/<target>/ (inputs that once
// crashed, each kept when its bug was fixed) and the seed corpora
// tests/fuzz/corpus/<target>/. Built with the ordinary compiler, no clang:
// an entry that throws an unexpected exception fails the test, one that
// aborts (a broken invariant) fails the test binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "FuzzEntries.hpp"
#include "abi/HostError.hpp"
#include "abi/PluginRegistry.hpp"

namespace rh::fuzz {
namespace {

namespace fs = std::filesystem;

struct Target {
  const char* name;
  void (*entry)(const uint8_t*, size_t);
};

std::vector<fs::path> inputs_of(const std::string& target, const char* kind) {
  std::vector<fs::path> files;
  const fs::path dir = fs::path(RH_FUZZ_DIR) / kind / target;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

class FuzzRegressionTest : public ::testing::TestWithParam<Target> {};

TEST_P(FuzzRegressionTest, EveryKeptInputIsAcceptedOrRejectedCleanly) {
  const Target& target = GetParam();
  const std::vector<fs::path> seeds = inputs_of(target.name, "corpus");
  EXPECT_FALSE(seeds.empty()) << "no seed corpus in tests/fuzz/corpus/" << target.name;
  std::vector<fs::path> all = seeds;
  for (const fs::path& p : inputs_of(target.name, "regressions")) all.push_back(p);
  for (const fs::path& file : all) {
    SCOPED_TRACE(file.string());
    std::ifstream in(file, std::ios::binary);
    ASSERT_TRUE(in) << "cannot read " << file;
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NO_THROW(target.entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzRegressionTest,
                         ::testing::Values(Target{"job_config", &job_config},
                                           Target{"safetensors_header", &safetensors_header},
                                           Target{"checkpoint_meta", &checkpoint_meta},
                                           Target{"plugin_info", &plugin_info},
                                           Target{"csv_dataset", &csv_dataset},
                                           Target{"mnist_dataset", &mnist_dataset},
                                           Target{"cifar10_dataset", &cifar10_dataset}),
                         [](const ::testing::TestParamInfo<Target>& info) {
                           return std::string(info.param.name);
                         });

// regressions/plugin_info/component_kind_out_of_enum_range.bin: a component
// whose kind is 1792 was loaded as the enum before it was checked (undefined
// behaviour, reported by UBSan in fuzz_plugin_info); it is refused by value.
TEST(PluginInfoHandshakeTest, RefusesAComponentKindOutsideTheEnum) {
  void (*fn)() = [] {};
  size_t vtable[8] = {sizeof vtable};
  for (size_t i = 1; i < 8; ++i) std::memcpy(&vtable[i], &fn, sizeof fn);
  rh_Component component{RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_HOOK, RH_STR("trace"), RH_STR(""),
                         vtable};
  const uint32_t kind = 1792;
  std::memcpy(&component.kind, &kind, sizeof kind);
  const rh_PluginInfo info = {RH_PLUGIN_INFO_STRUCT_SIZE,
                              RH_ABI_VERSION_MAJOR,
                              RH_ABI_VERSION_MINOR,
                              RH_STR("p"),
                              RH_STR("1"),
                              RH_NATIVE_TAG_NONE,
                              &component,
                              1,
                              nullptr,
                              nullptr};
  try {
    (void)host::read_plugin_info(&info, host::NativeTag{"1.13.0", "cpu", 1});
    FAIL() << "accepted a component of kind 1792";
  } catch (const host::HostError& e) {
    EXPECT_STREQ(e.what(), "component 'trace' has unknown kind 1792");
  }
}

}  // namespace

// Found by the plugin_info fuzzer under ASan: the ABI version was read before
// struct_size said the plugin had filled it.
TEST(PluginInfoHandshakeTest, RefusesAnInfoTooSmallToHoldTheAbiVersion) {
  rh_PluginInfo info{};
  info.struct_size = sizeof(size_t);
  info.abi_major = RH_ABI_VERSION_MAJOR;
  try {
    (void)host::read_plugin_info(&info, host::NativeTag{"1.13.0", "cpu", 1});
    FAIL() << "accepted an 8-byte rh_PluginInfo";
  } catch (const host::HostError& e) {
    EXPECT_NE(std::string(e.what()).find("too small to hold the ABI version"), std::string::npos)
        << e.what();
  }
}

// Found by the plugin_info fuzzer under UBSan: a component stride that is no
// multiple of rh_Component's alignment walked misaligned elements.
TEST(PluginInfoHandshakeTest, RefusesAComponentStrideThatIsNoMultipleOfItsAlignment) {
  alignas(rh_Component) unsigned char storage[2 * sizeof(rh_Component) + 8] = {};
  rh_Component first{RH_COMPONENT_STRUCT_SIZE + 4, RH_COMPONENT_HOOK, RH_STR("trace"), RH_STR(""),
                     nullptr};
  std::memcpy(storage, &first, sizeof first);
  const rh_PluginInfo info = {RH_PLUGIN_INFO_STRUCT_SIZE,
                              RH_ABI_VERSION_MAJOR,
                              RH_ABI_VERSION_MINOR,
                              RH_STR("p"),
                              RH_STR("1"),
                              RH_NATIVE_TAG_NONE,
                              reinterpret_cast<const rh_Component*>(storage),
                              2,
                              nullptr,
                              nullptr};
  try {
    (void)host::read_plugin_info(&info, host::NativeTag{"1.13.0", "cpu", 1});
    FAIL() << "accepted a misaligned component stride";
  } catch (const host::HostError& e) {
    EXPECT_NE(std::string(e.what()).find("is not a multiple of"), std::string::npos) << e.what();
  }
}

}  // namespace rh::fuzz
