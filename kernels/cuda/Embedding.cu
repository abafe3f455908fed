// embedding and embedding_grad_weight (docs/kernels.md): a table lookup and
// its scatter-add, f32 or bf16 (the gradient table may be f32 over bf16 dy).
//
// An id outside [0, V) yields a zero row and no gradient, as on the CPU.
// With `vocab_shard` the table holds the TP rank's rows [tpRank * V,
// (tpRank + 1) * V) of the vocabulary and ids are shifted by tpRank * V
// first (the kernels' `first`), as on the CPU.
//
// The gradient is deterministic and equal to the CPU's bit for bit: like
// the CPU kernel it buckets the rows of dy by id, keeping row order within
// a bucket, and sums each bucket in that order in f32 (no atomics). The
// buckets come from a stable radix sort of (id, row) pairs (CUB), in the
// launch's workspace: 4 arrays of one i32 per row plus CUB's scratch. When
// the workspace is too small for that, a slower kernel finds each id's
// first row by scanning the ids before it and sums the id's rows in the
// same order.
#include <cuda_runtime.h>

#include <cstdint>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/CudaFamilies.h"
#include "kernels/cuda/Storage.cuh"
#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/LaunchPlan.h"

namespace braid::cuda {
namespace {

const GpuContext &gpuOf(const KernelArgs &args) { return *args.ctx->gpu; }

cudaStream_t streamOf(const GpuContext &gpu) {
  return static_cast<cudaStream_t>(gpu.stream);
}

bool accumulateOf(const KernelArgs &args) {
  return args.params != nullptr && args.params->intOr("accumulate", 0) != 0;
}

// The first vocabulary id of a table of `v` rows: tpRank * v with
// vocab_shard, else 0. A rank's coordinate never changes between runs, so
// it may be a launch argument of a captured graph.
int64_t firstIdOf(const KernelArgs &args, int64_t v) {
  if (args.params == nullptr || args.params->intOr("vocab_shard", 0) == 0 ||
      args.ctx == nullptr)
    return 0;
  return args.ctx->tpRank * v;
}

// --- embedding ------------------------------------------------------------

// Rows are copied as stored (table and y share one dtype).
template <typename T>
__global__ void embeddingKernel(const T *__restrict table,
                                const int32_t *__restrict ids,
                                T *__restrict y, int64_t rows, int64_t v,
                                int64_t d, int64_t first) {
  const int64_t total = rows * d;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / d, c = i - r * d;
    const int64_t id = ids[r] - first;
    y[i] = id >= 0 && id < v ? table[id * d + c] : T(0);
  }
}

void runEmbedding(const KernelArgs &args) {
  const TensorView &table = args.ins[0], &ids = args.ins[1], &y = args.outs[0];
  const int64_t v = table.desc->shape[0], d = table.desc->shape[1];
  const int64_t rows = ids.numel();
  if (rows == 0 || d == 0)
    return;
  const unsigned blocks =
      static_cast<unsigned>(blocksFor(rows * d, kThreads));
  cudaStream_t stream = streamOf(gpuOf(args));
  const int64_t first = firstIdOf(args, v);
  if (table.desc->dtype == DType::kBF16)
    embeddingKernel<uint16_t><<<blocks, kThreads, 0, stream>>>(
        table.bf16(), ids.i32(), y.bf16(), rows, v, d, first);
  else
    embeddingKernel<float><<<blocks, kThreads, 0, stream>>>(
        table.f32(), ids.i32(), y.f32(), rows, v, d, first);
}

// --- embedding_grad_weight --------------------------------------------------

// Sort keys: the id, or V for an id outside [0, V) (sorted last, skipped).
__global__ void makeSortPairs(const int32_t *__restrict ids, int64_t rows,
                              int64_t v, int64_t first,
                              uint32_t *__restrict keys,
                              int32_t *__restrict order) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows;
       r += int64_t{gridDim.x} * blockDim.x) {
    const int64_t id = ids[r] - first;
    keys[r] = static_cast<uint32_t>(id >= 0 && id < v ? id : v);
    order[r] = static_cast<int32_t>(r);
  }
}

// One block per bucket start (grid-stride over sorted positions): the
// bucket's rows, in row order, summed per column in f32; then stored, or
// added to the old value (accumulate), rounding once.
template <typename T, typename U>
__global__ void sumBuckets(const T *__restrict dy,
                           const uint32_t *__restrict keys,
                           const int32_t *__restrict order, int64_t rows,
                           int64_t v, int64_t d, bool accumulate,
                           U *__restrict dtable) {
  for (int64_t pos = blockIdx.x; pos < rows; pos += gridDim.x) {
    const uint32_t key = keys[pos];
    if (key >= v || (pos > 0 && keys[pos - 1] == key))
      continue;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      float acc = load(dy, int64_t{order[pos]} * d + c);
      for (int64_t q = pos + 1; q < rows && keys[q] == key; ++q)
        acc = __fadd_rn(acc, load(dy, int64_t{order[q]} * d + c));
      const int64_t o = int64_t{key} * d + c;
      store(dtable, o, accumulate ? __fadd_rn(load(dtable, o), acc) : acc);
    }
  }
}

