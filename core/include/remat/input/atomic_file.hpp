#pragma once
// The one way the project writes a file (chain files, timelines, plan exports, images): all or
// nothing, and never through a name someone else chose.
//   - The text goes to a new temporary file in the target's folder, created with O_CREAT | O_EXCL
//     under a random name (a link planted there is never followed), then fsync()ed and renamed
//     over the target. A failed write leaves the target as it was and removes the temporary file,
//     on every failure it can see: a full disk, a file-size limit (SIGXFSZ is held off while it
//     writes, so the write fails with EFBIG instead of killing the program).
//   - A target that exists keeps its permission bits; a new one gets 0666 less the umask.
//   - Refused, before anything is written: a target that is a folder, a device, a pipe or a
//     socket (a rename would replace the node itself), a read-only file (no write bit: a 0444
//     file is not replaced), or one of the files the command reads (WriteOptions::
//     inputs, compared by device and inode, so another name or a link for it is refused too). A
//     symbolic link at the target is replaced by the file, never written through.
// Errors are IoError naming the file and the system's reason.
#include <string>
#include <string_view>
#include <vector>

#include "remat/base/status.hpp"

namespace remat {

struct WriteOptions {
  std::vector<std::string> inputs;  // files the command reads, which it must not overwrite
};

// Whether writeFileAtomically(path, ..., options) could write now: what it refuses, and whether
// the folder takes a new file (it creates and removes one). For commands that work for long
// before they write: they call it first and fail before the work.
Status checkOutputFile(const std::string& path, const WriteOptions& options = {});

Status writeFileAtomically(const std::string& path, std::string_view text, const WriteOptions& options = {});

}  // namespace remat
