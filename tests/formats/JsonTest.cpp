// formats/Json, the one JSON of runner-host: values with their positions,
// the errors (each at the line and column of the offending character; a
// `deepspeed_config` file's and meta.json's), the typed reads and the one
// escaper.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "formats/Json.hpp"

namespace rh::json {
namespace {

namespace json = rh::json;

using ::testing::HasSubstr;

// "line:column: message" of a document that must fail.
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const ParseError& e) {
    return e.what();
  }
  return "(parsed)";
}

TEST(JsonTest, ReadsValuesWithTheirPositions) {
  const Value v = parse(
      "{\n"
      "  \"a\": 1,\n"
      "  \"b\": [true, false, null, -2.5e3],\n"
      "  \"c\": {\"d\": \"x\\\"\\n\\u00e9\\ud83d\\ude00\"}\n"
      "}\n");
  ASSERT_EQ(v.kind, Value::Kind::Object);
  ASSERT_EQ(v.members.size(), 3u);
  EXPECT_EQ(v.members[0].key, "a");
  EXPECT_EQ(v.members[0].at.line, 2);
  EXPECT_EQ(v.members[0].at.column, 3);
  const Value* a = v.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->kind, Value::Kind::Number);
  EXPECT_TRUE(a->integral);
  EXPECT_EQ(a->text, "1");
  EXPECT_EQ(a->at.line, 2);
  EXPECT_EQ(a->at.column, 8);
  const Value* b = v.find("b");
  ASSERT_EQ(b->items.size(), 4u);
  EXPECT_TRUE(b->items[0].boolean);
  EXPECT_EQ(b->items[1].kind, Value::Kind::Bool);
  EXPECT_FALSE(b->items[1].boolean);
  EXPECT_EQ(b->items[2].kind, Value::Kind::Null);
  EXPECT_FALSE(b->items[3].integral);
  EXPECT_EQ(b->items[3].text, "-2.5e3");
  EXPECT_EQ(b->items[3].at.column, 28);
  EXPECT_EQ(v.find("c")->find("d")->text, "x\"\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v.find("zzz"), nullptr);
}

TEST(JsonTest, ColumnsCountCharactersNotBytes) {
  // "é" is two bytes and one column: the 1 is at column 7, the 2 at 15.
  const Value v = parse("{\"\xc3\xa9\": 1, \"x\": 2}");
  EXPECT_EQ(v.find("x")->at.column, 15);
  EXPECT_EQ(v.members[0].value.at.column, 7);
}

TEST(JsonTest, ErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("{\n  \"a\": 1,\n}"), "3:1: trailing comma before '}' is not JSON");
  EXPECT_EQ(error_of("[1, 2,]"), "1:7: trailing comma before ']' is not JSON");
  EXPECT_EQ(error_of("{\"a\": 1 \"b\": 2}"), "1:9: expected ',' or '}' after an object member");
  EXPECT_EQ(error_of("{\"a\": 1, \"a\": 2}"), "1:10: duplicate key 'a' (first at line 1)");
  EXPECT_THAT(error_of("{\n  // note\n  \"a\": 1}"), HasSubstr("2:3: comments are not JSON"));
  EXPECT_THAT(error_of("{\"a\": 1} # x"), HasSubstr("1:10: comments are not JSON"));
  EXPECT_EQ(error_of("{a: 1}"), "1:2: expected a key in double quotes");
  EXPECT_EQ(error_of("{'a': 1}"), "1:2: expected a key in double quotes");
  EXPECT_EQ(error_of("['a']"), "1:2: single-quoted strings are not JSON: use double quotes");
  EXPECT_EQ(error_of("{\"a\": 01}"), "1:8: leading zeros are not JSON");
  EXPECT_EQ(error_of("{\"a\": 1.}"), "1:9: expected a digit after '.'");
  EXPECT_EQ(error_of("{\"a\": NaN}"), "1:7: NaN and Infinity are not JSON numbers");
  EXPECT_EQ(error_of("{\"a\": tru}"), "1:7: expected 'true'");
  EXPECT_EQ(error_of("{\"a\": \"x}"), "1:7: unterminated string (missing '\"')");
  EXPECT_EQ(error_of("{\"a\": \"\\q\"}"), "1:9: invalid escape '\\q'");
  EXPECT_EQ(error_of("{\"a\": 1"), "1:8: unexpected end of file inside an object (missing '}')");
  EXPECT_EQ(error_of("{} {}"), "1:4: unexpected '{' after the JSON value");
  EXPECT_EQ(error_of("  "), "1:3: empty document: expected a JSON value");
  EXPECT_EQ(error_of(std::string(300, '[')), "1:65: nesting deeper than 64 levels");
}

TEST(JsonTest, TypedReadsNameTheKeyAndWhereItIs) {
  const Value v = parse("{\"n\": 3, \"s\": \"x\", \"f\": 1.5,\n \"big\": 18446744073709551615}");
  EXPECT_EQ(int64_member(v, "n"), 3);
  EXPECT_EQ(string_member(v, "s"), "x");
  EXPECT_EQ(find_int64_member(v, "absent"), std::nullopt);
  EXPECT_EQ(v.find("big")->as_uint64(), std::optional<uint64_t>(18446744073709551615ull));
  EXPECT_EQ(v.find("big")->as_int64(), std::nullopt);
  auto type_error = [&](auto read) {
    try {
      read();
    } catch (const TypeError& e) {
      return std::string(e.what());
    }
    return std::string("(read)");
  };
  EXPECT_THAT(type_error([&] { int64_member(v, "f"); }),
              HasSubstr("1:25: \"f\": expected an integer"));
  EXPECT_THAT(type_error([&] { int64_member(v, "missing"); }), HasSubstr("missing"));
  EXPECT_THAT(type_error([&] { string_member(v, "n"); }), HasSubstr("1:7"));
}

TEST(JsonTest, TheEscaperWritesWhatTheReaderReadsBack) {
  std::string all;
  for (int c = 0; c < 0x80; ++c) all += static_cast<char>(c);
  all += "\xc3\xa9\xf0\x9f\x98\x80";  // UTF-8 stays as it is
  const std::string text = json::quoted(all);
  EXPECT_EQ(text.find('\n'), std::string::npos);  // one line: JSON Lines need it
  EXPECT_EQ(parse(text).text, all);
  EXPECT_EQ(json::quoted("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(string_array({"a", "b\""}), "[\"a\", \"b\\\"\"]");
  EXPECT_TRUE(is_valid_utf8("\xc3\xa9"));
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));  // overlong '/'
}

}  // namespace
}  // namespace rh::json
