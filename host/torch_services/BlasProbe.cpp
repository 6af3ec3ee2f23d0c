#include "torch_services/BlasProbe.hpp"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <vector>

namespace rh::host {
namespace {

constexpr const char* kLinePrefix = "blas-probe\t";

// Inputs in [-1, 1) from a fixed linear congruential sequence: the same
// product in every probe, with no zero rows or columns.
std::vector<float> filled(size_t count, uint32_t seed) {
  std::vector<float> v(count);
  uint32_t x = seed;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>(static_cast<int32_t>(x >> 8) - (1 << 23)) / static_cast<float>(1 << 23);
  }
  return v;
}

std::string format_number(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

}  // namespace

double max_error_ratio(int m, int n, int k, const float* a, const float* b, const float* c) {
  // The bound: a dot product of length k computed in float32, in any order
  // of summation and with or without FMA, is within gamma_k * sum |a_i b_i|
  // of the exact one, gamma_k = k u / (1 - k u), u = 2^-24 the unit
  // roundoff of float32 (Higham, Accuracy and Stability of Numerical
  // Algorithms, 2nd ed., eq. 3.5): each product and partial sum is rounded
  // once, and an error grows at most with the k roundings on its path. The
  // reference is exact but for its own float64 rounding: a float32 x float32
  // product is exact in float64 (24 + 24 bits < 53), and the float64 sums of
  // c64 and of the magnitudes each add at most gamma_k(2^-53) * sum |a_i b_i|,
  // which the bound takes in too.
  const double kd = static_cast<double>(k);
  const double u32 = std::ldexp(1.0, -24), u64 = std::ldexp(1.0, -53);
  const double gamma32 = kd * u32 / (1 - kd * u32);
  const double gamma64 = kd * u64 / (1 - kd * u64);
  const double factor = gamma32 + 2 * gamma64;
  double worst = 0;
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double exact = 0, magnitude = 0;
      for (int p = 0; p < k; ++p) {
        const double term = static_cast<double>(a[i + static_cast<size_t>(p) * m]) *
                            static_cast<double>(b[p + static_cast<size_t>(j) * k]);
        exact += term;
        magnitude += std::fabs(term);
      }
      const double error =
          std::fabs(static_cast<double>(c[i + static_cast<size_t>(j) * m]) - exact);
      const double bound = factor * magnitude;
      // A NaN (a kernel that read garbage) is a failure, never a pass.
      const double ratio = !(error == error) ? INFINITY
                           : bound > 0       ? error / bound
                           : error > 0       ? INFINITY
                                             : 0;
      worst = std::max(worst, ratio);
    }
  }
  return worst;
}

void time_and_check(SgemmFn sgemm, const ProbeShape& shape, BlasProbeResult& result) {
  const int m = shape.m, n = shape.n, k = shape.k;
  const std::vector<float> a = filled(static_cast<size_t>(m) * k, 1);
  const std::vector<float> b = filled(static_cast<size_t>(k) * n, 2);
  std::vector<float> c(static_cast<size_t>(m) * n);
  const float one = 1, zero = 0;
  auto product = [&] {
    sgemm("N", "N", &m, &n, &k, &one, a.data(), &m, b.data(), &k, &zero, c.data(), &m, 1, 1);
  };
  product();  // warm-up: OpenBLAS allocates its buffers at the first call
  std::vector<double> ms;
  for (int r = 0; r < std::max(1, shape.repetitions); ++r) {
    const auto start = std::chrono::steady_clock::now();
    product();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  result.timed = true;
  result.ms = ms[ms.size() / 2];
  result.gflops = result.ms > 0 ? 2.0 * m * n * k / (result.ms * 1e6) : 0;
  result.max_error_ratio = max_error_ratio(m, n, k, a.data(), b.data(), c.data());
  result.ok = result.max_error_ratio <= 1;
}

BlasProbeResult run_blas_probe(const std::string& library, bool core_only,
                               const ProbeShape& shape) {
  BlasProbeResult result;
  // One thread: the probe compares kernels, not thread pools, and OpenBLAS
  // reads this once, when it is loaded.
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  // RTLD_LOCAL: nothing else in this process resolves against it.
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    result.error = why != nullptr ? why : "dlopen failed";
    return result;
  }
  // The file the dynamic linker chose, resolved as /proc/self/maps shows it
  // (libblas.so.3 is an alternatives symlink).
  struct link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
    std::error_code ec;
    const std::filesystem::path real = std::filesystem::canonical(map->l_name, ec);
    result.library = ec ? std::string(map->l_name) : real.string();
  } else {
    result.library = library;
  }
  // dlsym on the handle also searches its dependencies: Debian's OpenBLAS
  // libblas.so.3 is a thin library over libopenblas.so.0, which has these.
  using NameFn = char* (*)();
  using SetThreadsFn = void (*)(int);
  if (auto corename = reinterpret_cast<NameFn>(::dlsym(handle, "openblas_get_corename")))
    if (const char* core = corename()) result.core = core;
  if (auto config = reinterpret_cast<NameFn>(::dlsym(handle, "openblas_get_config")))
    if (const char* text = config()) result.config = text;
  if (auto set_threads =
          reinterpret_cast<SetThreadsFn>(::dlsym(handle, "openblas_set_num_threads")))
    set_threads(1);
  if (core_only) return result;
  auto sgemm = reinterpret_cast<SgemmFn>(::dlsym(handle, "sgemm_"));
  if (sgemm == nullptr) {
    result.error = result.library + " has no sgemm_ (not a BLAS)";
    return result;
  }
  time_and_check(sgemm, shape, result);
  return result;  // the library stays loaded: the process ends here
}

