#include "cli/conformance/GoldenTrace.hpp"

#include <map>
#include <set>
#include <sstream>
#include <vector>

namespace fs = std::filesystem;

namespace rh::cli::conformance {

fs::path golden_dir(const fs::path& program) {
  return program.parent_path().parent_path() / "share" / "runner-host" / "conformance";
}

std::string normalise_trace(const std::string& trace) {
  static const std::set<std::string> kKept = {"mode", "epoch", "iter", "inner_iter"};
  std::istringstream in(trace);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string event, word, kept;
    if (!(words >> event)) continue;
    kept = event;
    while (words >> word) {
      const auto eq = word.find('=');
      if (eq != std::string::npos && kKept.count(word.substr(0, eq)) != 0) kept += " " + word;
    }
    out += kept + "\n";
  }
  return out;
}

std::optional<std::string> interleaving_difference(const std::string& golden,
                                                   const std::string& actual, int ranks) {
  auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  const std::vector<std::string> want = lines(golden);
  // Where each line occurs in the file, in order (1-based line numbers).
  std::map<std::string, std::vector<size_t>> at;
  for (const std::string& g : want) {
    if (at.count(g) != 0) return "golden line '" + g + "' is not unique (a broken install)";
    at[g];
  }
  const std::vector<std::string> got = lines(actual);
  for (size_t i = 0; i < got.size(); ++i) {
    auto it = at.find(got[i]);
    if (it == at.end())
      return "line " + std::to_string(i + 1) + " '" + got[i] + "' is no golden event";
    it->second.push_back(i + 1);
  }
  const std::string per_rank = "(once per rank, " + std::to_string(ranks) + " ranks)";
  for (const std::string& g : want)
    if (at[g].size() != static_cast<size_t>(ranks))
      return "'" + g + "' recorded " + std::to_string(at[g].size()) + " time(s), expected " +
             std::to_string(ranks) + " " + per_rank;
  for (size_t j = 0; j + 1 < want.size(); ++j)
    for (int k = 0; k < ranks; ++k)
      if (at[want[j]][k] > at[want[j + 1]][k])
        return "'" + want[j + 1] + "' (line " + std::to_string(at[want[j + 1]][k]) +
               ") came before '" + want[j] + "' (line " + std::to_string(at[want[j]][k]) +
               ") on a rank";
  return std::nullopt;
}

}  // namespace rh::cli::conformance
