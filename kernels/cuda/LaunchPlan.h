// Launch sizes and work splits of the CUDA kernels: pure arithmetic on
// shapes, shared by the host code that launches and the device code that
// walks the work, and unit-tested without a GPU.
//
// Every count is 64-bit: a launch may cover up to 2^48 elements (the bound
// the load-time checks enforce), far beyond what a 32-bit grid could index.
// Kernels loop over their work with grid-stride loops, so a grid never needs
// more blocks than kMaxBlocks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid::cuda {

// Threads per block of the element-wise and row kernels.
inline constexpr int kThreads = 256;
// Rows (or other work items) handled by one warp each, per block.
inline constexpr int kWarpsPerBlock = kThreads / 32;
// Enough blocks to fill an H200 (132 SMs) many times over; more only adds
// scheduling work. Far below the grid limit of 2^31 - 1.
inline constexpr int64_t kMaxBlocks = int64_t{1} << 16;

// Blocks for `work` items at `perBlock` items per block: ceil(work /
// perBlock) clamped to [1, cap]. Callers skip launches with no work.
int64_t blocksFor(int64_t work, int64_t perBlock, int64_t cap = kMaxBlocks);

// Bytes rounded up to a multiple of `align` (a power of two).
int64_t alignUp(int64_t bytes, int64_t align);

// --- column reductions (weight and bias gradients) --------------------------

// Sums over the rows of a [rows, cols] matrix, per column, run in two
// stages: each of `chunks` chunks of `rowsPerChunk` consecutive rows sums its
// rows in order into a partial row of f32 (in the workspace), then a second
// kernel adds the partials of each column in chunk order. The split depends
// on the shape and the workspace size only, never on timing, so the result
// is the same on every run. With one chunk the first stage writes the output
// directly and no workspace is used.
struct ColumnSplit {
  int64_t chunks = 1;
  int64_t rowsPerChunk = 0;
  // Bytes of workspace the partials use: chunks * cols * outputs * 4, or 0.
  int64_t workspaceBytes = 0;
};

// Aim for chunks of at least this many rows, and at most this many chunks.
inline constexpr int64_t kMinRowsPerChunk = 64;
inline constexpr int64_t kMaxChunks = 128;

// `outputs` sums are taken at once (2 for layer_norm's dgamma and dbeta).
ColumnSplit planColumnSplit(int64_t rows, int64_t cols, int outputs,
                            size_t workspaceBytes);

// --- grad_norm ---------------------------------------------------------------

// grad_norm sums squares in double per chunk of `chunkElements` elements of
// one input (the last chunk of an input may be shorter), then the chunk sums
// in order. The partials live in the workspace (8 bytes per chunk); the
// chunk is 4096 elements, as on the CPU, unless the workspace is too small
// for that many partials, in which case it doubles until they fit.
struct NormChunks {
  int64_t chunkElements = 0;
  int64_t chunks = 0;
};

inline constexpr int64_t kNormChunk = 4096;

// `numels` are the inputs' element counts; `count` of them. Fails (chunks
// < 0) only when the workspace cannot hold one partial per input.
NormChunks planNormChunks(const int64_t *numels, int64_t count,
                          size_t workspaceBytes);

// --- workspace of attention --------------------------------------------------

// attention and attention_grad_input keep their [S, S] intermediates in the
// launch's workspace: the first `gemmBytes` stay cuBLASLt's, the rest is
// scratch. Both parts start 256-byte aligned.
struct WorkspaceSplit {
  size_t gemmBytes = 0;
  size_t scratchOffset = 0;
  size_t scratchBytes = 0;
};

inline constexpr size_t kAttentionGemmWorkspace = size_t{4} << 20;

WorkspaceSplit splitAttentionWorkspace(size_t workspaceBytes);

}  // namespace braid::cuda
