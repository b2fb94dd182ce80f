// The repository is self-contained: no tracked file points at a path outside it (the project owns
// its specification, docs/memory-model.md, and its test vectors, tests/data/), and every relative
// link in the Markdown documents resolves to a file inside the repository.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
const fs::path kSourceDir = fs::weakly_canonical(REMAT_SOURCE_DIR);

// Tracked files from git where the source is a checkout; otherwise every file outside build
// folders (a source tarball).
std::vector<fs::path> repositoryFiles() {
  std::vector<fs::path> files;
  if (fs::exists(kSourceDir / ".git")) {
    const std::string command = "git -C '" + kSourceDir.string() + "' ls-files -z";
    if (FILE* pipe = popen(command.c_str(), "r")) {
      std::string name;
      for (int c = std::fgetc(pipe); c != EOF; c = std::fgetc(pipe)) {
        if (c != '\0') {
          name.push_back(static_cast<char>(c));
        } else {
          files.push_back(kSourceDir / name);
          name.clear();
        }
      }
      if (pclose(pipe) == 0 && !files.empty()) return files;
      files.clear();
    }
  }
  for (auto it = fs::recursive_directory_iterator(kSourceDir); it != fs::recursive_directory_iterator(); ++it) {
    const std::string leaf = it->path().filename().string();
    if (it->is_directory() && (leaf.starts_with("build") || leaf.starts_with("."))) {
      it.disable_recursion_pending();
    } else if (it->is_regular_file()) {
      files.push_back(it->path());
    }
  }
  return files;
}

// The text of a file, or nothing for a binary file (one with a NUL byte).
std::string textOf(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.find('\0') == std::string::npos ? text : std::string();
}

std::size_t lineOf(const std::string& text, std::size_t offset) {
  return 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<long>(offset), '\n'));
}

TEST(Repository, ListsItsFiles) {
  const auto files = repositoryFiles();
  EXPECT_GT(files.size(), 50u) << "source folder " << kSourceDir;
  EXPECT_TRUE(std::find(files.begin(), files.end(), kSourceDir / "docs" / "memory-model.md") != files.end())
      << "docs/memory-model.md is the normative memory model and must be in the repository";
  EXPECT_TRUE(fs::exists(kSourceDir / "tests" / "data" / "golden.json"));
}

TEST(Repository, NoFilePointsOutsideIt) {
  // Spelled in pieces so that this file does not match itself.
  const std::vector<std::string> outside = {std::string("..") + "/shared", std::string("shared") + "/spec",
                                            std::string("/work") + "/"};
  for (const fs::path& path : repositoryFiles()) {
    const std::string text = textOf(path);
    for (const std::string& needle : outside) {
      const std::size_t at = text.find(needle);
      EXPECT_EQ(at, std::string::npos) << fs::relative(path, kSourceDir).string() << ":" << lineOf(text, at)
                                       << " refers to '" << needle << "', a path outside the repository";
    }
  }
}

TEST(Repository, MarkdownLinksResolveInsideIt) {
  const std::regex link(R"(\]\(([^)#\s]+)(#[^)]*)?\))");
  std::size_t checked = 0;
  for (const fs::path& path : repositoryFiles()) {
    if (path.extension() != ".md") continue;
    const std::string text = textOf(path);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it) {
      const std::string target = (*it)[1].str();
      if (target.find("://") != std::string::npos || target.starts_with("mailto:")) continue;
      const fs::path resolved = fs::weakly_canonical(path.parent_path() / target);
      const std::string where =
          fs::relative(path, kSourceDir).string() + ":" + std::to_string(lineOf(text, it->position()));
      const auto [end, unused] = std::mismatch(kSourceDir.begin(), kSourceDir.end(), resolved.begin(), resolved.end());
      EXPECT_TRUE(end == kSourceDir.end()) << where << ": link '" << target << "' leaves the repository";
      EXPECT_TRUE(fs::exists(resolved)) << where << ": link '" << target << "' names a missing file";
      ++checked;
    }
  }
  EXPECT_GT(checked, 5u);
}

TEST(Repository, FilesTheDocumentsNameExist) {
  // Paths like core/src/memory/simulator.cpp in prose: a moved file must not leave a stale pointer.
  const std::regex path(
      R"(\b((?:core|gpu|app|tests|scripts|bench|docs|resources|cmake|fuzz)/[A-Za-z0-9_./-]*[A-Za-z0-9_]\.(?:cpp|hpp|cu|md|sh|py|txt|json|cmake|png|onnx)))");
  std::size_t checked = 0;
  for (const fs::path& file : repositoryFiles()) {
    if (file.extension() != ".md") continue;
    const std::string text = textOf(file);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), path); it != std::sregex_iterator(); ++it) {
      const std::string named = (*it)[1].str();
      EXPECT_TRUE(fs::exists(kSourceDir / named)) << fs::relative(file, kSourceDir).string() << ":"
                                                  << lineOf(text, it->position()) << " names '" << named
                                                  << "', which is not in the repository";
      ++checked;
    }
  }
  EXPECT_GT(checked, 20u);
}

}  // namespace
