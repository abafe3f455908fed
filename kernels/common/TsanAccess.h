// Telling ThreadSanitizer of memory accesses it cannot see: those that
// libraries built without it (MPI, OpenBLAS) make to Braid's buffers. Each
// call records the access as the calling thread's, now. No-ops unless the
// build is BRAID_SANITIZE=thread (cmake/BraidSanitize.cmake).
#pragma once

#include <cstddef>

#if BRAID_TSAN
// ThreadSanitizer's runtime entry points (GCC knows them as built-ins with
// this signature).
extern "C" void __tsan_read_range(void *addr, long size);
extern "C" void __tsan_write_range(void *addr, long size);
#endif

namespace braid {

inline void tsanRead(const void *p, size_t bytes) {
#if BRAID_TSAN
  if (bytes > 0)
    __tsan_read_range(const_cast<void *>(p), static_cast<long>(bytes));
#else
  (void)p, (void)bytes;
#endif
}

inline void tsanWrite(void *p, size_t bytes) {
#if BRAID_TSAN
  if (bytes > 0)
    __tsan_write_range(p, static_cast<long>(bytes));
#else
  (void)p, (void)bytes;
#endif
}

} // namespace braid
