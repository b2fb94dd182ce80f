#include "remat/input/atomic_file.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <filesystem>
#include <optional>
#include <random>
#include <system_error>

#include "remat/base/text.hpp"

namespace remat {
namespace {

namespace fs = std::filesystem;

std::string systemReason(int error) { return std::generic_category().message(error); }

// The folder a path's file lives in ("." for a bare name).
std::string folderOf(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

Status cannotWrite(const std::string& path, const std::string& why) {
  return Status::io("cannot write " + quoteText(path) + ": " + why);
}

// What the target is now: absent, or its mode and identity (following a link, as a reader would).
struct Target {
  bool exists = false;
  bool isLink = false;
  struct stat info {};
};

Result<Target> inspectTarget(const std::string& path) {
  Target target;
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0) {
    if (errno == ENOENT) return target;
    return cannotWrite(path, systemReason(errno));
  }
  target.isLink = S_ISLNK(link.st_mode);
  if (::stat(path.c_str(), &target.info) != 0) {
    if (target.isLink && errno == ENOENT) return target;  // a dangling link: replaced like an absent file
    return cannotWrite(path, systemReason(errno));
  }
  target.exists = true;
  return target;
}

Status checkTarget(const std::string& path, const Target& target, const WriteOptions& options) {
  if (!target.exists) return Status::ok();
  if (S_ISDIR(target.info.st_mode)) return cannotWrite(path, "it is a folder");
  // A rename would replace a device node or a pipe itself (as root, /dev/null would be gone).
  if (!target.isLink && !S_ISREG(target.info.st_mode))
    return cannotWrite(path, "it is not a regular file (a device, a pipe or a socket)");
  for (const std::string& input : options.inputs) {
    struct stat info {};
    if (::stat(input.c_str(), &info) == 0 && info.st_dev == target.info.st_dev && info.st_ino == target.info.st_ino)
      return cannotWrite(path, "it is " + quoteText(input) + ", a file this command reads; choose another name");
  }
  if (!target.isLink && (target.info.st_mode & 0222) == 0)
    return cannotWrite(path, "the file is read-only; make it writable or choose another name");
  return Status::ok();
}

// A temporary file in the target's folder, removed unless it was renamed into place.
class TemporaryFile {
 public:
  TemporaryFile() = default;
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }

  // O_EXCL under a fresh random name, retried on a clash; mode before the umask.
  Status create(const std::string& target, mode_t mode) {
    const std::string folder = folderOf(target);
    std::string stem = fs::path(target).filename().string().substr(0, 100);
    std::random_device seed;
    std::mt19937_64 random(seed() ^ (static_cast<std::uint64_t>(::getpid()) << 32) ^
                           static_cast<std::uint64_t>(std::time(nullptr)));
    for (int attempt = 0; attempt < 100; ++attempt) {
      char suffix[17];
      std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(random()));
      const std::string candidate = (fs::path(folder) / ("." + stem + ".tmp-" + suffix)).string();
      fd_ = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
      if (fd_ >= 0) {
        path_ = candidate;
        return Status::ok();
      }
      if (errno != EEXIST) return folderError(target, folder, errno);
    }
    return cannotWrite(target, "no free temporary name in " + quoteText(folder));
  }

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

  Status closeFile() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0 ? Status::ok() : Status::io(systemReason(errno));
  }
  void committed() { path_.clear(); }

 private:
  static Status folderError(const std::string& target, const std::string& folder, int error) {
    struct stat info {};
    if (::stat(folder.c_str(), &info) != 0)
      return cannotWrite(target, "the folder " + quoteText(folder) + " does not exist (" + systemReason(errno) + ")");
    if (!S_ISDIR(info.st_mode)) return cannotWrite(target, quoteText(folder) + " is not a folder");
    return cannotWrite(target,
                       "cannot create a file in the folder " + quoteText(folder) + " (" + systemReason(error) + ")");
  }

  int fd_ = -1;
  std::string path_;
};

// Holds SIGXFSZ off in this thread while it lives, so that a write past the file-size limit fails
// with EFBIG; a SIGXFSZ raised meanwhile is taken out of the pending set before the mask returns.
class FileSizeSignalHold {
 public:
  FileSizeSignalHold() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGXFSZ);
    held_ = ::pthread_sigmask(SIG_BLOCK, &set_, &previous_) == 0;
  }
  FileSizeSignalHold(const FileSizeSignalHold&) = delete;
  FileSizeSignalHold& operator=(const FileSizeSignalHold&) = delete;
  ~FileSizeSignalHold() {
    if (!held_) return;
    sigset_t pending;
    const timespec now{0, 0};
    while (::sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1 &&
           ::sigtimedwait(&set_, nullptr, &now) > 0) {
    }
    ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }

 private:
  sigset_t set_{};
  sigset_t previous_{};
  bool held_ = false;
};

Status writeAll(int fd, std::string_view text) {
  FileSizeSignalHold hold;
  while (!text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) {
      const int error = errno;
      return Status::io(systemReason(error) + (error == EFBIG ? " (the file-size limit, ulimit -f)" : ""));
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
  return Status::ok();
}

}  // namespace

Status checkOutputFile(const std::string& path, const WriteOptions& options) {
  if (path.empty()) return Status::io("cannot write a file without a name");
  auto target = inspectTarget(path);
  if (!target) return target.status();
  REMAT_RETURN_IF_ERROR(checkTarget(path, *target, options));
  TemporaryFile probe;  // the folder takes a new file: proven by making one
  return probe.create(path, 0600);
}

Status writeFileAtomically(const std::string& path, std::string_view text, const WriteOptions& options) {
  if (path.empty()) return Status::io("cannot write a file without a name");
  auto target = inspectTarget(path);
  if (!target) return target.status();
  REMAT_RETURN_IF_ERROR(checkTarget(path, *target, options));
  const bool keepMode = target->exists && !target->isLink && S_ISREG(target->info.st_mode);
  TemporaryFile temp;
  REMAT_RETURN_IF_ERROR(temp.create(path, keepMode ? 0600 : 0666));
  if (keepMode && ::fchmod(temp.fd(), target->info.st_mode & 07777) != 0)
    return cannotWrite(path, "cannot keep its permissions: " + systemReason(errno));
  REMAT_RETURN_IF_ERROR(writeAll(temp.fd(), text).withContext("cannot write " + quoteText(path)));
  if (::fsync(temp.fd()) != 0) return cannotWrite(path, systemReason(errno));
  REMAT_RETURN_IF_ERROR(temp.closeFile().withContext("cannot write " + quoteText(path)));
  if (::rename(temp.path().c_str(), path.c_str()) != 0)
    return cannotWrite(path, "cannot rename the temporary file into place: " + systemReason(errno));
  temp.committed();
  // The rename itself survives a crash once the folder is on disk too; a failure here loses nothing.
  const int folder = ::open(folderOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder >= 0) {
    (void)::fsync(folder);
    ::close(folder);
  }
  return Status::ok();
}

}  // namespace remat