std::string probe_line(const BlasProbeResult& r) {
  std::ostringstream line;
  line << kLinePrefix << "core=" << r.core << "\ttimed=" << (r.timed ? 1 : 0)
       << "\tms=" << format_number(r.ms) << "\tgflops=" << format_number(r.gflops)
       << "\tmax_error_ratio=" << format_number(r.max_error_ratio) << "\tok=" << (r.ok ? 1 : 0)
       << "\tlibrary=" << r.library << "\tconfig=" << r.config;
  return line.str();
}

BlasProbeResult parse_probe_output(const std::string& output) {
  BlasProbeResult r;
  std::istringstream lines(output);
  std::string line;
  bool found = false;
  while (std::getline(lines, line)) {
    if (line.rfind(kLinePrefix, 0) != 0) continue;
    found = true;
    std::istringstream fields(line.substr(std::char_traits<char>::length(kLinePrefix)));
    std::string field;
    while (std::getline(fields, field, '\t')) {
      const auto eq = field.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
      if (key == "core") r.core = value;
      if (key == "timed") r.timed = value == "1";
      if (key == "ms") r.ms = std::strtod(value.c_str(), nullptr);
      if (key == "gflops") r.gflops = std::strtod(value.c_str(), nullptr);
      if (key == "max_error_ratio") r.max_error_ratio = std::strtod(value.c_str(), nullptr);
      if (key == "ok") r.ok = value == "1";
      if (key == "library") r.library = value;
      if (key == "config") r.config = value;
    }
  }
  if (!found) {
    std::string quoted = output;
    while (!quoted.empty() && (quoted.back() == '\n' || quoted.back() == ' ')) quoted.pop_back();
    if (quoted.size() > 400) quoted = "..." + quoted.substr(quoted.size() - 400);
    r.error = quoted.empty() ? "the probe printed nothing" : "the probe printed: " + quoted;
  }
  return r;
}

std::string openblas_version(const std::string& config) {
  const std::string prefix = "OpenBLAS ";
  if (config.rfind(prefix, 0) != 0) return "";
  const auto end = config.find(' ', prefix.size());
  return config.substr(prefix.size(), end == std::string::npos ? end : end - prefix.size());
}

int blas_probe_main(int argc, const char* const* args) {
  const bool core_only = argc == 2 && std::string(args[1]) == "--core-only";
  if (argc < 1 || argc > 2 || (argc == 2 && !core_only)) {
    std::cerr << "runner-host: error: usage: runner-host --blas-probe LIBRARY [--core-only]\n";
    return 2;
  }
  const BlasProbeResult r = run_blas_probe(args[0], core_only);
  if (!r.error.empty()) {
    std::cerr << "runner-host: error: --blas-probe " << args[0] << ": " << r.error << "\n";
    return 1;
  }
  std::cout << probe_line(r) << std::endl;
  return 0;
}

}  // namespace rh::host
