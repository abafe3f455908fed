// The defaults of a spec, filled in explicitly so that no later stage has to
// know them. docs/spec-reference.md lists each one.
#pragma once

#include <string>
#include <string_view>

#include "compiler/spec/spec.pb.h"

namespace braid {

// Values a spec gets for fields left out (or, equivalently in proto3, set
// to 0). docs/spec-reference.md says where each one comes from.
struct SpecDefaultValues {
  static constexpr float kNormEps = 1e-5f;
  static constexpr float kRopeTheta = 10000.0f;
  static constexpr float kInitStd = 0.02f;
  static constexpr float kAdamBeta1 = 0.9f;
  static constexpr float kAdamBeta2 = 0.95f;
  static constexpr float kAdamEps = 1e-8f;
  // Used when the display name yields no usable spec name.
  static constexpr const char *kName = "model";
};

// The spec name derived from where it was read: the base name of
// `displayName` without its extension, keeping only letters, digits, '.',
// '_' and '-' ("models/llama3-8b.pbtxt" -> "llama3-8b"), at most 64
// characters; "model" if nothing is left.
std::string defaultSpecName(std::string_view displayName);

// Replaces every unset (zero) field that has a default by that default:
// name, num_kv_heads, norm_eps, rope_theta (ROPE only), init.std, parallel
// degrees, global_batch_size, AdamW betas and eps, lr_schedule.decay and
// train.precision (FP32).
// Also creates the optional messages (parallel, model.init,
// train.lr_schedule) so that has_*() is true for them. The required
// messages model, train and train.adamw are never created: their absence is
// an error the validator reports. Negative, NaN and other invalid values are
// left as they are for the validator to refuse.
void fillSpecDefaults(spec::ModelSpec &spec, std::string_view displayName);

} // namespace braid
