// The checks of each family of kernels; kernelCheck looks names up in all.
#pragma once

#include <string_view>

#include "absl/types/span.h"
#include "kernels/checks/KernelChecks.h"

namespace braid::checks {

struct NamedCheck {
  std::string_view name;
  KernelCheckFn check;
};

absl::Span<const NamedCheck> linearChecks();
absl::Span<const NamedCheck> embeddingChecks();
absl::Span<const NamedCheck> normChecks();
absl::Span<const NamedCheck> attentionChecks();
absl::Span<const NamedCheck> repeatKvChecks();
absl::Span<const NamedCheck> ropeChecks();
absl::Span<const NamedCheck> elementwiseChecks();
absl::Span<const NamedCheck> crossEntropyChecks();
absl::Span<const NamedCheck> optimizerChecks();
// Sequence-parallel layout copies: take_part, stack_parts, unstack_parts.
absl::Span<const NamedCheck> partsChecks();
// Fused kernels (docs/fusion.md).
absl::Span<const NamedCheck> fusedElementwiseChecks();
absl::Span<const NamedCheck> fusedAttentionChecks();
absl::Span<const NamedCheck> fusedLossChecks();
// Mixture of experts: moe_route, moe_permute, moe_unpermute,
// moe_grouped_linear and their gradients.
absl::Span<const NamedCheck> moeChecks();

} // namespace braid::checks
