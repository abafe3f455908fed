#include "kernels/checks/KernelChecks.h"

#include "kernels/checks/CheckFamilies.h"

namespace braid {

// A linear search over the catalogue's few dozen names: it runs once per
// launch at load time, never per step.
KernelCheckFn kernelCheck(std::string_view name) {
  using namespace checks;
  for (auto family : {linearChecks, embeddingChecks, normChecks,
                      attentionChecks, repeatKvChecks, ropeChecks,
                      elementwiseChecks, crossEntropyChecks, optimizerChecks,
                      partsChecks, fusedElementwiseChecks,
                      fusedAttentionChecks, fusedLossChecks, moeChecks})
    for (const NamedCheck &c : family())
      if (c.name == name)
        return c.check;
  return nullptr;
}

} // namespace braid
