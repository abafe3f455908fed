// Flash attention on tensor cores (FlashAttentionTiles.cu): the fast path
// of flash_attention and flash_attention_grad_input (FusedAttention.cu) for
// bf16 storage and head dimensions 64 and 128. The semantics are the
// kernels' of FusedAttention.cu (masks, dropout draws, f32 lse); the
// products run as 16x16x16 bf16 tensor-core tiles with f32 accumulation.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/AttentionCommon.cuh"

namespace braid::cuda::flash_tiles {

// The launch: its geometry (AttentionCommon.cuh), the device step values
// the dropout draws read, and the stream.
struct Launch {
  attention::Geometry g;
  const StepValues *steps;
  cudaStream_t stream;
};

// Whether the tensor-core kernels take a launch of this head dimension and
// storage on the current device (their shared memory must fit it).
bool applies(int64_t dh, bool bf16);

// o and lse of flash_attention.
void forward(const Launch &l, const Bf16 *q, const Bf16 *k, const Bf16 *v,
             Bf16 *o, float *lse);

// dk and dv (one block per kv head and tile of keys), then dq (one block
// per query head and tile of rows). D_i = do_i . o_i must already be
// stashed in dq's slice of each row and head (FusedAttention.cu's kernel
// A); the dq kernel reads it before writing dq.
void backward(const Launch &l, const Bf16 *dout, const Bf16 *q,
              const Bf16 *k, const Bf16 *v, const float *lse, Bf16 *dq,
              Bf16 *dk, Bf16 *dv);

} // namespace braid::cuda::flash_tiles
