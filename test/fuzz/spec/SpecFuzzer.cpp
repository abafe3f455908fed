// Feeds arbitrary bytes to loadSpecText. Besides not crashing or hanging,
// the loader must keep two promises, checked here:
//  - a spec it accepts is complete: printed and loaded again, it comes back
//    unchanged (every default was filled, and nothing invalid got through);
//  - an error names the input and a position on every line, and quotes the
//    input only in short, printable form.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <google/protobuf/text_format.h>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "compiler/spec/SpecLoader.h"

namespace {

constexpr char kName[] = "fuzz.pbtxt";
constexpr size_t kMaxLineLength = 1024;

void checkReloadsUnchanged(const braid::spec::ModelSpec &spec) {
  std::string printed;
  if (!google::protobuf::TextFormat::PrintToString(spec, &printed))
    std::abort();
  absl::StatusOr<braid::spec::ModelSpec> again =
      braid::loadSpecText(printed, kName);
  if (!again.ok() || again->SerializeAsString() != spec.SerializeAsString())
    std::abort();
}

void checkErrorLines(const absl::Status &status) {
  if (status.code() != absl::StatusCode::kInvalidArgument ||
      status.message().empty())
    std::abort();
  for (absl::string_view line : absl::StrSplit(status.message(), '\n')) {
    // "fuzz.pbtxt:<line>:<column>: <path>: <message>", where user text is
    // quoted in short, printable form.
    if (!absl::StartsWith(line, absl::StrCat(kName, ":")) ||
        line.size() > kMaxLineLength)
      std::abort();
    for (char c : line)
      if (static_cast<unsigned char>(c) < 0x20 ||
          static_cast<unsigned char>(c) >= 0x7f)
        std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  absl::StatusOr<braid::spec::ModelSpec> spec =
      braid::loadSpecText(text, kName);
  if (spec.ok())
    checkReloadsUnchanged(*spec);
  else
    checkErrorLines(spec.status());
  return 0;
}
