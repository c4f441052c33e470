// The one JSON string writer and UTF-8 check (src/json/text.hpp), which the
// engine (messages, devices JSON, traces) and the uvcl program (job results,
// the HTTP server, the benchmark report) all use.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "json/text.hpp"

namespace text_test {

using namespace std::string_view_literals;
using uvcl::json::first_invalid_utf8;
using uvcl::json::quote;
using uvcl::json::utf8_length;

TEST(JsonText, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(quote("plain"), "\"plain\"");
  EXPECT_EQ(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(quote("\n\r\t\b\f"), "\"\\n\\r\\t\\b\\f\"");
  EXPECT_EQ(quote("\x01\x1f"sv), "\"\\u0001\\u001f\"");
  EXPECT_EQ(quote("nul\0here"sv), "\"nul\\u0000here\"");
  EXPECT_EQ(quote("\x7f"), "\"\x7f\"");  // DEL needs no escape in JSON
}

TEST(JsonText, KeepsWellFormedUtf8AndReplacesEveryInvalidByte) {
  EXPECT_EQ(quote("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(quote("a\xff" "b"), "\"a" + fffd + "b\"");                      // never a lead byte
  EXPECT_EQ(quote("\xc0\xaf"), "\"" + fffd + fffd + "\"");                   // overlong '/'
  EXPECT_EQ(quote("\xed\xa0\x80"), "\"" + fffd + fffd + fffd + "\"");        // a surrogate
  EXPECT_EQ(quote("\xf4\x90\x80\x80"), "\"" + fffd + fffd + fffd + fffd + "\"");  // past U+10FFFF
  EXPECT_EQ(quote("cut \xe2\x82"), "\"cut " + fffd + fffd + "\"");            // sequence cut short
}

TEST(JsonText, Utf8LengthAndFirstInvalidByte) {
  EXPECT_EQ(utf8_length("a", 0), 1u);
  EXPECT_EQ(utf8_length("\xc3\xa9", 0), 2u);
  EXPECT_EQ(utf8_length("\xe2\x82\xac", 0), 3u);
  EXPECT_EQ(utf8_length("\xf0\x9f\x98\x80", 0), 4u);
  EXPECT_EQ(utf8_length("\x80", 0), 0u);
  EXPECT_EQ(utf8_length("\xe0\x80\x80", 0), 0u);  // overlong 3-byte form
  EXPECT_FALSE(first_invalid_utf8("").has_value());
  EXPECT_FALSE(first_invalid_utf8("ok \xc3\xa9").has_value());
  EXPECT_EQ(first_invalid_utf8("ok \xc3\xa9 \xc3").value_or(99), 6u);
  EXPECT_EQ(first_invalid_utf8("\xed\xbf\xbf").value_or(99), 0u);
}

}  // namespace text_test
