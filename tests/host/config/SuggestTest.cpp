#include <gtest/gtest.h>

#include "config/Suggest.hpp"

namespace rh::config {
namespace {

TEST(SuggestTest, EditDistanceCountsInsertDeleteReplace) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("same", "same"), 0u);
}

TEST(SuggestTest, EditDistanceCountsATranspositionAsOne) {
  EXPECT_EQ(edit_distance("ab", "ba"), 1u);
  EXPECT_EQ(edit_distance("max_epohcs", "max_epochs"), 1u);
  // Optimal string alignment: no substring is edited twice, so this is 3, not 2.
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);
}

TEST(SuggestTest, SuggestsTheClosestCandidate) {
  const std::vector<std::string> keys = {"max_epochs", "max_iters", "val_interval", "by_epoch"};
  EXPECT_EQ(suggest("max_epoch", keys), "max_epochs");
  EXPECT_EQ(suggest("max_iter", keys), "max_iters");
  EXPECT_EQ(suggest("max_epohcs", keys), "max_epochs");
  EXPECT_EQ(suggest("val_intervall", keys), "val_interval");
}

TEST(SuggestTest, NothingWhenTooFar) {
  const std::vector<std::string> keys = {"max_epochs", "by_epoch"};
  EXPECT_EQ(suggest("learning_rate", keys), "");
  EXPECT_EQ(suggest("x", {}), "");
}

TEST(SuggestTest, ThresholdIsAThirdOfTheWordButAtLeastOne) {
  // 9 letters: up to 3 edits.
  EXPECT_EQ(suggest("abcdefghi", {"abcxyzghi"}), "abcxyzghi");
  EXPECT_EQ(suggest("abcdefghi", {"abcwxyzhi"}), "");
  // 2 letters: max(1, 0) = 1 edit.
  EXPECT_EQ(suggest("lf", {"lr"}), "lr");
  EXPECT_EQ(suggest("ab", {"xy"}), "");
}

TEST(SuggestTest, CaseInsensitiveExactMatchWinsWhateverTheDistance) {
  EXPECT_EQ(suggest("ADAMW", {"Adam", "AdamW"}), "AdamW");
  EXPECT_EQ(suggest("highest", {"HIGH", "HIGHEST"}), "HIGHEST");
}

TEST(SuggestTest, TiesGoToTheFirstCandidate) {
  EXPECT_EQ(suggest("bat", {"cat", "hat"}), "cat");
  EXPECT_EQ(suggest("bat", {"hat", "cat"}), "hat");
}

}  // namespace
}  // namespace rh::config
