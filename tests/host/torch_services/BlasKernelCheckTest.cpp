// The start-up check and env_cfg.blas_coretype's choice
// (host/torch_services/BlasKernelCheck.hpp), with a fake probe: which
// probes each runs, what it warns of, what it chooses or refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "torch_services/BlasKernelCheck.hpp"

namespace rh::host {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Level = BlasVerdict::Level;

const char* kLibrary = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3";
const char* kConfig = "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64";

CpuFeatures avx512() {
  CpuFeatures cpu;
  cpu.x86 = cpu.avx = cpu.avx2 = cpu.fma = true;
  cpu.avx512f = cpu.avx512bw = cpu.avx512dq = cpu.avx512vl = true;
  return cpu;
}

// OpenBLAS as the fake runs it: its own core, and for each OPENBLAS_CORETYPE
// the core it then runs and the time of the probe's product.
struct FakeBlas {
  std::string own = "Prescott";
  double own_ms = 3.0;
  std::map<std::string, std::pair<std::string, double>> forced = {
      {"SkylakeX", {"SkylakeX", 1.0}},
      {"Haswell", {"Haswell", 1.5}},
      {"Skylakx", {"Cooperlake", 1.0}},  // an unknown name: OpenBLAS runs what it detects
  };
  std::set<std::string> wrong;  // cores whose products fail the float64 check
  std::vector<ProbeRequest> requests;

