// Probe results kept between runs (host/torch_services/BlasProbeCache.hpp):
// the same key is served from the file, another key probes again, and a
// folder that cannot be written costs only the probe.
#include <gtest/gtest.h>

#include "common/TestUtil.hpp"
#include "torch_services/BlasProbeCache.hpp"

namespace rh::host {
namespace {

namespace fs = std::filesystem;

struct CountingProbe {
  int calls = 0;
  ProbeFn fn() {
    return [this](const ProbeRequest& q) {
      ++calls;
      BlasProbeResult r;
      r.library = q.library;
      r.core = q.coretype.value_or("Prescott");
      r.config = "OpenBLAS 0.3.21 DYNAMIC_ARCH";
      r.timed = !q.core_only;
      r.ms = 1.0 + calls;  // a fresh probe measures anew
      r.ok = true;
      return r;
    };
  }
};

TEST(BlasProbeCacheTest, ATimedProbeIsKeptUnderItsKeyAndOtherKeysProbeAgain) {
  rh::test::TempDir dir;
  const std::string library = dir.write("lib/libblas.so.3", "not really a library").string();
  CountingProbe inner;
  const std::vector<std::string> vars = {"OPENBLAS_VERBOSE=0"};
  ProbeFn cached = cached_prober(inner.fn(), dir / "cache", "Xeon (family 6 model 207)", vars);

  const BlasProbeResult first = cached({library, std::nullopt, false});
  const BlasProbeResult again = cached({library, std::nullopt, false});
  EXPECT_EQ(inner.calls, 1);
  EXPECT_DOUBLE_EQ(again.ms, first.ms);
  EXPECT_EQ(again.core, "Prescott");
  EXPECT_EQ(again.library, library);

  cached({library, "SkylakeX", false});  // another kernel
  EXPECT_EQ(inner.calls, 2);
  cached({library, "SkylakeX", false});
  EXPECT_EQ(inner.calls, 2);
  // Another CPU, other OPENBLAS_* variables, or the library rewritten: probed again.
  cached_prober(inner.fn(), dir / "cache", "EPYC", vars)({library, std::nullopt, false});
  EXPECT_EQ(inner.calls, 3);
  cached_prober(inner.fn(), dir / "cache", "Xeon (family 6 model 207)",
                {"OPENBLAS_VERBOSE=2"})({library, std::nullopt, false});
  EXPECT_EQ(inner.calls, 4);
  dir.write("lib/libblas.so.3", "an upgraded library, of another size");
  cached({library, std::nullopt, false});
  EXPECT_EQ(inner.calls, 5);
  // Core-only probes and sonames are never kept.
  cached({library, std::nullopt, true});
  cached({library, std::nullopt, true});
  cached({"libblas.so.3", std::nullopt, false});
  EXPECT_EQ(inner.calls, 8);
  // OPENBLAS_NUM_THREADS is the probe's own (always 1): not part of the key.
  EXPECT_EQ(probe_cache_key({library, std::nullopt, false}, "cpu", {"OPENBLAS_NUM_THREADS=8"}),
            probe_cache_key({library, std::nullopt, false}, "cpu", {}));
}

TEST(BlasProbeCacheTest, AFolderThatCannotBeWrittenIsSkipped) {
  rh::test::TempDir dir;
  const std::string library = dir.write("libblas.so.3", "x").string();
  dir.write("cache", "a file where the folder would be");
  CountingProbe inner;
  ProbeFn cached = cached_prober(inner.fn(), dir / "cache" / "blas-probe", "cpu", {});
  EXPECT_TRUE(cached({library, std::nullopt, false}).error.empty());
  EXPECT_TRUE(cached({library, std::nullopt, false}).error.empty());
  EXPECT_EQ(inner.calls, 2);
}

TEST(BlasProbeCacheTest, TheFolderIsTheUsersCacheNeverTheWorkDir) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const auto dir = default_probe_cache_dir();
  if (xdg != nullptr && *xdg == '/') {
    EXPECT_EQ(dir, fs::path(xdg) / "runner-host/blas-probe");
  } else if (home != nullptr && *home == '/') {
    EXPECT_EQ(dir, fs::path(home) / ".cache/runner-host/blas-probe");
  } else {
    EXPECT_EQ(dir, std::nullopt);
  }
}

}  // namespace
}  // namespace rh::host
