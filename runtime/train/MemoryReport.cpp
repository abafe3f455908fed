#include "runtime/train/MemoryReport.h"

#include "absl/strings/str_cat.h"
#include "runtime/train/HumanUnits.h"

namespace braid {

std::string formatMemoryReport(const plan::MemoryReport &m,
                               const std::string &precision) {
  const bool bf16 = precision == "bf16";
  return absl::StrCat("memory per rank", bf16 ? " (bf16)" : "",
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
                      humanBytes(m.arena_bytes()));
}

} // namespace braid
