// main() of every GPU test: runs the tests when a CUDA device is usable and
// otherwise exits with 77, which ctest reports as a skipped test, so the
// suite stays green on machines without a GPU.
#include <cstdio>

#include <cuda_runtime.h>

#include "gtest/gtest.h"

int main(int argc, char **argv) {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("no usable CUDA device (%s): skipping\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "none found");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
