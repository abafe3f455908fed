#include "runtime/io/AtomicFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

absl::Status writeError(const std::string &path, int err) {
  return absl::InvalidArgumentError(absl::StrCat(
      "cannot write '", path, "': ", std::strerror(err),
      err == ENOSPC || err == EFBIG || err == EDQUOT
          ? " (the disk or a file-size limit is full; the previous file, if "
            "any, is unchanged)"
          : ""));
}

// Writes every piece to `fd`; the errno of the first failure, or 0.
int writeAll(int fd, absl::Span<const std::string_view> pieces) {
  for (std::string_view piece : pieces) {
    const char *p = piece.data();
    size_t left = piece.size();
    while (left > 0) {
      ssize_t n = ::write(fd, p, left);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return n < 0 ? errno : EIO;
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  return 0;
}

} // namespace

void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(),
                  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::string temporaryPathFor(const std::string &path) {
  const fs::path p(path);
  return (p.parent_path() /
          absl::StrCat(".", p.filename().string(), ".tmp-", ::getpid()))
      .string();
}

absl::Status writeFileAtomically(const std::string &path,
                                 absl::Span<const std::string_view> pieces,
                                 mode_t mode) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode))
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write '", path, "': it is a directory"));
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      return writeError(path, errno);
    int err = writeAll(fd, pieces);
    if (::close(fd) != 0 && err == 0)
      err = errno;
    return err == 0 ? absl::OkStatus() : writeError(path, err);
  }

  const std::string temp = temporaryPathFor(path);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0)
    return writeError(path, errno);
  int err = writeAll(fd, pieces);
  if (err == 0 && ::fsync(fd) != 0)
    err = errno;
  if (::close(fd) != 0 && err == 0)
    err = errno;
  if (err == 0 && std::rename(temp.c_str(), path.c_str()) != 0)
    err = errno;
  if (err != 0) {
    ::unlink(temp.c_str());
    return writeError(path, err);
  }
  syncDirectory(fs::path(path).parent_path().string());
  return absl::OkStatus();
}

} // namespace braid
