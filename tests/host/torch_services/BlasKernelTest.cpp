// The tiers of OpenBLAS's kernels and of CPUs (host/torch_services/BlasKernel.hpp).
#include <gtest/gtest.h>

#include "torch_services/BlasKernel.hpp"

namespace rh::host {
namespace {

CpuFeatures x86(std::initializer_list<const char*> flags) {
  CpuFeatures cpu;
  cpu.x86 = true;
  for (const std::string flag : flags) {
    if (flag == "amd") cpu.amd = true;
    if (flag == "avx") cpu.avx = true;
    if (flag == "avx2") cpu.avx2 = true;
    if (flag == "fma") cpu.fma = true;
    if (flag == "avx512f") cpu.avx512f = true;
    if (flag == "avx512bw") cpu.avx512bw = true;
    if (flag == "avx512dq") cpu.avx512dq = true;
    if (flag == "avx512vl") cpu.avx512vl = true;
  }
  return cpu;
}

const std::initializer_list<const char*> kSkylakeX = {"avx",      "avx2",     "fma",     "avx512f",
                                                      "avx512bw", "avx512dq", "avx512vl"};

TEST(BlasKernelTest, CpuTierIsTheWidestVectorUnitOpenBlasKernelsUse) {
  struct Case {
    const char* what;
    CpuFeatures cpu;
    SimdTier tier;
  };
  const Case cases[] = {
      {"not x86", CpuFeatures{}, SimdTier::Unknown},
      {"SSE only (Nehalem)", x86({}), SimdTier::Sse},
      {"AVX (Sandy Bridge)", x86({"avx"}), SimdTier::Avx},
      {"AVX2 without FMA", x86({"avx", "avx2"}), SimdTier::Avx},
      {"AVX2 + FMA (Haswell)", x86({"avx", "avx2", "fma"}), SimdTier::Avx2},
      {"AVX2 + FMA on AMD (Zen)", x86({"amd", "avx", "avx2", "fma"}), SimdTier::Avx2},
      {"AVX-512 F+BW+DQ+VL (Skylake-X, this Xeon)", x86(kSkylakeX), SimdTier::Avx512},
      {"AVX-512 F only (Knights Landing)", x86({"avx", "avx2", "fma", "avx512f"}), SimdTier::Avx2},
      {"AVX-512 without VL", x86({"avx", "avx2", "fma", "avx512f", "avx512bw", "avx512dq"}),
       SimdTier::Avx2},
  };
  for (const Case& c : cases) EXPECT_EQ(cpu_tier(c.cpu), c.tier) << c.what;
}

TEST(BlasKernelTest, CoreTierRanksOpenBlasCoresInEitherCase) {
  const std::pair<const char*, SimdTier> cases[] = {
      {"Prescott", SimdTier::Sse},
      {"Core2", SimdTier::Sse},
      {"Nehalem", SimdTier::Sse},
      {"Barcelona", SimdTier::Sse},
      {"Sandybridge", SimdTier::Avx},
      {"Bulldozer", SimdTier::Avx},
      {"Haswell", SimdTier::Avx2},
      {"Zen", SimdTier::Avx2},
      {"SkylakeX", SimdTier::Avx512},
      {"Cooperlake", SimdTier::Avx512},
      {"SapphireRapids", SimdTier::Avx512},
      // a build without DYNAMIC_ARCH names its core in capitals;
      // OPENBLAS_CORETYPE is read in either case
      {"HASWELL", SimdTier::Avx2},
      {"skylakex", SimdTier::Avx512},
      // not x86, or not a core
      {"NEOVERSEN1", SimdTier::Unknown},
      {"POWER9", SimdTier::Unknown},
      {"", SimdTier::Unknown},
      {"Skylakx", SimdTier::Unknown},
  };
  for (const auto& [core, tier] : cases) EXPECT_EQ(core_tier(core), tier) << core;
}

TEST(BlasKernelTest, BetterCoresAreOnePerTierAboveTheLoadedOneBestFirst) {
  using Cores = std::vector<std::string>;
  // Debian 12's OpenBLAS 0.3.21 on this Xeon: Prescott, on a CPU of AVX-512.
  EXPECT_EQ(better_cores(SimdTier::Sse, x86(kSkylakeX)),
            (Cores{"SkylakeX", "Haswell", "Sandybridge"}));
  EXPECT_EQ(better_cores(SimdTier::Avx2, x86(kSkylakeX)), Cores{"SkylakeX"});
  EXPECT_EQ(better_cores(SimdTier::Sse, x86({"amd", "avx", "avx2", "fma"})),
            (Cores{"Zen", "Sandybridge"}));
  // Already the CPU's tier (Debian 13's 0.3.29 picks Cooperlake here), or above it.
  EXPECT_EQ(better_cores(SimdTier::Avx512, x86(kSkylakeX)), Cores{});
  EXPECT_EQ(better_cores(SimdTier::Avx512, x86({"avx"})), Cores{});
  // Nothing to rank: an unknown core, or a CPU that is not x86.
  EXPECT_EQ(better_cores(SimdTier::Unknown, x86(kSkylakeX)), Cores{});
  EXPECT_EQ(better_cores(SimdTier::Sse, CpuFeatures{}), Cores{});
  EXPECT_EQ(core_for_tier(SimdTier::Sse, x86({})), "");
}

TEST(BlasKernelTest, ThisMachineIsDescribed) {
  // What the checks key their cache on and rank against: never empty on
  // x86 Linux; the tier is what the CPU's flags say.
  const CpuFeatures cpu = detect_cpu_features();
#if defined(__x86_64__)
  EXPECT_TRUE(cpu.x86);
  EXPECT_NE(cpu_tier(cpu), SimdTier::Unknown);
  EXPECT_FALSE(cpu_model_name().empty());
#endif
  EXPECT_EQ(known_cores().size(), 26u);
}

}  // namespace
}  // namespace rh::host
