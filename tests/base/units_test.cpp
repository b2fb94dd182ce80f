// Byte sizes: the one formatting every message uses, and the parsing of sizes users type.
#include "remat/base/units.hpp"

#include <gtest/gtest.h>

namespace remat {
namespace {

TEST(Units, FormatsBinaryUnitsWithTwoDecimals) {
  EXPECT_EQ(formatBytes(0), "0 B");
  EXPECT_EQ(formatBytes(1023), "1023 B");
  EXPECT_EQ(formatBytes(1024), "1.00 KiB");
  EXPECT_EQ(formatBytes(1536), "1.50 KiB");
  EXPECT_EQ(formatBytes(std::uint64_t{3} << 30), "3.00 GiB");
  EXPECT_EQ(formatBytes(UINT64_MAX), "16.00 EiB");
}

TEST(Units, TheUnitOfAnAxisIsTheUnitOfTheText) {
  EXPECT_EQ(byteUnitFor(0.0).name, "B");
  EXPECT_EQ(byteUnitFor(1023.0).name, "B");
  EXPECT_EQ(byteUnitFor(1024.0).name, "KiB");
  EXPECT_DOUBLE_EQ(byteUnitFor(1024.0).divisor, 1024.0);
  EXPECT_EQ(byteUnitFor(1.5 * (1 << 30)).name, "GiB");
  EXPECT_EQ(byteUnitFor(1e30).name, "EiB");
  for (std::uint64_t bytes : {std::uint64_t{1024}, std::uint64_t{5} << 20, std::uint64_t{7} << 40, UINT64_MAX}) {
    const std::string text = formatBytes(bytes);
    EXPECT_EQ(text.substr(text.find(' ') + 1), byteUnitFor(static_cast<double>(bytes)).name) << text;
  }
}

TEST(Units, ParsesSizesWithAndWithoutUnits) {
  EXPECT_EQ(*parseByteSize("4096"), 4096u);
  EXPECT_EQ(*parseByteSize(" 4 KiB "), 4096u);
  EXPECT_EQ(*parseByteSize("1.5MiB"), 1572864u);
  EXPECT_EQ(*parseByteSize("3.5GiB"), 3758096384u);
  EXPECT_EQ(*parseByteSize("2 gb"), std::uint64_t{2} << 30);
  EXPECT_EQ(*parseByteSize("1t"), std::uint64_t{1} << 40);
  EXPECT_EQ(*parseByteSize("18446744073709551615"), UINT64_MAX);
}

TEST(Units, RefusesWhatIsNotASizeAndSaysWhy) {
  for (const char* bad : {"", "GiB", "-1", "1.5.2", ".5", "5.", "12 parsecs", "1e3", "0x10"}) {
    Result<std::uint64_t> parsed = parseByteSize(bad);
    ASSERT_FALSE(parsed.isOk()) << bad;
    EXPECT_EQ(parsed.status().code(), ErrorCode::InvalidInput);
    EXPECT_NE(parsed.status().message().find("bad size"), std::string::npos) << parsed.status().message();
  }
  EXPECT_NE(parseByteSize("18446744073709551616").status().message().find("2^64"), std::string::npos);
  EXPECT_NE(parseByteSize("16384 PiB").status().message().find("bad size"), std::string::npos);
  EXPECT_FALSE(parseByteSize("17179869184 GiB").isOk());
  // A long bad argument is quoted, not echoed whole.
  const std::string longText(10000, 'x');
  EXPECT_LT(parseByteSize(longText).status().message().size(), 200u);
}

}  // namespace
}  // namespace remat
