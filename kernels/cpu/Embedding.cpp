// embedding and embedding_grad_weight: a table lookup and its scatter-add;
// document_ids: the document of each token of packed rows.
//
// Ids are validated by the data loader, not per launch. An id outside
// [0, V) still never touches memory outside the table: its output row is
// zero and its gradient row is dropped.
//
// With `vocab_shard` the table is one TP rank's rows [tpRank * V,
// (tpRank + 1) * V) of the whole vocabulary: ids are shifted by tpRank * V
// first, so an id of another rank's shard is one outside [0, V). The
// ranks' outputs then sum to the whole lookup, and their gradient tables
// stack to the whole gradient.
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/KernelFamilies.h"
#include "kernels/cpu/LaunchArgs.h"
#include "kernels/cpu/Parallel.h"
#include "kernels/cpu/Storage.h"
#include "kernels/cpu/VecMath.h"

namespace braid::cpu {
namespace {

// The first vocabulary id of this launch's table of `v` rows: tpRank * v
// with vocab_shard, else 0.
int64_t firstIdOf(const KernelArgs &args, int64_t v) {
  if (paramsOf(args).intOr("vocab_shard", 0) == 0)
    return 0;
  return contextOf(args).tpRank * v;
}

// Rows are copied as stored: the table and y share one dtype.
template <typename T> void runEmbedding(const KernelArgs &args) {
  const T *table = dataOf<T>(args.ins[0]);
  const int32_t *ids = args.ins[1].i32();
  T *y = dataOf<T>(args.outs[0]);
  const int64_t v = args.ins[0].desc->shape[0], d = args.ins[0].desc->shape[1];
  const int64_t rows = args.ins[1].numel();
  const int64_t first = firstIdOf(args, v);
  parallelFor(poolOf(args), rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t id = ids[r] - first;
      if (id >= 0 && id < v)
        convert(table + id * d, y + r * d, d);
      else
        zero(y + r * d, d);
    }
  });
}

// Table rows [v0, v1): each the sum of the dy rows of its bucket, in
// order, in f32; `acc` holds d floats. The sum goes straight into an f32
// dtable when nothing is added to it; otherwise it is formed in acc and
// then added or stored, rounded once when dtable is bf16.
template <typename T, typename U>
BRAID_INLINE void sumBucketsBody(const T *__restrict dy,
                                 const int32_t *bucketStart,
                                 const int32_t *bucketRows, int64_t d,
                                 bool accumulate, int64_t v0, int64_t v1,
                                 float *__restrict acc, U *__restrict dtable) {
  constexpr bool kF32Out = std::is_same_v<U, float>;
  for (int64_t id = v0; id < v1; ++id) {
    U *out = dtable + id * d;
    const int32_t b = bucketStart[id], e = bucketStart[id + 1];
    if (b == e) {
      if (!accumulate)
        zero(out, d);
      continue;
    }
    float *sum = acc;
    if constexpr (kF32Out)
      sum = accumulate ? acc : out;
    convert(dy + int64_t{bucketRows[b]} * d, sum, d);
    for (int32_t i = b + 1; i < e; ++i) {
      const T *src = dy + int64_t{bucketRows[i]} * d;
      for (int64_t j = 0; j < d; ++j)
        sum[j] += load(src, j);
    }
    if (accumulate)
      for (int64_t j = 0; j < d; ++j)
        store(out, j, load(out, j) + acc[j]);
    else if (!kF32Out)
      for (int64_t j = 0; j < d; ++j)
        store(out, j, acc[j]);
  }
}

