#include "runtime/train/ParameterInit.h"

#include <algorithm>

#include "kernels/common/Random.h"
#include "kernels/cpu/ThreadPool.h"

namespace braid {
namespace {

// out[i] for i in [begin, end) is the whole tensor's element first + i.
void fillNormal(float *out, int64_t begin, int64_t end, uint64_t key,
                double stddev, int64_t first) {
  for (int64_t i = begin; i < end; ++i)
    out[i] = static_cast<float>(
        stddev * rng::normal(key, static_cast<uint64_t>(first + i)));
}

} // namespace

void initParameter(const LoadedPlan &plan, uint32_t id, float *out,
                   ThreadPool *pool, int64_t shardIndex) {
  const plan::Tensor &t = plan.proto.tensors(id);
  const int64_t n = plan.descs[id].numel();
  // A shard along dimension 0 is a contiguous run of the whole tensor.
  const int64_t first = t.has_shard() ? shardIndex * n : 0;
  switch (t.param().init()) {
  case plan::ZEROS:
    std::fill(out, out + n, 0.0f);
    break;
  case plan::ONES:
    std::fill(out, out + n, 1.0f);
    break;
  default: {
    const uint64_t key = rng::parameterKey(plan.proto.train().seed(), t.name());
    const double stddev = t.param().init_std();
    if (pool != nullptr)
      pool->parallelFor(n, 4096, [&](int64_t begin, int64_t end) {
        fillNormal(out, begin, end, key, stddev, first);
      });
    else
      fillNormal(out, 0, n, key, stddev, first);
    break;
  }
  }
}

void initParameters(const LoadedPlan &plan, uint8_t *arena, ThreadPool *pool,
                    int64_t shardIndex) {
  for (uint32_t id : plan.parameters)
    initParameter(plan, id,
                  reinterpret_cast<float *>(arena +
                                            plan.proto.tensors(id).offset()),
                  pool, shardIndex);
}

} // namespace braid
