// JsonDocument: the strict front end of the JSON readers, and the places of what it holds.
#include "remat/input/json_document.hpp"

#include <gtest/gtest.h>

namespace remat {
namespace {

using nlohmann::json;

JsonDocument mustParse(const std::string& text, std::size_t depth = 8) {
  auto doc = JsonDocument::parse(text, "d.json", depth);
  EXPECT_TRUE(doc.isOk()) << doc.status().message();
  return std::move(doc).value();
}

std::string refusal(const std::string& text, std::size_t depth = 8) {
  auto doc = JsonDocument::parse(text, "d.json", depth);
  EXPECT_FALSE(doc.isOk()) << text.substr(0, 100);
  return doc ? std::string() : doc.status().message();
}

TEST(JsonDocument, ValuesAreThoseOfNlohmannJson) {
  const std::string text = R"({"a": [1, -2, 3.5, "x", true, null, {"b": {}}], "c": 18446744073709551615})";
  EXPECT_EQ(mustParse(text).root(), json::parse(text));
}

TEST(JsonDocument, MembersAndContainerElementsHaveTheirPlaces) {
  const JsonDocument doc = mustParse("{\n  \"a\": 1,\n  \"list\": [{\"x\": 2},\n    [3]],\n  \"s\": \"t\"}");
  const json& root = doc.root();
  EXPECT_EQ(doc.where(root), "d.json:1:1");
  EXPECT_EQ(doc.where(root["a"]), "d.json:2:3");  // a member: its key
  EXPECT_EQ(doc.where(root["list"][0]), "d.json:3:12");
  EXPECT_EQ(doc.where(root["list"][0]["x"]), "d.json:3:13");
  EXPECT_EQ(doc.where(root["list"][1]), "d.json:4:5");
  EXPECT_EQ(doc.where(root["list"][1][0]), "d.json");  // a number in an array: no place of its own
  EXPECT_EQ(doc.describe(root["s"]), "string '\"t\"'");
  EXPECT_EQ(doc.describe(root["a"]), "number '1'");
}

TEST(JsonDocument, PlacesSurviveAMove) {
  JsonDocument doc = mustParse("[{\"k\": -0}]");
  JsonDocument moved = std::move(doc);
  EXPECT_EQ(moved.where(moved.root()[0]["k"]), "d.json:1:3");
  EXPECT_EQ(moved.describe(moved.root()[0]["k"]), "number '-0'");  // as written, not as read
}

TEST(JsonDocument, DescribeQuotesAtMostTheLimit) {
  const std::string longString = "\"" + std::string(100000, 'x') + "\"";
  const JsonDocument doc = mustParse("{\"s\": " + longString + ", \"deep\": [[[[[1]]]]]}");
  EXPECT_LE(doc.describe(doc.root()["s"]).size(), 100u);
  EXPECT_EQ(doc.describe(doc.root()["deep"]), "array '[[[[[1]]]]]}'");
  const JsonDocument unplaced = JsonDocument::unplaced(json{{"s", std::string(100000, 'y')}, {"a", {1, 2}}}, "u");
  EXPECT_LE(unplaced.describe(unplaced.root()["s"]).size(), 100u);
  EXPECT_EQ(unplaced.describe(unplaced.root()["a"]), "an array of 2 values");
  EXPECT_EQ(unplaced.where(unplaced.root()["a"]), "u");
}

TEST(JsonDocument, NestingBeyondTheLimitIsRefusedWhereItStarts) {
  EXPECT_EQ(mustParse("[[[1]]]", 3).root(), json::parse("[[[1]]]"));
  EXPECT_EQ(refusal("[[[[1]]]]", 3), "d.json:1:4: nested deeper than 3 levels, more than the format needs");
  // Issue 15: 65,468 levels killed every subcommand (a recursive dump() of the bad value).
  const std::string deep = std::string(65468, '[') + std::string(65468, ']');
  EXPECT_NE(refusal(deep).find("nested deeper than 8 levels"), std::string::npos);
}

TEST(JsonDocument, DuplicatedKeysAreRefused) {
  EXPECT_EQ(refusal("{\"out_bytes\": 1,\n \"out_bytes\": 999}"),
            "d.json:2:2: the key 'out_bytes' appears twice in one object (first at d.json:1:2)");
  EXPECT_TRUE(JsonDocument::parse(R"([{"a": 1}, {"a": 2}])", "d.json", 8).isOk());  // other objects
}

TEST(JsonDocument, NothingMayFollowTheValue) {
  EXPECT_NE(refusal("{} x").find("d.json:1:4: not valid JSON"), std::string::npos);
  // nlohmann-json stops at a NUL byte: the rest of the file would be ignored.
  EXPECT_EQ(refusal(std::string("{}\0garbage", 10)).rfind("d.json:1:3: a NUL byte", 0), 0u);
}

TEST(JsonDocument, NumbersBeyondADoubleAreRefused) {
  const std::string message = refusal("{\"x\": 1e309}");
  EXPECT_EQ(message, "d.json:1:7: not valid JSON: a number out of range, '1e309'");
  EXPECT_LE(refusal("[1" + std::string(100000, '0') + "e99999]").size(), 120u);
}

TEST(JsonDocument, SyntaxErrorsArePlacedAndBounded) {
  EXPECT_EQ(refusal(""), "d.json:1:1: not valid JSON: the file is empty");
  const std::string message = refusal("{\"a\": \"" + std::string(100000, 'x'));
  EXPECT_EQ(message.rfind("d.json:1:", 0), 0u) << message;
  EXPECT_LE(message.size(), 200u) << message;
  EXPECT_NE(refusal("{\"a\": \"\xFF\"}").find("not valid JSON"), std::string::npos);
}

}  // namespace
}  // namespace remat
