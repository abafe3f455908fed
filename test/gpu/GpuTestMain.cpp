// main() of every GPU test: runs the tests when a CUDA device and cuBLASLt
// (and, for the tests built NEEDS_NCCL, NCCL) are usable and otherwise exits
// with 77, which ctest reports as a skipped test, so the suite stays green
// on machines without a GPU.
#include <cstdio>
#include <string>

#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "kernels/cuda/CublasLtApi.h"
#if BRAID_GPU_TEST_NEEDS_NCCL
#include "runtime/comm/nccl/NcclApi.h"
#endif

int main(int argc, char **argv) {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("no usable CUDA device (%s): skipping\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "none found");
    return 77;
  }
  if (auto api = braid::cuda::loadCublasLt(); !api.ok()) {
    std::printf("cuBLASLt is not usable (%s): skipping\n",
                std::string(api.status().message()).c_str());
    return 77;
  }
#if BRAID_GPU_TEST_NEEDS_NCCL
  if (auto nccl = braid::nccl::loadNccl(); !nccl.ok()) {
    std::printf("NCCL is not usable (%s): skipping\n",
                std::string(nccl.status().message()).c_str());
    return 77;
  }
#endif
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
