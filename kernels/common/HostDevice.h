// BRAID_HOST_DEVICE marks a function that compiles for the host and, under
// nvcc, for CUDA devices too: the arithmetic both backends must share.
#pragma once

#if defined(__CUDACC__)
#define BRAID_HOST_DEVICE __host__ __device__
#else
#define BRAID_HOST_DEVICE
#endif
