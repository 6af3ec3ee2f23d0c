// The heap policy of runner-host's processes (launch/HeapPolicy.hpp): large
// blocks stay in the heap, and a user's glibc malloc tunables win.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "launch/HeapPolicy.hpp"

namespace {

using rh::launch::apply_heap_policy;
using rh::launch::heap_policy_wanted;

TEST(HeapPolicyTest, AUsersGlibcMallocTunableWins) {
  EXPECT_TRUE(heap_policy_wanted(nullptr));
  EXPECT_TRUE(heap_policy_wanted(""));
  EXPECT_TRUE(heap_policy_wanted("glibc.rtld.nns=2"));
  EXPECT_FALSE(heap_policy_wanted("glibc.malloc.mmap_threshold=131072"));
  EXPECT_FALSE(heap_policy_wanted("glibc.rtld.nns=2:glibc.malloc.trim_threshold=0"));
}

// In a child process each (the policy is for the whole process): a 64 MiB
// block is its own mapping under glibc's defaults, and comes from the heap,
// kept there after free, under the policy.
int large_block_mapped_and_heap_kept() {
  const size_t before_maps = mallinfo2().hblks;
  // Through a volatile pointer: the compiler may not elide the pair.
  void* volatile p = std::malloc(size_t{64} << 20);
  std::memset(p, 1, size_t{64} << 20);
  const bool mapped = mallinfo2().hblks > before_maps;
  std::free(p);
  const bool kept = mallinfo2().arena >= (size_t{64} << 20);
  return (mapped ? 1 : 0) | (kept ? 2 : 0);
}

TEST(HeapPolicyTest, LargeBlocksComeFromTheHeapAndStayThere) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers bring their own allocator";
#endif
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (!heap_policy_wanted(tunables)) GTEST_SKIP() << "GLIBC_TUNABLES sets malloc: " << tunables;
  EXPECT_EXIT(std::exit(large_block_mapped_and_heap_kept()), testing::ExitedWithCode(1), "")
      << "glibc's default: a mapping of its own, unmapped at free";
  EXPECT_EXIT(
      {
        if (apply_heap_policy().empty()) std::exit(10);
        std::exit(large_block_mapped_and_heap_kept());
      },
      testing::ExitedWithCode(2), "")
      << "under the policy: from the heap, kept after free";
}

}  // namespace
