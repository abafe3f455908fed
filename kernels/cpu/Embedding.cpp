// embedding and embedding_grad_weight: a table lookup and its scatter-add.
//
// Ids are validated by the data loader, not per launch. An id outside
// [0, V) still never touches memory outside the table: its output row is
// zero and its gradient row is dropped.
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/LaunchChecker.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

std::vector<int64_t> idsThenDim(const TensorDesc &ids, int64_t d) {
  std::vector<int64_t> s = ids.shape;
  s.push_back(d);
  return s;
}

absl::Status checkEmbedding(const KernelSignature &sig) {
  LaunchChecker c("embedding", sig);
  BRAID_KERNEL_TRY(c.inputs({"table", "ids"}));
  BRAID_KERNEL_TRY(c.outputs({"y"}));
  Operand table = c.in(0), ids = c.in(1), y = c.out(0);
  BRAID_KERNEL_TRY(c.dtype(table, DType::kF32));
  BRAID_KERNEL_TRY(c.dtype(ids, DType::kI32));
  BRAID_KERNEL_TRY(c.dtype(y, DType::kF32));
  BRAID_KERNEL_TRY(c.rank(table, 2, "[V, D]"));
  return c.shape(y, idsThenDim(*ids.desc, table.dim(1)),
                 "(the shape of ids, then the table's D)");
}

void runEmbedding(const KernelArgs &args) {
  const float *table = args.ins[0].f32();
  const int32_t *ids = args.ins[1].i32();
  float *y = args.outs[0].f32();
  const int64_t v = args.ins[0].desc->shape[0], d = args.ins[0].desc->shape[1];
  const int64_t rows = args.ins[1].numel();
  parallelFor(poolOf(args), rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t id = ids[r];
      if (id >= 0 && id < v)
        std::memcpy(y + r * d, table + id * d, d * sizeof(float));
      else
        std::memset(y + r * d, 0, d * sizeof(float));
    }
  });
}

absl::Status checkEmbeddingGradWeight(const KernelSignature &sig) {
  LaunchChecker c("embedding_grad_weight", sig);
  BRAID_KERNEL_TRY(c.inputs({"dy", "ids"}));
  BRAID_KERNEL_TRY(c.outputs({"dtable"}));
  BRAID_KERNEL_TRY(c.accumulateParam());
  Operand dy = c.in(0), ids = c.in(1), dtable = c.out(0);
  BRAID_KERNEL_TRY(c.dtype(dy, DType::kF32));
  BRAID_KERNEL_TRY(c.dtype(ids, DType::kI32));
  BRAID_KERNEL_TRY(c.dtype(dtable, DType::kF32));
  BRAID_KERNEL_TRY(c.rank(dtable, 2, "[V, D]"));
  BRAID_KERNEL_TRY(c.shape(dy, idsThenDim(*ids.desc, dtable.dim(1)),
                           "(the shape of ids, then dtable's D)"));
  if (ids.desc->numel() > INT32_MAX)
    return c.error(absl::StrCat(ids.label, " has ", ids.desc->numel(),
                                " elements, more than 2^31 - 1"));
  return absl::OkStatus();
}

// Table rows [v0, v1): each the sum of the dy rows of its bucket, in
// order; `acc` holds d floats.
BRAID_VECTOR_CLONES
void sumBuckets(const float *__restrict dy, const int32_t *bucketStart,
                const int32_t *bucketRows, int64_t d, bool accumulate,
                int64_t v0, int64_t v1, float *__restrict acc,
                float *__restrict dtable) {
  for (int64_t id = v0; id < v1; ++id) {
    float *out = dtable + id * d;
    const int32_t b = bucketStart[id], e = bucketStart[id + 1];
    if (b == e) {
      if (!accumulate)
        std::memset(out, 0, d * sizeof(float));
      continue;
    }
    float *sum = accumulate ? acc : out;
    std::memcpy(sum, dy + int64_t{bucketRows[b]} * d, d * sizeof(float));
    for (int32_t i = b + 1; i < e; ++i) {
      const float *src = dy + int64_t{bucketRows[i]} * d;
      for (int64_t j = 0; j < d; ++j)
        sum[j] += src[j];
    }
    if (accumulate)
      for (int64_t j = 0; j < d; ++j)
        out[j] += acc[j];
  }
}

// Rows of dy are bucketed by id (a counting sort on the calling thread), then
// each table row is the sum of its bucket in row order. Chunks own disjoint
// table rows, so the result is the same for every thread count, and with
// accumulate the old value gets exactly the sum added.
void runEmbeddingGradWeight(const KernelArgs &args) {
  const float *dy = args.ins[0].f32();
  const int32_t *ids = args.ins[1].i32();
  float *dtable = args.outs[0].f32();
  const bool accumulate = accumulateOf(args);
  const int64_t v = args.outs[0].desc->shape[0];
  const int64_t d = args.outs[0].desc->shape[1];
  const int64_t rows = args.ins[1].numel();
  if (v == 0 || d == 0)
    return;

  thread_local std::vector<int32_t> start, order;
  start.assign(v + 1, 0);
  order.resize(rows);
  for (int64_t r = 0; r < rows; ++r)
    if (ids[r] >= 0 && ids[r] < v)
      ++start[ids[r] + 1];
  for (int64_t i = 0; i < v; ++i)
    start[i + 1] += start[i];
  {
    // One fill cursor per bucket.
    thread_local std::vector<int32_t> next;
    next.assign(start.begin(), start.end() - 1);
    for (int64_t r = 0; r < rows; ++r)
      if (ids[r] >= 0 && ids[r] < v)
        order[next[ids[r]]++] = static_cast<int32_t>(r);
  }

  const int32_t *bucketStart = start.data();
  const int32_t *bucketRows = order.data();
  parallelFor(poolOf(args), v, rowGrain(d), [&](int64_t v0, int64_t v1) {
    sumBuckets(dy, bucketStart, bucketRows, d, accumulate, v0, v1,
               threadScratch(0, d), dtable);
  });
}

} // namespace

absl::Status registerEmbeddingKernels(KernelRegistry &registry) {
  return registerAll(
      registry, {
                    {"embedding", Device::kCPU, checkEmbedding, runEmbedding},
                    {"embedding_grad_weight", Device::kCPU,
                     checkEmbeddingGradWeight, runEmbeddingGradWeight},
                });
}

} // namespace braid::cpu
