// Rules of the `compile` block: the fusion list and the recompute policy.
#include "absl/strings/ascii.h"
#include "compiler/spec/FusionList.h"
#include "compiler/spec/RecomputePolicy.h"
#include "compiler/spec/SpecValidator.h"

namespace braid {

void validateCompile(const spec::Compile &compile, RuleSink &sink) {
  absl::StatusOr<std::vector<RecomputePolicy>> recompute =
      parseRecomputeStages(compile.recompute());
  if (!recompute.ok())
    sink.report("compile.recompute",
                std::string(recompute.status().message()));
  // Unset (empty) means no fusion; anything written must parse.
  if (absl::StripAsciiWhitespace(compile.fusion()).empty())
    return;
  absl::StatusOr<std::vector<std::string>> names =
      parseFusionNames(compile.fusion());
  if (!names.ok())
    sink.report("compile.fusion", std::string(names.status().message()));
}

} // namespace braid