BRAID_VECTOR_CLONES
void sumBuckets(const float *__restrict dy, const int32_t *bucketStart,
                const int32_t *bucketRows, int64_t d, bool accumulate,
                int64_t v0, int64_t v1, float *__restrict acc,
                float *__restrict dtable) {
  sumBucketsBody(dy, bucketStart, bucketRows, d, accumulate, v0, v1, acc,
                 dtable);
}
BRAID_VECTOR_CLONES
void sumBuckets(const Bf16 *__restrict dy, const int32_t *bucketStart,
                const int32_t *bucketRows, int64_t d, bool accumulate,
                int64_t v0, int64_t v1, float *__restrict acc,
                float *__restrict dtable) {
  sumBucketsBody(dy, bucketStart, bucketRows, d, accumulate, v0, v1, acc,
                 dtable);
}
BRAID_VECTOR_CLONES
void sumBuckets(const Bf16 *__restrict dy, const int32_t *bucketStart,
                const int32_t *bucketRows, int64_t d, bool accumulate,
                int64_t v0, int64_t v1, float *__restrict acc,
                Bf16 *__restrict dtable) {
  sumBucketsBody(dy, bucketStart, bucketRows, d, accumulate, v0, v1, acc,
                 dtable);
}

// Rows of dy are bucketed by id (a counting sort on the calling thread), then
// each table row is the sum of its bucket in row order. Chunks own disjoint
// table rows, so the result is the same for every thread count, and with
// accumulate the old value gets exactly the sum added.
template <typename T, typename U>
void runEmbeddingGradWeight(const KernelArgs &args) {
  const T *dy = dataOf<T>(args.ins[0]);
  const int32_t *ids = args.ins[1].i32();
  U *dtable = dataOf<U>(args.outs[0]);
  const bool accumulate = accumulateOf(args);
  const int64_t v = args.outs[0].desc->shape[0];
  const int64_t d = args.outs[0].desc->shape[1];
  const int64_t rows = args.ins[1].numel();
  if (v == 0 || d == 0)
    return;

  // Row ids within this table; those outside [0, v) are dropped.
  const int64_t first = firstIdOf(args, v);
  auto local = [&](int64_t r) { return int64_t{ids[r]} - first; };
  thread_local std::vector<int32_t> start, order;
  start.assign(v + 1, 0);
  order.resize(rows);
  for (int64_t r = 0; r < rows; ++r)
    if (local(r) >= 0 && local(r) < v)
      ++start[local(r) + 1];
  for (int64_t i = 0; i < v; ++i)
    start[i + 1] += start[i];
  {
    // One fill cursor per bucket.
    thread_local std::vector<int32_t> next;
    next.assign(start.begin(), start.end() - 1);
    for (int64_t r = 0; r < rows; ++r)
      if (local(r) >= 0 && local(r) < v)
        order[next[local(r)]++] = static_cast<int32_t>(r);
  }

  const int32_t *bucketStart = start.data();
  const int32_t *bucketRows = order.data();
  parallelFor(poolOf(args), v, rowGrain(d), [&](int64_t v0, int64_t v1) {
    sumBuckets(dy, bucketStart, bucketRows, d, accumulate, v0, v1,
               threadScratch(0, d), dtable);
  });
}

// dy and dtable are f32, or bf16 with dtable f32 or bf16.
void runEmbeddingGradWeightAny(const KernelArgs &args) {
  if (!isBf16(args.ins[0]))
    runEmbeddingGradWeight<float, float>(args);
  else if (isBf16(args.outs[0]))
    runEmbeddingGradWeight<Bf16, Bf16>(args);
  else
    runEmbeddingGradWeight<Bf16, float>(args);
}

// ids[b, i] = the number of separators among tokens[b, 0 .. i-1].
void runDocumentIds(const KernelArgs &args) {
  const TensorDesc &d = *args.ins[0].desc;
  const int64_t rows = d.shape[0], s = d.shape[1];
  const int64_t separator = paramsOf(args).intOr("separator", 0);
  const int32_t *tokens = args.ins[0].i32();
  int32_t *ids = args.outs[0].i32();
  parallelFor(poolOf(args), rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int32_t doc = 0;
      for (int64_t i = 0; i < s; ++i) {
        ids[r * s + i] = doc;
        doc += tokens[r * s + i] == separator;
      }
    }
  });
}

} // namespace

absl::Status registerEmbeddingKernels(KernelRegistry &registry) {
  return registerAll(
      registry,
      {
          {"embedding", byStorage<runEmbedding<float>, runEmbedding<Bf16>>},
          {"embedding_grad_weight", runEmbeddingGradWeightAny},
          {"document_ids", runDocumentIds},
      });
}

} // namespace braid::cpu
