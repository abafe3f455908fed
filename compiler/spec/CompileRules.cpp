// Rules of the `compile` block: the fusion list.
#include "absl/strings/ascii.h"
#include "compiler/spec/FusionList.h"
#include "compiler/spec/SpecValidator.h"

namespace braid {

void validateCompile(const spec::Compile &compile, RuleSink &sink) {
  // Unset (empty) means no fusion; anything written must parse.
  if (absl::StripAsciiWhitespace(compile.fusion()).empty())
    return;
  absl::StatusOr<std::vector<std::string>> names =
      parseFusionNames(compile.fusion());
  if (!names.ok())
    sink.report("compile.fusion", std::string(names.status().message()));
}

} // namespace braid