  ProbeFn fn() {
    return [this](const ProbeRequest& q) {
      requests.push_back(q);
      BlasProbeResult r;
      r.library = kLibrary;
      r.config = kConfig;
      r.core = own;
      r.ms = own_ms;
      if (q.coretype) {
        auto it = forced.find(*q.coretype);
        if (it == forced.end()) {
          r.error = "killed by signal 4 (Illegal instruction)";
          return r;
        }
        std::tie(r.core, r.ms) = it->second;
      }
      if (q.core_only) return r;
      r.timed = true;
      r.ok = wrong.count(r.core) == 0;
      r.max_error_ratio = r.ok ? 0.01 : 300;
      return r;
    };
  }
};

LoadedBlas prescott() { return {kLibrary, "Prescott", kConfig}; }

TEST(BlasKernelCheckTest, AnOlderKernelIsMeasuredAgainstTheBestAndWarnedOfWithTheFix) {
  FakeBlas blas;
  const BlasVerdict v = check_blas_kernel(prescott(), {}, avx512(), blas.fn());
  EXPECT_EQ(v.level, Level::Warn);
  EXPECT_EQ(v.message,
            "LibTorch's BLAS (OpenBLAS 0.3.21, " + std::string(kLibrary) +
                ") runs its Prescott kernels on this CPU (AVX-512): a float32 matrix product "
                "takes 3.0x as long as with its SkylakeX kernels (measured on this machine, one "
                "thread; results checked against float64). Set OPENBLAS_CORETYPE=SkylakeX, or "
                "env_cfg.blas_coretype: auto in the job");
  ASSERT_EQ(blas.requests.size(), 2u);  // the environment's, then SkylakeX's
  EXPECT_EQ(blas.requests[0].coretype, std::nullopt);
  EXPECT_EQ(blas.requests[1].coretype, "SkylakeX");
  EXPECT_EQ(blas.requests[1].library, kLibrary);
}

// OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE in the environment: on some CPUs
// they are set because OpenBLAS's own choice computes wrong results or
// crashes. Nothing is probed, warned of or chosen over them.
TEST(BlasKernelCheckTest, TheEnvironmentsChoiceStandsAndNothingIsProbed) {
  for (const BlasEnv& env : {BlasEnv{"Prescott", std::nullopt, {"OPENBLAS_CORETYPE=Prescott"}},
                             BlasEnv{std::nullopt, "262144", {"OPENBLAS_L2_SIZE=262144"}}}) {
    FakeBlas blas;
    const BlasVerdict v = check_blas_kernel(prescott(), env, avx512(), blas.fn());
    EXPECT_EQ(v.level, Level::Debug);
    EXPECT_THAT(v.message, HasSubstr("the environment's choice stands"));
    const CoretypeChoice automatic = choose_blas_coretype("auto", env, avx512(), blas.fn());
    EXPECT_FALSE(automatic.refused);
    EXPECT_EQ(automatic.coretype, std::nullopt) << automatic.message;
    EXPECT_TRUE(blas.requests.empty()) << blas.requests.size() << " probe(s)";
  }
  // A named core: OPENBLAS_CORETYPE wins over it, unprobed; beside
  // OPENBLAS_L2_SIZE (kept) it is probed and chosen.
  FakeBlas blas;
  const CoretypeChoice over =
      choose_blas_coretype("SkylakeX", {"Haswell", std::nullopt, {}}, avx512(), blas.fn());
  EXPECT_EQ(over.coretype, std::nullopt);
  EXPECT_THAT(over.message,
              HasSubstr("OPENBLAS_CORETYPE=Haswell is set in the environment and stands"));
  EXPECT_TRUE(blas.requests.empty());
  const CoretypeChoice named =
      choose_blas_coretype("SkylakeX", {std::nullopt, "262144", {}}, avx512(), blas.fn());
  EXPECT_EQ(named.coretype, "SkylakeX") << named.message;
}

TEST(BlasKernelCheckTest, TheBestKernelAlreadyIsNotProbed) {
  FakeBlas blas;
  blas.own = "Cooperlake";  // Debian 13's OpenBLAS 0.3.29 on this Xeon
  const BlasVerdict v =
      check_blas_kernel({kLibrary, "Cooperlake", kConfig}, {}, avx512(), blas.fn());
  EXPECT_EQ(v.level, Level::Debug);
  EXPECT_THAT(v.message,
              HasSubstr("running its Cooperlake kernels, the best for this CPU (AVX-512)"));
  const CoretypeChoice c = choose_blas_coretype("auto", {}, avx512(), blas.fn());
  EXPECT_EQ(c.coretype, std::nullopt);
  EXPECT_THAT(c.message, HasSubstr("already runs its Cooperlake kernels, the best for this CPU "
                                   "(AVX-512): OPENBLAS_CORETYPE left unset"));
  ASSERT_EQ(blas.requests.size(), 1u);  // auto's look at which core OpenBLAS picks
  EXPECT_TRUE(blas.requests[0].core_only);
  EXPECT_EQ(blas.requests[0].library, "libblas.so.3");
}

TEST(BlasKernelCheckTest, ABetterCoreThatIsNotFasterOrDoesNotCheckOutIsNeitherWarnedOfNorChosen) {
  FakeBlas slow;
  slow.forced["SkylakeX"] = {"SkylakeX", 2.9};  // 3.0 / 2.9: within the noise
  const BlasVerdict v = check_blas_kernel(prescott(), {}, avx512(), slow.fn());
  EXPECT_EQ(v.level, Level::Debug);
  EXPECT_THAT(v.message, HasSubstr("its SkylakeX kernels are not faster here (1.0x"));
  EXPECT_EQ(choose_blas_coretype("auto", {}, avx512(), slow.fn()).coretype, std::nullopt);

  // SkylakeX computes wrong products: the next tier's Haswell is measured.
  FakeBlas wrong;
  wrong.wrong = {"SkylakeX"};
  const BlasVerdict w = check_blas_kernel(prescott(), {}, avx512(), wrong.fn());
  EXPECT_EQ(w.level, Level::Warn);
  EXPECT_THAT(w.message, HasSubstr("2.0x as long as with its Haswell kernels"));
  const CoretypeChoice c = choose_blas_coretype("auto", {}, avx512(), wrong.fn());
  EXPECT_EQ(c.coretype, "Haswell") << c.message;

  // OpenBLAS runs other kernels than asked for, or the probe crashes: none counts.
  FakeBlas other;
  other.forced = {{"SkylakeX", {"Cooperlake", 1.0}}};
  const BlasVerdict o = check_blas_kernel(prescott(), {}, avx512(), other.fn());
  EXPECT_EQ(o.level, Level::Debug);
  EXPECT_THAT(o.message, HasSubstr("SkylakeX: with OPENBLAS_CORETYPE=SkylakeX it ran its "
                                   "Cooperlake kernels"));
  EXPECT_THAT(o.message, HasSubstr("Haswell: killed by signal 4"));
}

TEST(BlasKernelCheckTest, AutoChoosesTheBetterCoreWhenItChecksOutAndSaysWhy) {
  FakeBlas blas;
  const CoretypeChoice c = choose_blas_coretype("auto", {}, avx512(), blas.fn());
  EXPECT_FALSE(c.refused);
  EXPECT_EQ(c.coretype, "SkylakeX");
  EXPECT_EQ(c.message,
            "OPENBLAS_CORETYPE=SkylakeX: OpenBLAS 0.3.21 runs its Prescott kernels on this CPU "
            "(AVX-512), where a float32 matrix product takes 3.0x as long as with its SkylakeX "
            "kernels (measured on this machine, one thread; results checked against float64)");
  // Which BLAS: the soname, resolved by the child; then the file it found.
  ASSERT_EQ(blas.requests.size(), 3u);
  EXPECT_EQ(blas.requests[0].library, "libblas.so.3");
  EXPECT_EQ(blas.requests[1].library, kLibrary);
  EXPECT_EQ(blas.requests[2].coretype, "SkylakeX");
}

TEST(BlasKernelCheckTest, ANamedCoreIsChosenOnlyWhenOpenBlasRunsItAndItChecksOut) {
  FakeBlas blas;
  const CoretypeChoice ok = choose_blas_coretype("Haswell", {}, avx512(), blas.fn());
  EXPECT_EQ(ok.coretype, "Haswell");
  EXPECT_EQ(ok.message,
            "OPENBLAS_CORETYPE=Haswell: OpenBLAS 0.3.21 runs its Haswell kernels; its own choice "
            "here, its Prescott kernels, takes 2.0x as long for a float32 matrix product "
            "(measured on this machine, one thread; results checked against float64)");

  const CoretypeChoice unknown = choose_blas_coretype("Skylakx", {}, avx512(), blas.fn());
  EXPECT_TRUE(unknown.refused);
  EXPECT_EQ(unknown.coretype, std::nullopt);
  EXPECT_EQ(unknown.message,
            "OpenBLAS 0.3.21 does not know the core 'Skylakx' or will not run it on this CPU: "
            "with OPENBLAS_CORETYPE=Skylakx it ran its Cooperlake kernels (did you mean "
            "'SkylakeX'?); name a core this CPU runs (SkylakeX here), or write auto");

  const CoretypeChoice crashed = choose_blas_coretype("Bulldozer", {}, avx512(), blas.fn());
  EXPECT_TRUE(crashed.refused);
  EXPECT_THAT(crashed.message, HasSubstr("cannot run OpenBLAS 0.3.21's 'Bulldozer' kernels here: "
                                         "killed by signal 4"));

  blas.wrong = {"Haswell"};
  const CoretypeChoice wrong = choose_blas_coretype("Haswell", {}, avx512(), blas.fn());
  EXPECT_TRUE(wrong.refused);
  EXPECT_EQ(wrong.message,
            "OpenBLAS 0.3.21's Haswell kernels compute wrong float32 matrix products on this "
            "CPU: an element is off by 300.0x its float64 error bound; leave the key out, or "
            "write auto");
}

TEST(BlasKernelCheckTest, WithoutOpenBlasAutoLeavesItAndANamedCoreIsRefused) {
  FakeBlas blas;
  blas.own = "";  // the reference BLAS: no openblas_get_corename
  const BlasVerdict v = check_blas_kernel({"/usr/lib/x86_64-linux-gnu/blas/libblas.so.3", "", ""},
                                          {}, avx512(), blas.fn());
  EXPECT_EQ(v.level, Level::Debug);
  EXPECT_THAT(choose_blas_coretype("auto", {}, avx512(), blas.fn()).message,
              HasSubstr("is not OpenBLAS, which has no kernels to choose"));
  const CoretypeChoice named = choose_blas_coretype("SkylakeX", {}, avx512(), blas.fn());
  EXPECT_TRUE(named.refused);
  EXPECT_THAT(named.message, HasSubstr("is not OpenBLAS: OPENBLAS_CORETYPE would change nothing"));
}

}  // namespace
}  // namespace rh::host
