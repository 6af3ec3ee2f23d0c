// The BLAS probe (host/torch_services/BlasProbe.hpp): its float64 check, its
// line, and the probe itself as the program runs it (`runner-host
// --blas-probe`, a child process: the test's own environment and BLAS stay
// as they are).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "torch_services/BlasProbe.hpp"
#include "torch_services/BlasProbeChild.hpp"

namespace rh::host {
namespace {

using ::testing::HasSubstr;

// Fake sgemm_s, column-major, alpha 1 and beta 0 (what the probe asks).
// The plain float32 loop, summing p = 0..k-1: a correct product.
void sgemm_in_order(const char*, const char*, const int* m, const int* n, const int* k,
                    const float*, const float* a, const int*, const float* b, const int*,
                    const float*, float* c, const int*, unsigned long, unsigned long) {
  for (int j = 0; j < *n; ++j)
    for (int i = 0; i < *m; ++i) {
      float sum = 0;
      for (int p = 0; p < *k; ++p) sum += a[i + p * *m] * b[p + j * *k];
      c[i + j * *m] = sum;
    }
}
// Summed backwards with FMA: another correct order.
void sgemm_backwards_fma(const char*, const char*, const int* m, const int* n, const int* k,
                         const float*, const float* a, const int*, const float* b, const int*,
                         const float*, float* c, const int*, unsigned long, unsigned long) {
  for (int j = 0; j < *n; ++j)
    for (int i = 0; i < *m; ++i) {
      float sum = 0;
      for (int p = *k - 1; p >= 0; --p) sum = std::fma(a[i + p * *m], b[p + j * *k], sum);
      c[i + j * *m] = sum;
    }
}
// Wrong: the inputs cut to bfloat16's 8 bits (a kernel reading the wrong
// width would do worse).
float to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits &= 0xFFFF0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}
void sgemm_bf16_inputs(const char*, const char*, const int* m, const int* n, const int* k,
                       const float*, const float* a, const int*, const float* b, const int*,
                       const float*, float* c, const int*, unsigned long, unsigned long) {
  for (int j = 0; j < *n; ++j)
    for (int i = 0; i < *m; ++i) {
      float sum = 0;
      for (int p = 0; p < *k; ++p) sum += to_bf16(a[i + p * *m]) * to_bf16(b[p + j * *k]);
      c[i + j * *m] = sum;
    }
}
// Wrong: one element of the product misses its last term (a kernel's edge
// case gone wrong).
void sgemm_one_term_short(const char* ta, const char* tb, const int* m, const int* n, const int* k,
                          const float* alpha, const float* a, const int* lda, const float* b,
                          const int* ldb, const float* beta, float* c, const int* ldc,
                          unsigned long la, unsigned long lb) {
  sgemm_in_order(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, la, lb);
  const int i = *m - 1, j = *n - 1, p = *k - 1;
  c[i + j * *m] -= a[i + p * *m] * b[p + j * *k];
}

const ProbeShape kSmall{64, 48, 96, 1};

TEST(BlasProbeTest, AnyCorrectFloat32OrderIsWithinTheFloat64Bound) {
  for (SgemmFn sgemm : {&sgemm_in_order, &sgemm_backwards_fma}) {
    BlasProbeResult r;
    time_and_check(sgemm, kSmall, r);
    EXPECT_TRUE(r.timed);
    EXPECT_TRUE(r.ok) << r.max_error_ratio;
    EXPECT_LE(r.max_error_ratio, 1);
    EXPECT_GT(r.max_error_ratio, 0);  // float32 rounds: the check sees it
  }
}

TEST(BlasProbeTest, AWrongProductFailsTheFloat64Check) {
  for (SgemmFn sgemm : {&sgemm_bf16_inputs, &sgemm_one_term_short}) {
    BlasProbeResult r;
    time_and_check(sgemm, kSmall, r);
    EXPECT_FALSE(r.ok);
    EXPECT_GT(r.max_error_ratio, 1);
  }
  // One element off by a NaN is a failure, not a pass.
  std::vector<float> a(4, 1.0f), b(4, 1.0f), c(4, 2.0f);
  EXPECT_LE(max_error_ratio(2, 2, 2, a.data(), b.data(), c.data()), 1);
  c[3] = NAN;
  EXPECT_GT(max_error_ratio(2, 2, 2, a.data(), b.data(), c.data()), 1);
}

TEST(BlasProbeTest, TheLineRoundTripsAmongOtherOutput) {
  BlasProbeResult r;
  r.library = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3";
  r.core = "Prescott";
  r.config = "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64";
  r.timed = true;
  r.ms = 2.5;
  r.gflops = 13.4;
  r.max_error_ratio = 0.0075;
  r.ok = true;
  const BlasProbeResult back =
      parse_probe_output("Core not found: x\n" + probe_line(r) + "\nsomething else\n");
  EXPECT_EQ(back.error, "");
  EXPECT_EQ(back.library, r.library);
  EXPECT_EQ(back.core, r.core);
  EXPECT_EQ(back.config, r.config);
  EXPECT_TRUE(back.timed);
  EXPECT_DOUBLE_EQ(back.ms, 2.5);
  EXPECT_DOUBLE_EQ(back.gflops, 13.4);
  EXPECT_DOUBLE_EQ(back.max_error_ratio, 0.0075);
  EXPECT_TRUE(back.ok);
  EXPECT_EQ(openblas_version(r.config), "0.3.21");
  EXPECT_EQ(openblas_version("something else"), "");
  EXPECT_THAT(parse_probe_output("Segmentation fault\n").error,
              HasSubstr("the probe printed: Segmentation fault"));
}

// The real probe on this machine's BLAS, as LibTorch resolves it, through
// the program: its products check out against float64.
TEST(BlasProbeTest, TheProgramsProbeOfThisMachinesBlasChecksOut) {
  const BlasProbeResult r = probe_in_child(RH_RUNNER_HOST, {"libblas.so.3", std::nullopt, false});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.library.front(), '/') << r.library;
  EXPECT_TRUE(r.timed);
  EXPECT_TRUE(r.ok) << "max error ratio " << r.max_error_ratio;
  EXPECT_GT(r.ms, 0);
  EXPECT_GT(r.gflops, 0);
  const BlasProbeResult named =
      probe_in_child(RH_RUNNER_HOST, {"libblas.so.3", std::nullopt, true});
  ASSERT_EQ(named.error, "");
  EXPECT_FALSE(named.timed);
  EXPECT_EQ(named.library, r.library);
  EXPECT_EQ(named.core, r.core);
}

TEST(BlasProbeTest, AProbeOfNoLibraryIsAnErrorNamingIt) {
  const BlasProbeResult r =
      probe_in_child(RH_RUNNER_HOST, {"/nonexistent/libblas.so.3", std::nullopt, false});
  EXPECT_THAT(r.error, HasSubstr("the BLAS probe of /nonexistent/libblas.so.3 exited with code 1"));
  EXPECT_THAT(r.error, HasSubstr("/nonexistent/libblas.so.3: cannot open shared object file"));
}

}  // namespace
}  // namespace rh::host
