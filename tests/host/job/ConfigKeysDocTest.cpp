// The guard of issue 31: every key the job schema accepts is in
// docs/config-keys.md with what it does and the test that shows its effect
// or its refusal, and that test exists. A key added to the schema without
// its line, or a line naming a test that is gone, fails here.
//
//   RH_PRINT_CONFIG_KEYS=1 build/bin/rh_config_tests --gtest_filter='ConfigKeysDoc*'
// prints the schema's keys (path, variants, doc) to start a new line from.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/Schema.hpp"
#include "job/JobSchema.hpp"

namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Rows "| `key` | what it does | `Suite.Test` ... |" of the doc: key -> test names.
std::map<std::string, std::vector<std::string>> doc_rows(const std::string& doc) {
  std::map<std::string, std::vector<std::string>> rows;
  std::istringstream lines(doc);
  const std::regex row(R"(^\|\s*`([^`]+)`\s*\|(.*)\|(.*)\|\s*$)");
  const std::regex test(R"(`([A-Za-z0-9_/]+\.[A-Za-z0-9_/]+)`)");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    std::vector<std::string>& tests = rows[m[1]];
    const std::string cell = m[3];
    for (auto it = std::sregex_iterator(cell.begin(), cell.end(), test);
         it != std::sregex_iterator(); ++it)
      tests.push_back((*it)[1]);
  }
  return rows;
}

// Every "Suite.Name" defined by TEST/TEST_F/TEST_P in tests/ (an
// instantiated TEST_P is named by its suite and test as written).
std::set<std::string> defined_tests(const fs::path& tests) {
  std::set<std::string> names;
  const std::regex def(R"(TEST(?:_F|_P)?\(\s*(\w+),\s*(\w+)\))");
  for (const auto& e : fs::recursive_directory_iterator(tests)) {
    if (!e.is_regular_file()) continue;
    const std::string ext = e.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp") continue;
    const std::string text = read(e.path());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), def);
         it != std::sregex_iterator(); ++it)
      names.insert((*it)[1].str() + "." + (*it)[2].str());
  }
  return names;
}

// The doc's name for a schema key: the three data splits share their keys
// (data.<split>.batch_size), and a list item's keys are the single
// scheduler's (param_scheduler[].type is param_scheduler.type).
std::string doc_key(std::string path) {
  for (const char* split : {"data.train.", "data.val.", "data.test."}) {
    const std::string s(split);
    if (path.compare(0, s.size(), s) == 0) path = "data.<split>." + path.substr(s.size());
  }
  for (size_t at; (at = path.find("[]")) != std::string::npos;) path.erase(at, 2);
  return path;
}

TEST(ConfigKeysDocTest, EveryJobKeyIsDocumentedWithATestThatExists) {
  std::vector<rh::config::SchemaKey> keys;
  std::set<std::string> seen;
  for (auto k : rh::config::schema_keys(rh::config::job_schema())) {
    k.path = doc_key(k.path);
    if (seen.insert(k.path).second) keys.push_back(k);
  }
  ASSERT_GT(keys.size(), 50u);
  if (std::getenv("RH_PRINT_CONFIG_KEYS") != nullptr)
    for (const auto& k : keys) std::cout << k.path << "\t" << k.variants << "\t" << k.doc << "\n";
  const fs::path root = RH_SOURCE_DIR;
  const std::string doc = read(root / "docs" / "config-keys.md");
  ASSERT_FALSE(doc.empty()) << "docs/config-keys.md is missing";
  const auto rows = doc_rows(doc);
  const std::set<std::string> tests = defined_tests(root / "tests");
  std::set<std::string> schema;
  for (const auto& k : keys) {
    schema.insert(k.path);
    const auto row = rows.find(k.path);
    if (row == rows.end()) {
      ADD_FAILURE() << "docs/config-keys.md has no line for `" << k.path << "`"
                    << (k.doc.empty() ? "" : " (" + k.doc + ")");
      continue;
    }
    EXPECT_FALSE(row->second.empty()) << "`" << k.path << "` names no test";
    for (const std::string& t : row->second)
      EXPECT_EQ(tests.count(t), 1u)
          << "`" << k.path << "` names test " << t << ", which no file in tests/ defines";
  }
  for (const auto& [key, unused] : rows)
    EXPECT_EQ(schema.count(key), 1u)
        << "docs/config-keys.md lists `" << key << "`, which the job schema does not accept";
}

}  // namespace
