// Which OpenBLAS kernels a CPU can run, and how they rank. OpenBLAS built
// with DYNAMIC_ARCH (Debian's) picks its kernels ("core") from cpuid when it
// is loaded; a version older than the CPU does not know it and falls back to
// an old core: Debian 12's 0.3.21 runs Prescott (SSE3) on a Xeon of cpu
// family 6 model 207 with AVX-512, where a float32 matrix product takes 3.3x
// as long as with its SkylakeX kernels. What matters for a matrix product is
// the widest vector instructions a core's kernels use: the tiers below.
// No LibTorch here: the program (main.cpp) uses it before the runner library
// is loaded.
#pragma once

#include <string>
#include <vector>

namespace rh::host {

// Ordered: a higher tier's kernels are faster on a CPU that can run them.
enum class SimdTier { Unknown = 0, Sse = 1, Avx = 2, Avx2 = 3, Avx512 = 4 };

// What the CPU (and the kernel, which must save the wider registers) offers.
struct CpuFeatures {
  bool x86 = false;
  bool amd = false;
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
};

CpuFeatures detect_cpu_features();

// The widest tier whose OpenBLAS kernels the CPU runs: AVX-512 F+BW+DQ+VL
// (SkylakeX's kernels need all four), AVX2 with FMA (Haswell's), AVX
// (Sandybridge's), else SSE; Unknown off x86.
SimdTier cpu_tier(const CpuFeatures& cpu);

// The tier of an OpenBLAS core name (openblas_get_corename(), or a value of
// OPENBLAS_CORETYPE; either case): Unknown for a name that is not an x86 core.
SimdTier core_tier(const std::string& core);

// OpenBLAS's core for `tier` on this CPU: SkylakeX, Haswell (Zen on AMD),
// Sandybridge; "" for SSE and Unknown (nothing older is worth choosing).
std::string core_for_tier(SimdTier tier, const CpuFeatures& cpu);

// The cores to try in place of one of tier `loaded`, best first: one per
// tier above it, up to the CPU's. Empty when `loaded` is the CPU's tier or
// either tier is unknown.
std::vector<std::string> better_cores(SimdTier loaded, const CpuFeatures& cpu);

// OpenBLAS's x86 core names as it spells them, for "did you mean".
const std::vector<std::string>& known_cores();

// "AVX-512", "AVX2", "AVX", "SSE", "unknown".
const char* tier_name(SimdTier tier);

// The CPU as /proc/cpuinfo names it: "Intel(R) Xeon(R) Processor (family 6
// model 207)"; "" when it cannot be read.
std::string cpu_model_name();

}  // namespace rh::host
