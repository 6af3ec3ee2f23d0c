// "Did you mean ...?" for misspelled keys, types and choices.
#pragma once

#include <string>
#include <vector>

namespace rh::config {

// Optimal string alignment distance (Damerau–Levenshtein where a transposed pair
// counts 1 and no substring is edited twice).
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `word`, or "" when none is close enough: a
// case-insensitive exact match wins; otherwise the smallest edit distance, if it is
// <= max(1, word.size() / 3) (ties: the first candidate).
std::string suggest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace rh::config
