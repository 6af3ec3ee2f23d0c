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
using rh::launch::HeapMode;

TEST(HeapPolicyTest, AUsersGlibcMallocTunableWins) {
  EXPECT_TRUE(heap_policy_wanted(nullptr));
  EXPECT_TRUE(heap_policy_wanted(""));
  EXPECT_TRUE(heap_policy_wanted("glibc.rtld.nns=2"));
  EXPECT_FALSE(heap_policy_wanted("glibc.malloc.mmap_threshold=131072"));
  EXPECT_FALSE(heap_policy_wanted("glibc.rtld.nns=2:glibc.malloc.trim_threshold=0"));
}

// Allocates and frees `mib` MiB: whether the block was a mapping of its own
// (1) and whether the heap holds at least that much after the free (2).
int mapped_and_kept(size_t mib) {
  const size_t before_maps = mallinfo2().hblks;
  // Through a volatile pointer: the compiler may not elide the pair.
  void* volatile p = std::malloc(mib << 20);
  std::memset(p, 1, mib << 20);
  const bool mapped = mallinfo2().hblks > before_maps;
  std::free(p);
  const bool kept = mallinfo2().arena >= (mib << 20);
  return (mapped ? 1 : 0) | (kept ? 2 : 0);
}

// In a child process each (the policy is for the whole process): a 64 MiB
// block is its own mapping under glibc's defaults, and comes from the heap,
// kept there after free, under keep.
int large_block_mapped_and_heap_kept() { return mapped_and_kept(64); }

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
        if (apply_heap_policy(HeapMode::kKeep).empty()) std::exit(10);
        std::exit(large_block_mapped_and_heap_kept());
      },
      testing::ExitedWithCode(2), "")
      << "under keep: from the heap, kept after free";
}

// A 24 MiB block freed, then a 16 MiB one: whether the second is a mapping
// of its own (1) or from the heap and kept there after free (2).
int block_after_a_larger_one() {
  mapped_and_kept(24);
  return mapped_and_kept(16);
}

TEST(HeapPolicyTest, ReleaseMapsEveryLargeBlockAndReturnsIt) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers bring their own allocator";
#endif
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (!heap_policy_wanted(tunables)) GTEST_SKIP() << "GLIBC_TUNABLES sets malloc: " << tunables;
  EXPECT_EQ(rh::launch::heap_mode("release"), HeapMode::kRelease);
  EXPECT_EQ(rh::launch::heap_mode("keep"), HeapMode::kKeep);
  EXPECT_EXIT(std::exit(block_after_a_larger_one()), testing::ExitedWithCode(2), "")
      << "glibc's default: freeing the 24 MiB mapping raised the threshold above 16 MiB";
  EXPECT_EXIT(
      {
        if (apply_heap_policy(HeapMode::kRelease).empty()) std::exit(10);
        std::exit(block_after_a_larger_one());
      },
      testing::ExitedWithCode(1), "")
      << "under release: a mapping of its own, returned at free";
}

}  // namespace
