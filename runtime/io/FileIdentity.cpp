#include "runtime/io/FileIdentity.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"

namespace braid {

bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

absl::Status refuseInputAsOutput(const std::string &flag,
                                 const std::string &output,
                                 const std::vector<NamedInput> &inputs) {
  for (const NamedInput &in : inputs)
    if (!in.path.empty() && sameFile(output, in.path))
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " '", output, "' is ", in.what, " '", in.path,
          "': writing it would destroy it; choose another path for ", flag));
  return absl::OkStatus();
}

} // namespace braid
