// readInputFile and places in text: what every reader shares.
#include "remat/input/input_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "remat/input/chain_file.hpp"
#include "temp_folder.hpp"

namespace remat {
namespace {

class InputFile : public testing::TempFolderTest {};

TEST_F(InputFile, ReadsARegularFileWhole) {
  const std::string text = std::string("a\0b", 3) + std::string(100000, 'c');
  const std::string file = path("f.bin");
  std::ofstream(file, std::ios::binary) << text;
  auto read = readInputFile(file, 1 << 20, "test file");
  ASSERT_TRUE(read.isOk()) << read.status().message();
  EXPECT_EQ(*read, text);
}

TEST_F(InputFile, RefusesALargerFileBeforeReadingIt) {
  const std::string file = write("big.json", std::string(2000, ' '));
  auto read = readInputFile(file, 1000, "chain file");
  ASSERT_FALSE(read.isOk());
  EXPECT_EQ(read.status().code(), ErrorCode::IoError);
  EXPECT_NE(read.status().message().find("larger than the limit of 1000 B"), std::string::npos)
      << read.status().message();
  EXPECT_TRUE(readInputFile(file, 2000, "chain file").isOk());
}

TEST_F(InputFile, RefusesWhatIsNotARegularFile) {
  // Issue 15: /dev/zero as the chain file was read for 11 s into 2.2 GB; a folder was "not valid JSON".
  for (const auto& [file, kind] :
       {std::pair{std::string("/dev/zero"), "a character device"}, std::pair{folder_.string(), "a folder"}}) {
    auto read = readInputFile(file, kMaxChainFileBytes, "chain file");
    ASSERT_FALSE(read.isOk()) << file;
    EXPECT_EQ(read.status().code(), ErrorCode::IoError);
    EXPECT_NE(read.status().message().find(kind), std::string::npos) << read.status().message();
    EXPECT_NE(read.status().message().find("(chain file)"), std::string::npos) << read.status().message();
  }
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto read = readInputFile(fifo, kMaxChainFileBytes, "chain file");  // must not wait for a writer
  ASSERT_FALSE(read.isOk());
  EXPECT_NE(read.status().message().find("a pipe"), std::string::npos) << read.status().message();
}

TEST_F(InputFile, AMissingFileSaysWhy) {
  auto read = readInputFile(path("missing.json"), 100, "chain file");
  ASSERT_FALSE(read.isOk());
  EXPECT_NE(read.status().message().find("No such file or directory"), std::string::npos) << read.status().message();
}

TEST_F(InputFile, TheChainAndTimelineLoadersUseTheLimits) {
  const std::string big = path("big.json");
  {
    std::ofstream out(big, std::ios::binary);
    out.seekp(static_cast<std::streamoff>(kMaxChainFileBytes));
    out.put(' ');
  }
  auto chain = loadChainFile(big);
  ASSERT_FALSE(chain.isOk());
  EXPECT_NE(chain.status().message().find("larger than the limit of 64.00 MiB"), std::string::npos)
      << chain.status().message();
}

TEST(TextPlaces, LinesAndColumnsCountCharacters) {
  const std::string text = "ab\n\xC3\xA9x\ny";
  EXPECT_EQ(placeText("f", text, 0), "f:1:1");
  EXPECT_EQ(placeText("f", text, 2), "f:1:3");
  EXPECT_EQ(placeText("f", text, 3), "f:2:1");
  EXPECT_EQ(placeText("f", text, 5), "f:2:2");  // after the two bytes of one character
  EXPECT_EQ(placeText("f", text, 7), "f:3:1");
  EXPECT_EQ(placeText("f", text, 1000), "f:3:2");  // clamped to the end
}

TEST(TextPlaces, NulBytesAreRefusedWhereTheyAre) {
  EXPECT_TRUE(rejectNulBytes("fine", "f").isOk());
  const Status nul = rejectNulBytes(std::string("{}\n  \0x", 7), "f.json");
  ASSERT_FALSE(nul.isOk());
  EXPECT_EQ(nul.message().rfind("f.json:2:3: a NUL byte", 0), 0u) << nul.message();
}

}  // namespace
}  // namespace remat
