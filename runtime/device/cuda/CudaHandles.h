// Owning wrappers for the CUDA objects the backend creates: each releases
// its object when destroyed and can only be moved. Release errors are
// ignored: they come from a context that is already broken, and the error
// that broke it has been reported.
#pragma once

#include <utility>

#include <cuda_runtime_api.h>

namespace braid {

template <typename T, void (*Release)(T)> class CudaHandle {
public:
  CudaHandle() = default;
  explicit CudaHandle(T handle) : handle_(handle) {}
  CudaHandle(CudaHandle &&other) noexcept
      : handle_(std::exchange(other.handle_, T{})) {}
  CudaHandle &operator=(CudaHandle &&other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, T{});
    }
    return *this;
  }
  CudaHandle(const CudaHandle &) = delete;
  CudaHandle &operator=(const CudaHandle &) = delete;
  ~CudaHandle() { reset(); }

  T get() const { return handle_; }
  explicit operator bool() const { return handle_ != T{}; }
  void reset() {
    if (handle_ != T{})
      Release(handle_);
    handle_ = T{};
  }

private:
  T handle_{};
};

namespace cuda_release {
inline void deviceMemory(void *p) { (void)cudaFree(p); }
inline void pinnedMemory(void *p) { (void)cudaFreeHost(p); }
inline void stream(cudaStream_t s) { (void)cudaStreamDestroy(s); }
inline void event(cudaEvent_t e) { (void)cudaEventDestroy(e); }
inline void graph(cudaGraph_t g) { (void)cudaGraphDestroy(g); }
inline void graphExec(cudaGraphExec_t g) { (void)cudaGraphExecDestroy(g); }
} // namespace cuda_release

using DeviceMemory = CudaHandle<void *, cuda_release::deviceMemory>;
using PinnedMemory = CudaHandle<void *, cuda_release::pinnedMemory>;
using CudaStream = CudaHandle<cudaStream_t, cuda_release::stream>;
using CudaEvent = CudaHandle<cudaEvent_t, cuda_release::event>;
using CudaGraph = CudaHandle<cudaGraph_t, cuda_release::graph>;
using CudaGraphExec = CudaHandle<cudaGraphExec_t, cuda_release::graphExec>;

} // namespace braid
