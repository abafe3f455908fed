// The memory of one rank on the CPU: a single zero-filled allocation that
// holds every tensor of the plan at the offset the compiler chose. The host
// arena of offloaded activations (plan.memory.host_bytes) is a second one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace braid {

class CpuArena {
public:
  // Allocates `bytes` bytes, 64-byte aligned (page aligned in fact) and zero
  // filled. ResourceExhausted, naming the size asked for, when the system
  // refuses; `what` names the arena in that message. An arena of 0 bytes
  // is valid and holds no memory.
  static absl::StatusOr<CpuArena> create(uint64_t bytes,
                                         const char *what = "the arena");

  CpuArena() = default;
  CpuArena(CpuArena &&other) noexcept;
  CpuArena &operator=(CpuArena &&other) noexcept;
  CpuArena(const CpuArena &) = delete;
  CpuArena &operator=(const CpuArena &) = delete;
  ~CpuArena();

  uint8_t *data() const { return data_; }
  uint64_t size() const { return size_; }

private:
  void release();

  uint8_t *data_ = nullptr;
  uint64_t size_ = 0;
};

} // namespace braid
