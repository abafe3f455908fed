#include "runtime/train/MemoryReport.h"

#include "absl/strings/str_cat.h"
#include "runtime/train/HumanUnits.h"

namespace braid {

std::string formatMemoryReport(const plan::MemoryReport &m) {
  return absl::StrCat("memory per rank: parameters ",
                      humanBytes(m.parameter_bytes()), " | gradients ",
                      humanBytes(m.gradient_bytes()), " | optimizer state ",
                      humanBytes(m.optimizer_bytes()), " | inputs ",
                      humanBytes(m.input_bytes()), " | activations peak ",
                      humanBytes(m.activation_peak_bytes()), " (saved ",
                      humanBytes(m.saved_activation_bytes()), ") | arena ",
                      humanBytes(m.arena_bytes()));
}

} // namespace braid
