// Gradient-accumulation windows (TrainStep.hpp): MMEngine's rule, cut short
// by the epoch's end and max_iters, and by where a resume began.
#include <gtest/gtest.h>

#include "lifecycle/TrainStep.hpp"

namespace rh::lifecycle {
namespace {

// (length, last_batch) of every batch of an epoch of `batches`.
std::vector<std::pair<int64_t, bool>> epoch(int64_t n, int64_t batches, int64_t first = 0,
                                            int64_t iters_before = 0, int64_t max_iters = 0) {
  std::vector<std::pair<int64_t, bool>> out;
  for (int64_t i = first; i < batches; ++i) {
    const AccumulationWindow w =
        accumulation_window(n, i, batches, iters_before + i - first, max_iters, first);
    out.push_back({w.length, w.last_batch});
    if (max_iters > 0 && iters_before + i - first + 1 >= max_iters) break;
  }
  return out;
}

using Windows = std::vector<std::pair<int64_t, bool>>;

TEST(AccumulationWindowTest, WindowsStartAtTheEpochAndTheLastIsCutShort) {
  EXPECT_EQ(epoch(2, 5), (Windows{{2, false}, {2, true}, {2, false}, {2, true}, {1, true}}));
  EXPECT_EQ(epoch(1, 2), (Windows{{1, true}, {1, true}}));
}

TEST(AccumulationWindowTest, MaxItersCutsTheWindowItFallsIn) {
  // 3 iterations in all: the second window holds only batch 2.
  EXPECT_EQ(epoch(2, 8, 0, 0, 3), (Windows{{2, false}, {2, true}, {1, true}}));
}

// Resumed at batch 3 of windows of 2 (a checkpoint of another global batch):
// batch 2 was never run here, so the first window is batch 3 alone, divided
// by 1 (issue 31: it was divided by 2, halving the first step's gradient);
// the windows after keep the epoch's alignment.
TEST(AccumulationWindowTest, AResumeInsideAWindowTakesWhatIsLeftOfIt) {
  EXPECT_EQ(epoch(2, 7, 3), (Windows{{1, true}, {2, false}, {2, true}, {1, true}}));
  EXPECT_EQ(epoch(4, 8, 2),
            (Windows{{2, false}, {2, true}, {4, false}, {4, false}, {4, false}, {4, true}}));
  // A resume on a window boundary changes nothing.
  EXPECT_EQ(epoch(2, 6, 2), (Windows{{2, false}, {2, true}, {2, false}, {2, true}}));
}

}  // namespace
}  // namespace rh::lifecycle
