// How runner-host's OpenMP threads wait (launch/ThreadPolicy.hpp): passively
// beside OpenBLAS's own thread pool, unless the environment chooses.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "launch/ThreadPolicy.hpp"

namespace {

using rh::launch::apply_thread_policy;
using rh::launch::passive_threads_wanted;

TEST(ThreadPolicyTest, PassiveOnlyBesideOpenBlasThreadsAndWhenTheEnvironmentIsSilent) {
  EXPECT_TRUE(passive_threads_wanted(nullptr, nullptr, 1));    // OpenBLAS, pthreads
  EXPECT_FALSE(passive_threads_wanted(nullptr, nullptr, 0));   // OpenBLAS, sequential
  EXPECT_FALSE(passive_threads_wanted(nullptr, nullptr, 2));   // OpenBLAS on OpenMP
  EXPECT_FALSE(passive_threads_wanted(nullptr, nullptr, -1));  // no OpenBLAS
  EXPECT_FALSE(passive_threads_wanted("ACTIVE", nullptr, 1));
  EXPECT_FALSE(passive_threads_wanted("PASSIVE", nullptr, 1));
  EXPECT_FALSE(passive_threads_wanted(nullptr, "10000", 1));
}

// This machine's libblas.so.3: an OpenBLAS with a thread pool of its own
// (Debian's libopenblas0-pthread, which tools/install-deps.sh installs)?
bool blas_has_own_threads() {
  void* blas = ::dlopen("libblas.so.3", RTLD_LAZY | RTLD_LOCAL);
  if (blas == nullptr) return false;
  const auto parallel = reinterpret_cast<int (*)()>(::dlsym(blas, "openblas_get_parallel"));
  return parallel != nullptr && parallel() == 1;
}

// In a child each (the policy is the process's environment).
TEST(ThreadPolicyTest, SetsPassiveForThisMachinesBlasAndLeavesAChoiceAlone) {
  const bool own_threads = blas_has_own_threads();
  EXPECT_EXIT(
      {
        unsetenv("OMP_WAIT_POLICY");
        unsetenv("GOMP_SPINCOUNT");
        const std::string did = apply_thread_policy();
        const char* now = std::getenv("OMP_WAIT_POLICY");
        const bool passive = now != nullptr && std::string(now) == "PASSIVE";
        std::exit(passive && !did.empty() ? 1 : now == nullptr && did.empty() ? 2 : 3);
      },
      testing::ExitedWithCode(own_threads ? 1 : 2), "");
  EXPECT_EXIT(
      {
        setenv("OMP_WAIT_POLICY", "ACTIVE", 1);
        const std::string did = apply_thread_policy();
        std::exit(did.empty() && std::string(std::getenv("OMP_WAIT_POLICY")) == "ACTIVE" ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
