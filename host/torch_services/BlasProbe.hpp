// The BLAS probe: `runner-host --blas-probe LIBRARY [--core-only]`, a hidden
// mode of the program (docs/build.md, "The BLAS check"). It opens LIBRARY
// (the BLAS LibTorch loads, or the soname libblas.so.3, which the dynamic
// linker resolves as it does for LibTorch), names the OpenBLAS core it runs
// and times one float32 matrix product on one thread, checked against a
// float64 product. It runs as a child process because OpenBLAS reads
// OPENBLAS_CORETYPE once, when it is loaded: each kernel to compare needs a
// fresh process. No LibTorch here (main.cpp's target links this).
#pragma once

#include <string>

namespace rh::host {

struct BlasProbeResult {
  std::string library;         // the file the dynamic linker opened
  std::string core;            // openblas_get_corename(); "" when the BLAS is not OpenBLAS
  std::string config;          // openblas_get_config(): "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
  bool timed = false;          // false for --core-only: no product was run
  double ms = 0;               // one product, the median of the timed repetitions
  double gflops = 0;           // 2 m n k / that time
  double max_error_ratio = 0;  // the worst element's error over its bound
  bool ok = false;             // every element within its bound
  std::string error;           // why there is no result; "" when there is one
};

// The product the probe times: C (m x n) = A (m x k) B (k x n), column-major.
// 256^3 takes 1.2-2.2 ms on OpenBLAS 0.3.21's Prescott kernels and 0.24-0.42
// ms on its SkylakeX ones (one thread, this Xeon, 2 cores shared with
// builds): the 7 repetitions after a warm-up cost 10-18 ms on the old
// kernel, the float64 check about 15 ms, a probe's process 30-50 ms (up to
// 110 ms while two builds ran). The median of 7 kept the factor between
// 4.7x and 6.1x over the runs measured.
struct ProbeShape {
  int m = 256;
  int n = 256;
  int k = 256;
  int repetitions = 7;
};

// float32 GEMM with the Fortran BLAS interface (sgemm_): the hidden lengths
// of the two character arguments last, as gfortran passes them.
using SgemmFn = void (*)(const char* transa, const char* transb, const int* m, const int* n,
                         const int* k, const float* alpha, const float* a, const int* lda,
                         const float* b, const int* ldb, const float* beta, float* c,
                         const int* ldc, unsigned long transa_len, unsigned long transb_len);

// Opens `library` (after setting OPENBLAS_NUM_THREADS=1: the product runs on
// one thread, as each rank's share of a node would) and, unless `core_only`,
// times and checks the product. Never throws; `error` says what failed.
BlasProbeResult run_blas_probe(const std::string& library, bool core_only,
                               const ProbeShape& shape = {});

// The timing and the check with a given sgemm: the seam the tests feed a
// wrong product through. Fills timed, ms, gflops, max_error_ratio, ok.
void time_and_check(SgemmFn sgemm, const ProbeShape& shape, BlasProbeResult& result);

// The worst element's |c - c64| over the float32 error bound of its dot
// product (below); at most 1 for any correct float32 product, whatever the
// kernel's order of summation, blocking or use of FMA. Column-major.
double max_error_ratio(int m, int n, int k, const float* a, const float* b, const float* c);

// One line, tab-separated key=value pairs after "blas-probe", the
// library path and config last-but-one and last (they may hold spaces):
//   blas-probe  core=Prescott  timed=1  ms=2.91  gflops=11.5  max_error_ratio=0.0031  ok=1
//   library=/usr/lib/...  config=OpenBLAS 0.3.21 ...
std::string probe_line(const BlasProbeResult& result);
// The result from a child's output (the probe's line among anything else it
// printed, OpenBLAS's own warnings included); `error` set, quoting the
// output, when there is no such line.
BlasProbeResult parse_probe_output(const std::string& output);

// "0.3.21" from openblas_get_config()'s "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
// ("" when it does not start so).
std::string openblas_version(const std::string& config);

// main.cpp's `--blas-probe`: args are what follows it. Prints the line;
// exit 0 when there is a result (ok or not), 2 on a bad command line, 1
// when the library cannot be opened or has no sgemm_.
int blas_probe_main(int argc, const char* const* args);

}  // namespace rh::host
