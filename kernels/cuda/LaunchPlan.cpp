#include "kernels/cuda/LaunchPlan.h"

#include <algorithm>

namespace braid::cuda {

int64_t blocksFor(int64_t work, int64_t perBlock, int64_t cap) {
  if (work <= 0 || perBlock <= 0)
    return 1;
  const int64_t blocks = work / perBlock + (work % perBlock != 0);
  return std::clamp<int64_t>(blocks, 1, std::max<int64_t>(cap, 1));
}

int64_t alignUp(int64_t bytes, int64_t align) {
  return (bytes + align - 1) / align * align;
}

ColumnSplit planColumnSplit(int64_t rows, int64_t cols, int outputs,
                            size_t workspaceBytes) {
  ColumnSplit split;
  split.rowsPerChunk = rows;
  if (rows <= kMinRowsPerChunk || cols <= 0 || outputs <= 0)
    return split;
  int64_t chunks = std::min<int64_t>(
      kMaxChunks, (rows + kMinRowsPerChunk - 1) / kMinRowsPerChunk);
  // Partials of one chunk: one f32 per column and output.
  const int64_t perChunk = cols * outputs * 4;
  chunks = std::min<int64_t>(chunks,
                             static_cast<int64_t>(workspaceBytes) / perChunk);
  if (chunks <= 1)
    return split;
  // Equal chunks, then as many as that size needs: no chunk is empty.
  split.rowsPerChunk = (rows + chunks - 1) / chunks;
  split.chunks = (rows + split.rowsPerChunk - 1) / split.rowsPerChunk;
  split.workspaceBytes = split.chunks * perChunk;
  return split;
}

namespace {

int64_t chunksOf(const int64_t *numels, int64_t count, int64_t chunk) {
  int64_t total = 0;
  for (int64_t i = 0; i < count; ++i)
    total += (numels[i] + chunk - 1) / chunk;
  return total;
}

}  // namespace

NormChunks planNormChunks(const int64_t *numels, int64_t count,
                          size_t workspaceBytes) {
  const int64_t capacity = static_cast<int64_t>(workspaceBytes / 8);
  int64_t largest = 0;
  for (int64_t i = 0; i < count; ++i)
    largest = std::max(largest, numels[i]);
  NormChunks plan;
  plan.chunkElements = kNormChunk;
  plan.chunks = chunksOf(numels, count, plan.chunkElements);
  // Doubling the chunk at least halves the chunks of every input that has
  // more than one; once one chunk covers the largest input nothing shrinks.
  while (plan.chunks > capacity && plan.chunkElements < largest) {
    plan.chunkElements *= 2;
    plan.chunks = chunksOf(numels, count, plan.chunkElements);
  }
  if (plan.chunks > capacity)
    plan.chunks = -1;
  return plan;
}

WorkspaceSplit splitAttentionWorkspace(size_t workspaceBytes) {
  WorkspaceSplit split;
  split.gemmBytes =
      std::min(kAttentionGemmWorkspace, workspaceBytes / 2) / 256 * 256;
  split.scratchOffset = split.gemmBytes;
  split.scratchBytes = workspaceBytes > split.scratchOffset
                           ? (workspaceBytes - split.scratchOffset) / 256 * 256
                           : 0;
  return split;
}

}  // namespace braid::cuda