// Without workspace: row r leads its id when no row before it has the id;
// the leader's block sums the id's rows from r on, in order.
template <typename T, typename U>
__global__ void sumByScan(const T *__restrict dy,
                          const int32_t *__restrict ids, int64_t rows,
                          int64_t v, int64_t first, int64_t d,
                          bool accumulate, U *__restrict dtable) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int32_t id = ids[r];
    const int64_t local = id - first;
    if (local < 0 || local >= v)
      continue;
    int seen = 0;
    for (int64_t q = threadIdx.x; q < r && !seen; q += blockDim.x)
      seen = ids[q] == id;
    if (__syncthreads_or(seen))
      continue;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      float acc = load(dy, r * d + c);
      for (int64_t q = r + 1; q < rows; ++q)
        if (ids[q] == id)
          acc = __fadd_rn(acc, load(dy, q * d + c));
      const int64_t o = local * d + c;
      store(dtable, o, accumulate ? __fadd_rn(load(dtable, o), acc) : acc);
    }
  }
}

// Bits of the largest key (V).
int keyBits(int64_t v) {
  int bits = 1;
  while (bits < 32 && (int64_t{1} << bits) <= v)
    ++bits;
  return bits;
}

template <typename T, typename U>
void embeddingGradWeight(const KernelArgs &args) {
  const T *dy = static_cast<const T *>(args.ins[0].data);
  const int32_t *ids = args.ins[1].i32();
  U *dtable = static_cast<U *>(args.outs[0].data);
  const bool accumulate = accumulateOf(args);
  const int64_t v = args.outs[0].desc->shape[0];
  const int64_t d = args.outs[0].desc->shape[1];
  const int64_t rows = args.ins[1].numel();
  const int64_t first = firstIdOf(args, v);
  const GpuContext &gpu = gpuOf(args);
  cudaStream_t stream = streamOf(gpu);
  if (v == 0 || d == 0)
    return;
  // Rows no id selects are zero; the buckets overwrite the others.
  if (!accumulate)
    cudaMemsetAsync(dtable, 0, static_cast<size_t>(v * d) * sizeof(U),
                    stream);
  if (rows == 0)
    return;
  const unsigned bucketBlocks =
      static_cast<unsigned>(std::min<int64_t>(rows, kMaxBlocks));

  // Workspace: keys, order, sorted keys, sorted order, CUB's scratch.
  const int64_t arrayBytes = alignUp(rows * 4, 256);
  const int n = static_cast<int>(rows);  // < 2^31 by the check
  const int endBit = keyBits(v);
  size_t sortBytes = 0;
  const cudaError_t sized = cub::DeviceRadixSort::SortPairs(
      nullptr, sortBytes, static_cast<const uint32_t *>(nullptr),
      static_cast<uint32_t *>(nullptr), static_cast<const int32_t *>(nullptr),
      static_cast<int32_t *>(nullptr), n, 0, endBit, stream);
  const int64_t need = 4 * arrayBytes + static_cast<int64_t>(sortBytes);
  if (sized == cudaSuccess && gpu.workspace != nullptr &&
      need <= static_cast<int64_t>(gpu.workspaceBytes)) {
    char *ws = static_cast<char *>(gpu.workspace);
    uint32_t *keys = reinterpret_cast<uint32_t *>(ws);
    int32_t *order = reinterpret_cast<int32_t *>(ws + arrayBytes);
    uint32_t *sortedKeys = reinterpret_cast<uint32_t *>(ws + 2 * arrayBytes);
    int32_t *sortedOrder = reinterpret_cast<int32_t *>(ws + 3 * arrayBytes);
    void *scratch = ws + 4 * arrayBytes;
    makeSortPairs<<<static_cast<unsigned>(blocksFor(rows, kThreads)),
                    kThreads, 0, stream>>>(ids, rows, v, first, keys, order);
    // Stable: rows of one id keep their order.
    if (cub::DeviceRadixSort::SortPairs(scratch, sortBytes, keys, sortedKeys,
                                        order, sortedOrder, n, 0, endBit,
                                        stream) == cudaSuccess) {
      sumBuckets<T, U><<<bucketBlocks, kThreads, 0, stream>>>(
          dy, sortedKeys, sortedOrder, rows, v, d, accumulate, dtable);
      return;
    }
  }
  sumByScan<T, U><<<bucketBlocks, kThreads, 0, stream>>>(
      dy, ids, rows, v, first, d, accumulate, dtable);
}

// dy and dtable are f32, or bf16 with dtable f32 or bf16.
void runEmbeddingGradWeight(const KernelArgs &args) {
  if (args.ins[0].desc->dtype != DType::kBF16)
    embeddingGradWeight<float, float>(args);
  else if (args.outs[0].desc->dtype == DType::kBF16)
    embeddingGradWeight<uint16_t, uint16_t>(args);
  else
    embeddingGradWeight<uint16_t, float>(args);
}

}  // namespace

absl::Status registerEmbeddingKernels(KernelRegistry &registry) {
  return addCudaKernels(registry,
                        {
                            {"embedding", runEmbedding},
                            {"embedding_grad_weight", runEmbeddingGradWeight},
                        });
}

}  // namespace braid::cuda
