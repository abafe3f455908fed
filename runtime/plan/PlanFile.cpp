#include "runtime/plan/PlanFile.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "runtime/io/Crc32c.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/plan.pb.h"

namespace braid {
namespace {

constexpr char kMagic[8] = {'B', 'R', 'A', 'I', 'D', 'P', 'L', 'N'};
constexpr size_t kHeaderBytes = 12;

std::string redo(PlanSource source) {
  return source == PlanSource::kFile
             ? "recompile the spec with braidc, or copy the file again"
             : "rebuild this executable with braidc --emit=binary";
}

// Whether `bytes` parse as a bare plan of an earlier format version, which
// braidc wrote without the header.
bool isBarePlan(std::string_view bytes) {
  if (bytes.empty() || bytes.size() > (size_t{1} << 31))
    return false;
  plan::Plan plan;
  google::protobuf::LogSilencer quiet;
  return plan.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) &&
         plan.format_version() > 0 &&
         plan.format_version() < kPlanFormatVersion;
}

} // namespace

std::string sealPlan(std::string_view planBytes) {
  const uint32_t crc = crc32c(planBytes);
  std::string out(kMagic, sizeof kMagic);
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  out.append(planBytes);
  return out;
}

absl::StatusOr<std::string_view> unsealPlan(std::string_view bytes,
                                            const std::string &origin,
                                            PlanSource source) {
  if (bytes.size() < kHeaderBytes ||
      std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    if (isBarePlan(bytes))
      return absl::InvalidArgumentError(
          absl::StrCat(origin,
                       " is a plan of an older format, written by an earlier "
                       "braidc without a checksum: ",
                       redo(source)));
    return absl::InvalidArgumentError(absl::StrCat(
        origin, " is not a Braid plan (it does not start with \"BRAIDPLN\")",
        source == PlanSource::kFile
            ? ": pass a .plan file written by braidc (text plans, from "
              "--plan-format=text, are for reading only)"
            : absl::StrCat(": ", redo(source))));
  }
  uint32_t stored = 0;
  for (int i = 3; i >= 0; --i)
    stored = (stored << 8) | static_cast<unsigned char>(bytes[8 + i]);
  std::string_view plan = bytes.substr(kHeaderBytes);
  const uint32_t actual = crc32c(plan);
  if (actual != stored)
    return absl::InvalidArgumentError(
        absl::StrCat(origin, " is damaged: its checksum is ", crc32cHex(stored),
                     " but its contents give ", crc32cHex(actual),
                     " (a changed or missing byte); ", redo(source)));
  return plan;
}

} // namespace braid
