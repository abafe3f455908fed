#include "runtime/device/cpu/CpuArena.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include <sys/mman.h>

#include "absl/strings/str_format.h"

namespace braid {

// Anonymous mappings are zero filled by the kernel and page aligned, and
// untouched pages cost nothing, so they beat calloc + memset for an arena
// that may be many GiB.
absl::StatusOr<CpuArena> CpuArena::create(uint64_t bytes, const char *what) {
  CpuArena arena;
  if (bytes == 0)
    return arena;
  void *p = MAP_FAILED;
  if (bytes <= static_cast<uint64_t>(SIZE_MAX))
    p = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cannot allocate %s: %d bytes (%.2f GiB) were requested and "
        "the system refused (%s); use a machine with more memory or a plan "
        "with a smaller micro-batch or more recomputation",
        what, bytes, static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0),
        std::strerror(errno)));
  arena.data_ = static_cast<uint8_t *>(p);
  arena.size_ = bytes;
  return arena;
}

CpuArena::CpuArena(CpuArena &&other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

CpuArena &CpuArena::operator=(CpuArena &&other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

CpuArena::~CpuArena() { release(); }

void CpuArena::release() {
  if (data_ != nullptr)
    ::munmap(data_, static_cast<size_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

} // namespace braid
