#include "runtime/plan/EmbeddedPlan.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "runtime/io/WholeFile.h"
#include "runtime/io/AtomicFile.h"
#include "runtime/plan/PlanFormat.h"

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

template <typename T> T readLe(const std::string &bytes, uint64_t at) {
  T v = 0;
  for (int i = sizeof(T) - 1; i >= 0; --i)
    v = static_cast<T>((v << 8) | static_cast<unsigned char>(bytes[at + i]));
  return v;
}

// Finds the RuntimeMarker section of a 64-bit little-endian ELF file.
absl::Status checkRuntime(const std::string &exe, const std::string &path) {
  const std::string advice = absl::StrCat(
      ": --runtime takes the braid-run executable built with this braidc");
  if (exe.size() < 64 || exe.compare(0, 4, "\x7f" "ELF") != 0 ||
      exe[4] != 2 || exe[5] != 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' is not a 64-bit executable (no ELF header)", advice));
  const uint64_t shoff = readLe<uint64_t>(exe, 0x28);
  const uint16_t shentsize = readLe<uint16_t>(exe, 0x3A);
  const uint16_t shnum = readLe<uint16_t>(exe, 0x3C);
  const uint16_t shstrndx = readLe<uint16_t>(exe, 0x3E);
  auto header = [&](uint64_t i) { return shoff + i * shentsize; };
  if (shentsize < 64 || shstrndx >= shnum || shoff > exe.size() ||
      header(shnum) > exe.size())
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' has a damaged ELF section table", advice));
  const uint64_t namesAt = readLe<uint64_t>(exe, header(shstrndx) + 0x18);
  const uint64_t namesSize = readLe<uint64_t>(exe, header(shstrndx) + 0x20);
  if (namesAt > exe.size() || namesSize > exe.size() - namesAt)
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' has a damaged ELF section table", advice));
  for (uint64_t i = 0; i < shnum; ++i) {
    const uint32_t name = readLe<uint32_t>(exe, header(i));
    if (name >= namesSize ||
        exe.compare(namesAt + name, sizeof kRuntimeSection,
                    std::string_view(kRuntimeSection, sizeof kRuntimeSection)) != 0)
      continue;
    const uint64_t at = readLe<uint64_t>(exe, header(i) + 0x18);
    const uint64_t size = readLe<uint64_t>(exe, header(i) + 0x20);
    RuntimeMarker marker;
    if (at > exe.size() || size < sizeof marker ||
        sizeof marker > exe.size() - at)
      break;
    std::memcpy(&marker, exe.data() + at, sizeof marker);
    if (std::strncmp(marker.tag, kRuntimeTag, sizeof marker.tag) != 0)
      break;
    if (marker.planFormatVersion != kPlanFormatVersion)
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "' is a braid-run of plan format ",
          marker.planFormatVersion, " but braidc writes format ",
          kPlanFormatVersion, advice));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'", path, "' is an executable but not braid-run (it has no ",
      kRuntimeSection, " section)", advice));
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
  if (absl::Status s = checkRuntime(*exe, runtimeExe); !s.ok())
    return s;
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
  char trailer[kTrailerBytes];
  putLe64(planBytes.size(), trailer);
  std::memcpy(trailer + 8, kMagic, 8);
  const std::string_view pieces[] = {std::string_view(exe->data(), keep),
                                     planBytes,
                                     std::string_view(trailer, kTrailerBytes)};
  return writeFileAtomically(outPath, pieces, 0755);
}

} // namespace braid
