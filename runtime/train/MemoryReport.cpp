#include "runtime/train/MemoryReport.h"

#include "absl/strings/str_cat.h"
#include "runtime/train/HumanUnits.h"

namespace braid {

std::string formatMemoryReport(const plan::MemoryReport &m,
                               const std::string &precision,
                               int64_t pipelineRank) {
  const bool bf16 = precision == "bf16";
  std::string notes;
  if (pipelineRank >= 0)
    notes = absl::StrCat("pipeline rank ", pipelineRank);
  if (bf16)
    notes = notes.empty() ? "bf16" : absl::StrCat(notes, ", bf16");
  return absl::StrCat("memory per rank",
                      notes.empty() ? "" : absl::StrCat(" (", notes, ")"),
                      ": parameters ", humanBytes(m.parameter_bytes()),
                      bf16 || m.weight_copy_bytes() > 0
                          ? absl::StrCat(" | weight copies ",
                                         humanBytes(m.weight_copy_bytes()))
                          : std::string(),
                      " | gradients ",
                      humanBytes(m.gradient_bytes()), " | optimizer state ",
                      humanBytes(m.optimizer_bytes()), " | inputs ",
                      humanBytes(m.input_bytes()), " | activations peak ",
                      humanBytes(m.activation_peak_bytes()), " (saved ",
                      humanBytes(m.saved_activation_bytes()), ") | arena ",
                      humanBytes(m.arena_bytes()),
                      m.host_bytes() > 0
                          ? absl::StrCat(" | host arena ",
                                         humanBytes(m.host_bytes()))
                          : std::string());
}

} // namespace braid
