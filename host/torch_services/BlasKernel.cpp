#include "torch_services/BlasKernel.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <utility>

namespace rh::host {

CpuFeatures detect_cpu_features() {
  CpuFeatures cpu;
#if defined(__x86_64__) || defined(__i386__)
  // __builtin_cpu_supports also checks that the kernel saves the registers
  // (XGETBV): a CPU with AVX-512 under a kernel that disabled it reports none.
  __builtin_cpu_init();
  cpu.x86 = true;
  cpu.amd = __builtin_cpu_is("amd");
  cpu.avx = __builtin_cpu_supports("avx");
  cpu.avx2 = __builtin_cpu_supports("avx2");
  cpu.fma = __builtin_cpu_supports("fma");
  cpu.avx512f = __builtin_cpu_supports("avx512f");
  cpu.avx512bw = __builtin_cpu_supports("avx512bw");
  cpu.avx512dq = __builtin_cpu_supports("avx512dq");
  cpu.avx512vl = __builtin_cpu_supports("avx512vl");
#endif
  return cpu;
}

SimdTier cpu_tier(const CpuFeatures& cpu) {
  if (!cpu.x86) return SimdTier::Unknown;
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl) return SimdTier::Avx512;
  if (cpu.avx2 && cpu.fma) return SimdTier::Avx2;
  if (cpu.avx) return SimdTier::Avx;
  return SimdTier::Sse;
}

namespace {

// OpenBLAS's x86 cores (driver/others/dynamic.c's corename table), by the
// widest vector instructions their float32 kernels use.
const std::vector<std::pair<std::string, SimdTier>>& core_table() {
  static const std::vector<std::pair<std::string, SimdTier>> kCores = {
      {"Katmai", SimdTier::Sse},        {"Coppermine", SimdTier::Sse},
      {"Northwood", SimdTier::Sse},     {"Prescott", SimdTier::Sse},
      {"Banias", SimdTier::Sse},        {"Atom", SimdTier::Sse},
      {"Core2", SimdTier::Sse},         {"Penryn", SimdTier::Sse},
      {"Dunnington", SimdTier::Sse},    {"Nehalem", SimdTier::Sse},
      {"Athlon", SimdTier::Sse},        {"Opteron", SimdTier::Sse},
      {"Opteron_SSE3", SimdTier::Sse},  {"Barcelona", SimdTier::Sse},
      {"Nano", SimdTier::Sse},          {"Bobcat", SimdTier::Sse},
      {"Sandybridge", SimdTier::Avx},   {"Bulldozer", SimdTier::Avx},
      {"Piledriver", SimdTier::Avx},    {"Steamroller", SimdTier::Avx},
      {"Haswell", SimdTier::Avx2},      {"Zen", SimdTier::Avx2},
      {"Excavator", SimdTier::Avx2},    {"SkylakeX", SimdTier::Avx512},
      {"Cooperlake", SimdTier::Avx512}, {"SapphireRapids", SimdTier::Avx512},
  };
  return kCores;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

}  // namespace

SimdTier core_tier(const std::string& core) {
  // Either case: OPENBLAS_CORETYPE is read so, and a build without
  // DYNAMIC_ARCH names its one core in capitals.
  const std::string key = lower(core);
  for (const auto& [name, tier] : core_table())
    if (lower(name) == key) return tier;
  return SimdTier::Unknown;
}

const std::vector<std::string>& known_cores() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const auto& entry : core_table()) names.push_back(entry.first);
    return names;
  }();
  return kNames;
}

std::string core_for_tier(SimdTier tier, const CpuFeatures& cpu) {
  switch (tier) {
    // SkylakeX rather than Cooperlake or SapphireRapids: their float32
    // kernels are SkylakeX's, and OpenBLAS has known SkylakeX longest (0.3.0).
    case SimdTier::Avx512:
      return "SkylakeX";
    case SimdTier::Avx2:
      return cpu.amd ? "Zen" : "Haswell";
    case SimdTier::Avx:
      return "Sandybridge";
    case SimdTier::Sse:
    case SimdTier::Unknown:
      break;
  }
  return "";
}

std::vector<std::string> better_cores(SimdTier loaded, const CpuFeatures& cpu) {
  std::vector<std::string> cores;
  const SimdTier top = cpu_tier(cpu);
  if (loaded == SimdTier::Unknown || top == SimdTier::Unknown) return cores;
  for (int t = static_cast<int>(top); t > static_cast<int>(loaded); --t) {
    std::string core = core_for_tier(static_cast<SimdTier>(t), cpu);
    if (!core.empty()) cores.push_back(std::move(core));
  }
  return cores;
}

const char* tier_name(SimdTier tier) {
  switch (tier) {
    case SimdTier::Avx512:
      return "AVX-512";
    case SimdTier::Avx2:
      return "AVX2";
    case SimdTier::Avx:
      return "AVX";
    case SimdTier::Sse:
      return "SSE";
    case SimdTier::Unknown:
      break;
  }
  return "unknown";
}

std::string cpu_model_name() {
  // The first processor's block: the name, and family and model, which tell
  // apart CPUs a VM names alike ("Intel Xeon Processor").
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, name, family, model;
  auto value = [](const std::string& l) {
    const auto colon = l.find(':');
    const auto start = colon == std::string::npos ? colon : l.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : l.substr(start);
  };
  auto key_is = [&line](const char* key) {
    return line.compare(0, line.find_first_of("\t:"), key) == 0;
  };
  while (std::getline(cpuinfo, line) && !line.empty()) {
    if (key_is("model name")) name = value(line);
    if (key_is("cpu family")) family = value(line);
    if (key_is("model")) model = value(line);
  }
  if (name.empty()) return "";
  if (!family.empty()) name += " (family " + family + " model " + model + ")";
  return name;
}

}  // namespace rh::host
