// The plan format version shared by the emitter (compiler/emit) and the
// loader (runtime/plan). Bump it on any change a loader of the previous
// version would misread.
#pragma once

#include <cstdint>

namespace braid {

inline constexpr uint32_t kPlanFormatVersion = 2;

// Every tensor offset in a plan is a multiple of this.
inline constexpr uint64_t kPlanAlignment = 64;

}  // namespace braid
