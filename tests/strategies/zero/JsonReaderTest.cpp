// The strict JSON reader behind `deepspeed_config`: values, positions, and
// the errors (each at the line and column of the offending character).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "JsonReader.hpp"

namespace rh::zero {
namespace {

using ::testing::HasSubstr;

// "line:column: message" of a document that must fail.
std::string error_of(const std::string& text) {
  try {
    parse_json(text);
  } catch (const JsonError& e) {
    return e.what();
  }
  return "(parsed)";
}

TEST(JsonReaderTest, ReadsValuesWithTheirPositions) {
  const JsonValue v = parse_json(
      "{\n"
      "  \"a\": 1,\n"
      "  \"b\": [true, false, null, -2.5e3],\n"
      "  \"c\": {\"d\": \"x\\\"\\n\\u00e9\\ud83d\\ude00\"}\n"
      "}\n");
  ASSERT_EQ(v.kind, JsonValue::Kind::Object);
  ASSERT_EQ(v.members.size(), 3u);
  EXPECT_EQ(v.members[0].key, "a");
  EXPECT_EQ(v.members[0].line, 2);
  EXPECT_EQ(v.members[0].column, 3);
  const JsonValue* a = v.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->kind, JsonValue::Kind::Number);
  EXPECT_TRUE(a->integral);
  EXPECT_EQ(a->text, "1");
  EXPECT_EQ(a->line, 2);
  EXPECT_EQ(a->column, 8);
  const JsonValue* b = v.find("b");
  ASSERT_EQ(b->items.size(), 4u);
  EXPECT_TRUE(b->items[0].boolean);
  EXPECT_EQ(b->items[1].kind, JsonValue::Kind::Bool);
  EXPECT_FALSE(b->items[1].boolean);
  EXPECT_EQ(b->items[2].kind, JsonValue::Kind::Null);
  EXPECT_FALSE(b->items[3].integral);
  EXPECT_EQ(b->items[3].text, "-2.5e3");
  EXPECT_EQ(b->items[3].column, 28);
  EXPECT_EQ(v.find("c")->find("d")->text, "x\"\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v.find("zzz"), nullptr);
}

TEST(JsonReaderTest, ColumnsCountCharactersNotBytes) {
  // "é" is two bytes and one column: the 1 is at column 7, the 2 at 15.
  const JsonValue v = parse_json("{\"\xc3\xa9\": 1, \"x\": 2}");
  EXPECT_EQ(v.find("x")->column, 15);
  EXPECT_EQ(v.members[0].value.column, 7);
}

TEST(JsonReaderTest, ErrorsNameLineAndColumn) {
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
  EXPECT_EQ(error_of(std::string(300, '[')), "1:202: nested deeper than 200 levels");
}

}  // namespace
}  // namespace rh::zero
