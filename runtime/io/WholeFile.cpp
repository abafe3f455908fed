#include "runtime/io/WholeFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <sys/stat.h>

#include "absl/strings/str_cat.h"

namespace braid {

absl::StatusOr<std::string> readWholeFile(const std::string &path,
                                          absl::string_view what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    std::string message = absl::StrCat("cannot open the ", what, " file '",
                                       path, "': ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message)
                         : absl::InvalidArgumentError(message);
  }
  if (!S_ISREG(st.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat("the ", what, " path '", path, "' is not a regular file"));
  std::unique_ptr<FILE, int (*)(FILE *)> file(std::fopen(path.c_str(), "rb"),
                                              &std::fclose);
  if (!file)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open the ", what, " file '", path,
                     "': ", std::strerror(errno)));
  std::string bytes;
  bytes.resize(static_cast<size_t>(st.st_size));
  size_t got = std::fread(bytes.data(), 1, bytes.size(), file.get());
  if (got != bytes.size() || std::ferror(file.get()))
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the ", what, " file '", path, "': read ", got,
                     " of ", bytes.size(), " bytes"));
  return bytes;
}

} // namespace braid
