// The plan format version shared by the emitter (compiler/emit) and the
// loader (runtime/plan). Bump it on any change a loader of the previous
// version would misread.
#pragma once

#include <cstdint>

namespace braid {

inline constexpr uint32_t kPlanFormatVersion = 13;

// The largest arena a plan may ask for: the 128 TiB of user address space
// an x86-64 process has with 4-level paging.
inline constexpr uint64_t kMaxArenaBytes = uint64_t{1} << 47;

// Every tensor offset in a plan is a multiple of this.
inline constexpr uint64_t kPlanAlignment = 64;

}  // namespace braid
