#include "remat/input/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "remat/base/text.hpp"
#include "remat/base/units.hpp"

namespace remat {
namespace {

std::string systemReason(int error) { return std::generic_category().message(error); }

// Closes the descriptor on every path out of readInputFile.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

const char* fileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a pipe";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

Result<std::string> readInputFile(const std::string& path, std::uint64_t maxBytes, std::string_view what) {
  const std::string label = quoteText(path) + " (" + std::string(what) + ")";
  // O_NONBLOCK: opening a pipe must not wait for a writer before fstat can refuse it.
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (file.get() < 0) return Status::io("cannot open " + label + ": " + systemReason(errno));
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) return Status::io("cannot read " + label + ": " + systemReason(errno));
  if (!S_ISREG(info.st_mode))
    return Status::io("cannot read " + label + ": it is " + fileTypeName(info.st_mode) + ", not a regular file");
  const auto tooLarge = [&] {
    return Status::io("refusing " + label + ": it is larger than the limit of " + formatBytes(maxBytes) +
                      " (docs/formats.md, limits)");
  };
  if (static_cast<std::uint64_t>(info.st_size) > maxBytes) return tooLarge();
  std::string text(static_cast<std::size_t>(info.st_size), '\0');
  std::size_t length = 0;
  while (true) {
    if (length == text.size()) {
      if (text.size() > maxBytes) return tooLarge();  // it grew while being read
      text.resize(text.size() + 65536);
    }
    const ssize_t got = ::read(file.get(), text.data() + length, text.size() - length);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Status::io("cannot read " + label + ": " + systemReason(errno));
    if (got == 0) break;
    length += static_cast<std::size_t>(got);
  }
  if (length > maxBytes) return tooLarge();
  text.resize(length);
  return text;
}

TextPlace placeAt(std::string_view text, std::size_t offset) {
  TextPlace place;
  if (offset > text.size()) offset = text.size();
  std::size_t i = 0;
  while (i < offset) {
    if (text[i] == '\n') {
      ++place.line;
      place.column = 1;
      ++i;
      continue;
    }
    const std::size_t length = utf8SequenceLength(text.substr(i));
    i += length == 0 ? 1 : length;
    ++place.column;
  }
  return place;
}

std::string placeText(const std::string& source, std::string_view text, std::size_t offset) {
  const TextPlace place = placeAt(text, offset);
  return source + ":" + std::to_string(place.line) + ":" + std::to_string(place.column);
}

Status rejectNulBytes(std::string_view text, const std::string& source) {
  const std::size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return Status::ok();
  return Status::invalid(placeText(source, text, nul) + ": a NUL byte: the file must be text (byte " +
                         std::to_string(nul + 1) + " of " + std::to_string(text.size()) + ")");
}

}  // namespace remat
