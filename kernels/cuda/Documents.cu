// document_ids on CUDA (docs/kernels.md): the document of each token of a
// packed row, ids[b, i] = the number of positions j < i of row b whose
// token is `separator`. A separator belongs to the document it ends; the
// first document of each row is 0. The ids feed attention's segment mask.
//
// One block per row (grid-stride over rows) walks the row in tiles of
// kBlock tokens: each warp counts its separators with a ballot, thread 0
// turns the warps' counts into offsets, and every thread adds the
// separators before it to the count carried from the earlier tiles.
// Integer counts: the result is exact and the same on every run. No
// workspace, no host sync, nothing allocated: a CUDA graph may capture it.
#include <cstdint>

#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/RowKernelUtil.cuh"

namespace braid::cuda {
namespace {

using rows::kBlock;
using rows::kWarps;

__global__ void __launch_bounds__(kBlock)
    documentIdsKernel(const int32_t *__restrict__ tokens,
                      int32_t *__restrict__ ids, int64_t b, int64_t s,
                      int64_t separator) {
  // Separators in each warp's part of the tile; then, after thread 0's
  // scan, those in the warps before it.
  __shared__ int32_t before[kWarps];
  __shared__ int32_t tileTotal;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned lanesBelow = (1u << lane) - 1u;
  for (int64_t bi = blockIdx.x; bi < b; bi += gridDim.x) {
    const int32_t *row = tokens + bi * s;
    int32_t *out = ids + bi * s;
    int32_t carry = 0; // separators in the tiles before this one
    for (int64_t t0 = 0; t0 < s; t0 += kBlock) {
      const int64_t i = t0 + threadIdx.x;
      const bool sep = i < s && int64_t{row[i]} == separator;
      const unsigned votes = __ballot_sync(0xffffffffu, sep);
      if (lane == 0)
        before[warp] = __popc(votes);
      __syncthreads();
      if (threadIdx.x == 0) {
        int32_t sum = 0;
        for (int w = 0; w < kWarps; ++w) {
          const int32_t n = before[w];
          before[w] = sum;
          sum += n;
        }
        tileTotal = sum;
      }
      __syncthreads();
      if (i < s)
        out[i] = carry + before[warp] + __popc(votes & lanesBelow);
      carry += tileTotal;
      // before and tileTotal are rewritten by the next tile.
      __syncthreads();
    }
  }
}

void runDocumentIds(const KernelArgs &args) {
  const TensorDesc &desc = *args.ins[0].desc;
  const int64_t b = desc.shape[0], s = desc.shape[1];
  if (b == 0 || s == 0)
    return;
  // An int64 separator outside the i32 range matches no token.
  const int64_t separator = rows::paramsOf(args).intOr("separator", 0);
  documentIdsKernel<<<rows::gridFor(b, 1), kBlock, 0, rows::streamOf(args)>>>(
      args.ins[0].i32(), args.outs[0].i32(), b, s, separator);
}

} // namespace

absl::Status registerDocumentKernels(KernelRegistry &registry) {
  return addCudaKernels(registry, {{"document_ids", runDocumentIds}});
}

} // namespace braid::cuda
