// quoteText: what messages quote of hostile text is short, printable and on one line.
#include "remat/base/text.hpp"

#include <gtest/gtest.h>

namespace remat {
namespace {

TEST(QuoteText, ShortTextIsQuotedAsIs) {
  EXPECT_EQ(quoteText("conv1"), "'conv1'");
  EXPECT_EQ(quoteText(""), "''");
  EXPECT_EQ(quoteText("gr\xC3\xB6\xC3\x9F"
                      "e"),
            "'gr\xC3\xB6\xC3\x9F"
            "e'");  // UTF-8 stays
}

TEST(QuoteText, LongTextIsCutAtTheLimit) {
  const std::string quoted = quoteText(std::string(1000000, 'x'));
  EXPECT_EQ(quoted, "'" + std::string(kMaxQuotedChars, 'x') + "...'");
  EXPECT_EQ(quoteText("abcdef", 3), "'abc...'");
  // Characters, not bytes: a cut never splits a UTF-8 sequence.
  EXPECT_EQ(quoteText("\xC3\xA9\xC3\xA9\xC3\xA9", 2), "'\xC3\xA9\xC3\xA9...'");
}

TEST(QuoteText, ControlCharactersAndBadBytesAreEscaped) {
  EXPECT_EQ(quoteText("a\nb\tc"), "'a\\nb\\tc'");
  EXPECT_EQ(quoteText(std::string("\0\x1b[2J", 5)), "'\\x00\\x1B[2J'");
  EXPECT_EQ(quoteText("\xFF\xC3"), "'\\xFF\\xC3'");           // not UTF-8, and a sequence cut short
  EXPECT_EQ(quoteText("\xED\xA0\x80"), "'\\xED\\xA0\\x80'");  // a surrogate is not UTF-8 either
}

TEST(Utf8, SequenceLengths) {
  EXPECT_EQ(utf8SequenceLength("a"), 1u);
  EXPECT_EQ(utf8SequenceLength("\xC3\xA9"), 2u);
  EXPECT_EQ(utf8SequenceLength("\xE2\x82\xAC"), 3u);
  EXPECT_EQ(utf8SequenceLength("\xF0\x9F\x98\x80"), 4u);
  EXPECT_EQ(utf8SequenceLength("\xC0\x80"), 0u);          // overlong
  EXPECT_EQ(utf8SequenceLength("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(utf8SequenceLength("\x80"), 0u);
}

}  // namespace
}  // namespace remat
