#include "config/Suggest.hpp"

#include <algorithm>
#include <cctype>

namespace rh::config {
namespace {

bool equal_ignoring_case(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  // d[i][j] = distance between a[0, i) and b[0, j).
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string suggest(const std::string& word, const std::vector<std::string>& candidates) {
  for (const auto& candidate : candidates) {
    if (equal_ignoring_case(word, candidate)) return candidate;
  }
  const size_t max_distance = std::max<size_t>(1, word.size() / 3);
  const std::string* best = nullptr;
  size_t best_distance = max_distance + 1;
  for (const auto& candidate : candidates) {
    const size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best = &candidate;
      best_distance = distance;
    }
  }
  return best != nullptr ? *best : "";
}

}  // namespace rh::config
