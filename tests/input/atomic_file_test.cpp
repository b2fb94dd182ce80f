// writeFileAtomically and checkOutputFile: the one writer of every file (issue 15's clobbered files).
#include "remat/input/atomic_file.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "temp_folder.hpp"

namespace remat {
namespace {

namespace fs = std::filesystem;

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

mode_t modeOf(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(::lstat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

class AtomicFile : public testing::TempFolderTest {
 protected:
  // The names in the folder, to see that nothing was left behind.
  std::vector<std::string> names() const {
    std::vector<std::string> list;
    for (const auto& entry : fs::directory_iterator(folder_)) list.push_back(entry.path().filename().string());
    std::sort(list.begin(), list.end());
    return list;
  }
};

TEST_F(AtomicFile, WritesAndReplaces) {
  const std::string target = path("out.json");
  ASSERT_TRUE(writeFileAtomically(target, "one").isOk());
  EXPECT_EQ(readAll(target), "one");
  ASSERT_TRUE(writeFileAtomically(target, std::string(1 << 20, 'x')).isOk());
  EXPECT_EQ(readAll(target).size(), 1u << 20);
  EXPECT_EQ(names(), std::vector<std::string>{"out.json"});
}

TEST_F(AtomicFile, ANewFileGetsTheUmaskAndAnOldOneKeepsItsMode) {
  const mode_t previous = ::umask(022);
  const std::string fresh = path("fresh.csv");
  ASSERT_TRUE(writeFileAtomically(fresh, "x").isOk());
  EXPECT_EQ(modeOf(fresh), 0644u);
  const std::string kept = write("kept.csv", "old");
  ASSERT_EQ(::chmod(kept.c_str(), 0640), 0);
  ASSERT_TRUE(writeFileAtomically(kept, "new").isOk());
  EXPECT_EQ(modeOf(kept), 0640u);
  ::umask(previous);
}

TEST_F(AtomicFile, AReadOnlyTargetIsNotReplaced) {
  // Issue 15: a 0444 target was replaced and its mode became 0644.
  const std::string target = write("ro.csv", "precious");
  ASSERT_EQ(::chmod(target.c_str(), 0444), 0);
  const Status status = writeFileAtomically(target, "new");
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), ErrorCode::IoError);
  EXPECT_NE(status.message().find("read-only"), std::string::npos) << status.message();
  EXPECT_EQ(readAll(target), "precious");
  EXPECT_EQ(modeOf(target), 0444u);
  EXPECT_FALSE(checkOutputFile(target).isOk());
}

TEST_F(AtomicFile, AnInputOfTheCommandIsNotOverwritten) {
  // Issue 15: `run --timeline` naming the input chain file overwrote the chain.
  const std::string input = write("chain.json", "the chain");
  const std::string link = path("link.json");
  fs::create_symlink(input, link);
  const std::string hardLink = path("hard.json");
  fs::create_hard_link(input, hardLink);
  const WriteOptions options{{input}};
  for (const std::string& target : {input, link, hardLink}) {
    const Status status = writeFileAtomically(target, "timeline", options);
    ASSERT_FALSE(status.isOk()) << target;
    EXPECT_NE(status.message().find("a file this command reads"), std::string::npos) << status.message();
    EXPECT_FALSE(checkOutputFile(target, options).isOk()) << target;
  }
  EXPECT_EQ(readAll(input), "the chain");
  EXPECT_TRUE(writeFileAtomically(path("other.json"), "timeline", options).isOk());
}

TEST_F(AtomicFile, ALinkPlantedAtTheOldTemporaryNameIsNotFollowed) {
  // Issue 15: the temporary file was ".NAME.tmp-PID", opened without refusing a link there.
  const std::string victim = write("victim.txt", "untouched");
  const std::string target = path("out.csv");
  fs::create_symlink(victim, path(".out.csv.tmp-" + std::to_string(::getpid())));
  ASSERT_TRUE(writeFileAtomically(target, "written").isOk());
  EXPECT_EQ(readAll(victim), "untouched");
  EXPECT_EQ(readAll(target), "written");
}

TEST_F(AtomicFile, ALinkAtTheTargetIsReplacedNotWrittenThrough) {
  const std::string victim = write("victim.txt", "untouched");
  const std::string target = path("out.csv");
  fs::create_symlink(victim, target);
  ASSERT_TRUE(writeFileAtomically(target, "written").isOk());
  EXPECT_EQ(readAll(victim), "untouched");
  EXPECT_FALSE(fs::is_symlink(target));
  EXPECT_EQ(readAll(target), "written");
}

TEST_F(AtomicFile, AMissingFolderSaysWhyBeforeAnyWork) {
  // Issue 15: a missing folder was reported after the run, as "cannot create temporary file".
  const std::string target = path("no/such/folder/t.csv");
  const Status checked = checkOutputFile(target);
  ASSERT_FALSE(checked.isOk());
  EXPECT_EQ(checked.code(), ErrorCode::IoError);
  EXPECT_NE(checked.message().find("does not exist (No such file or directory)"), std::string::npos)
      << checked.message();
  EXPECT_FALSE(writeFileAtomically(target, "x").isOk());
  EXPECT_FALSE(checkOutputFile(folder_.string()).isOk());  // a folder is no file
  // Nor is a pipe or a device: a rename would replace the node itself (as root, /dev/null).
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Status pipe = writeFileAtomically(fifo, "x");
  ASSERT_FALSE(pipe.isOk());
  EXPECT_NE(pipe.message().find("not a regular file"), std::string::npos) << pipe.message();
  EXPECT_FALSE(checkOutputFile(fifo).isOk());
  fs::remove(fifo);
  EXPECT_TRUE(checkOutputFile(path("fine.csv")).isOk());
  EXPECT_TRUE(names().empty()) << "the check left a file behind";
}

TEST_F(AtomicFile, AFileSizeLimitFailsTheWriteAndLeavesNothing) {
  // Issue 15: killed by SIGXFSZ mid-write, a 4 KB temporary file was left behind. SIGXFSZ is held
  // off while writing: without that, this test process dies here.
  const std::string target = write("t.csv", "old");
  rlimit previous{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &previous), 0);
  rlimit small = previous;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const Status status = writeFileAtomically(target, std::string(100000, 'x'));
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &previous), 0);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("File too large"), std::string::npos) << status.message();
  EXPECT_EQ(readAll(target), "old");
  EXPECT_EQ(names(), std::vector<std::string>{"t.csv"});
}

}  // namespace
}  // namespace remat
