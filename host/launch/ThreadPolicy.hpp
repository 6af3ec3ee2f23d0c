// How this process's OpenMP threads wait between parallel regions.
//
// LibTorch runs its intra-op parallel regions on OpenMP (libgomp), whose
// threads by default spin for a while after each region (OMP_WAIT_POLICY
// unset: active for up to GOMP_SPINCOUNT spins). Debian's OpenBLAS
// (libopenblas0-pthread) runs every matrix product on a thread pool of its
// own, whose threads spin likewise after each call. On a machine with as
// many cores as threads, the two pools' spinning threads take the cores
// from the ones with work: measured on 2 cores (runner-host, 2 intra-op
// threads), the quickstart's MLP step took 2.0-3.7 ms on LibTorch 1.13 and
// 23 ms on Debian 13's 2.6 (PyTorch 2.6 eager alike: 23 ms), and 0.8-1.3 ms
// with OMP_WAIT_POLICY=PASSIVE; a gpt of 25 M parameters 4.7 s against
// 3.2 s (1.13) and 1.86 s against 1.35 s (2.6). Passive OpenMP threads
// sleep at once, and the BLAS pool has the cores to itself while it works.
#pragma once

#include <string>

namespace rh::launch {

// Whether to ask for passive OpenMP threads: when the environment does not
// choose already (OMP_WAIT_POLICY or GOMP_SPINCOUNT set: theirs wins) and
// LibTorch's BLAS is an OpenBLAS with a pthread pool of its own
// (`openblas_parallel`: openblas_get_parallel(), 1 for pthreads; -1 when
// libblas.so.3 is no OpenBLAS). An OpenBLAS built on OpenMP shares LibTorch's
// pool, and MKL (pip's LibTorch) too: nothing to fight over there.
bool passive_threads_wanted(const char* omp_wait_policy, const char* gomp_spincount,
                            int openblas_parallel);

// Sets OMP_WAIT_POLICY=PASSIVE when wanted, in this process's environment
// (its workers inherit it): before the runner library loads LibTorch and
// libgomp, which read it once. Looks at libblas.so.3 by loading it (the
// library LibTorch links; its OPENBLAS_* settings must be final by then).
// Returns what it did, for the debug log: "" when it left the environment
// alone.
std::string apply_thread_policy();

}  // namespace rh::launch
