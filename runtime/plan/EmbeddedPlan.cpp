#include "runtime/plan/EmbeddedPlan.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "runtime/data/WholeFile.h"

namespace braid {
namespace {

constexpr char kMagic[8] = {'B', 'R', 'A', 'I', 'D', 'P', 'L', '1'};
constexpr uint64_t kTrailerBytes = 16;

using File = std::unique_ptr<FILE, int (*)(FILE *)>;

void putLe64(uint64_t v, char *out) {
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

uint64_t getLe64(const unsigned char *in) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | in[i];
  return v;
}

// Where the executable proper ends and the embedded plan (if any) begins,
// judged from the trailer of `bytes`.
absl::StatusOr<std::optional<std::pair<uint64_t, uint64_t>>>
findTrailer(const unsigned char *tail, uint64_t fileSize,
            const std::string &path) {
  if (std::memcmp(tail + 8, kMagic, 8) != 0)
    return std::nullopt;
  uint64_t length = getLe64(tail);
  if (length > fileSize - kTrailerBytes)
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' ends with an embedded-plan trailer that announces ",
        length, " plan bytes, but only ", fileSize - kTrailerBytes,
        " bytes precede it: the binary is truncated or corrupt"));
  uint64_t planStart = fileSize - kTrailerBytes - length;
  return std::make_pair(planStart, length);
}

} // namespace

absl::StatusOr<std::optional<std::string>>
readEmbeddedPlan(const std::string &exePath) {
  File file(std::fopen(exePath.c_str(), "rb"), &std::fclose);
  if (!file)
    return absl::NotFoundError(absl::StrCat(
        "cannot open the executable '", exePath, "': ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fileno(file.get()), &st) != 0 || !S_ISREG(st.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat("'", exePath, "' is not a regular file"));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kTrailerBytes)
    return std::nullopt;
  unsigned char tail[kTrailerBytes];
  if (::pread(fileno(file.get()), tail, kTrailerBytes,
              static_cast<off_t>(size - kTrailerBytes)) !=
      static_cast<ssize_t>(kTrailerBytes))
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the end of '", exePath, "'"));
  absl::StatusOr<std::optional<std::pair<uint64_t, uint64_t>>> where =
      findTrailer(tail, size, exePath);
  if (!where.ok())
    return where.status();
  if (!where->has_value())
    return std::nullopt;
  auto [start, length] = **where;
  std::string plan(length, '\0');
  uint64_t done = 0;
  while (done < length) {
    ssize_t got = ::pread(fileno(file.get()), plan.data() + done, length - done,
                          static_cast<off_t>(start + done));
    if (got <= 0)
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read the embedded plan of '", exePath, "'"));
    done += static_cast<uint64_t>(got);
  }
  return std::optional<std::string>(std::move(plan));
}

absl::Status writeBinaryWithPlan(const std::string &runtimeExe,
                                 std::string_view planBytes,
                                 const std::string &outPath) {
  absl::StatusOr<std::string> exe =
      readWholeFile(runtimeExe, "runtime executable");
  if (!exe.ok())
    return exe.status();
  uint64_t keep = exe->size();
  if (exe->size() >= kTrailerBytes) {
    absl::StatusOr<std::optional<std::pair<uint64_t, uint64_t>>> where =
        findTrailer(reinterpret_cast<const unsigned char *>(exe->data()) +
                        exe->size() - kTrailerBytes,
                    exe->size(), runtimeExe);
    if (!where.ok())
      return where.status();
    if (where->has_value())
      keep = (*where)->first;
  }
  std::string temp = absl::StrCat(outPath, ".tmp-", ::getpid());
  {
    File out(std::fopen(temp.c_str(), "wb"), &std::fclose);
    if (!out)
      return absl::InvalidArgumentError(
          absl::StrCat("cannot create '", temp, "': ", std::strerror(errno)));
    char trailer[kTrailerBytes];
    putLe64(planBytes.size(), trailer);
    std::memcpy(trailer + 8, kMagic, 8);
    bool ok =
        std::fwrite(exe->data(), 1, keep, out.get()) == keep &&
        std::fwrite(planBytes.data(), 1, planBytes.size(), out.get()) ==
            planBytes.size() &&
        std::fwrite(trailer, 1, kTrailerBytes, out.get()) == kTrailerBytes &&
        std::fflush(out.get()) == 0;
    if (!ok) {
      int err = errno;
      out.reset();
      std::remove(temp.c_str());
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write '", temp, "': ", std::strerror(err)));
    }
  }
  if (::chmod(temp.c_str(), 0755) != 0 ||
      std::rename(temp.c_str(), outPath.c_str()) != 0) {
    int err = errno;
    std::remove(temp.c_str());
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot create the executable '", outPath, "': ", std::strerror(err)));
  }
  return absl::OkStatus();
}

} // namespace braid
