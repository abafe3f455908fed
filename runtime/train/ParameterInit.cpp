#include "runtime/train/ParameterInit.h"

#include <algorithm>

#include "kernels/common/Random.h"
#include "kernels/cpu/ThreadPool.h"
#include "runtime/plan/PlanChecks.h"

namespace braid {
namespace {

// out[i] for i in [begin, end) is the whole tensor's element
// layout.wholeIndex(rows + i) (`rows`: dpRowsFirst).
void fillNormal(float *out, int64_t begin, int64_t end, uint64_t key,
                double stddev, const ShardLayout &layout, int64_t rows) {
  const int64_t run = layout.runLength();
  for (int64_t i = begin; i < end;) {
    const int64_t r = (rows + i) / run;
    const int64_t stop = std::min(end, (r + 1) * run - rows);
    const int64_t first = layout.wholeStart(r) - r * run + rows;
    for (; i < stop; ++i)
      out[i] = static_cast<float>(
          stddev * rng::normal(key, static_cast<uint64_t>(first + i)));
  }
}

} // namespace

ShardLayout tensorLayout(const LoadedPlan &plan, uint32_t id,
                         const MeshCoords &coords) {
  const plan::Tensor &t = plan.proto.tensors(id);
  if (!t.has_shard())
    return ShardLayout::of(t, 1, 0);
  const plan::MeshAxis axis = t.shard().axis();
  // The plan's axis enum (TP = 1 ...) is MeshAxis + 1; an EP shard's
  // coordinate is the rank's place in its EP group (Mesh.h).
  const int64_t ep = std::max<int64_t>(1, plan.proto.mesh().ep());
  const int64_t coord =
      axis == plan::EP ? coords[static_cast<int>(MeshAxis::kDP)] % ep
                       : coords[static_cast<int>(axis) - 1];
  return ShardLayout::of(t, plan_checks::meshAxisSize(plan.proto.mesh(), axis),
                         coord);
}

int64_t dpRowsFirst(const LoadedPlan &plan, uint32_t id,
                    const MeshCoords &coords) {
  const plan::Tensor &t = plan.proto.tensors(id);
  if (!t.has_shard() || !t.shard().dp_rows())
    return 0;
  const int64_t dp = coords[static_cast<int>(MeshAxis::kDP)];
  if (dpRowsAxis(t.shard()) == plan::DP)
    return dp * plan.descs[id].numel();
  // An EP share's rows: the rank's index in its EDP group (Mesh.h), the
  // DP ranks that hold the same experts with their CP ranks.
  const int64_t ep = std::max<int64_t>(1, plan.proto.mesh().ep());
  const int64_t cp = std::max<int64_t>(1, plan.proto.mesh().cp());
  return ((dp / ep) * cp + coords[static_cast<int>(MeshAxis::kCP)]) *
         plan.descs[id].numel();
}

void initParameter(const LoadedPlan &plan, uint32_t id, float *out,
                   ThreadPool *pool, const MeshCoords &coords) {
  const plan::Tensor &t = plan.proto.tensors(id);
  const int64_t n = plan.descs[id].numel();
  switch (t.param().init()) {
  case plan::ZEROS:
    std::fill(out, out + n, 0.0f);
    break;
  case plan::ONES:
    std::fill(out, out + n, 1.0f);
    break;
  default: {
    if (n == 0)
      break;
    const ShardLayout layout = tensorLayout(plan, id, coords);
    const int64_t rows = dpRowsFirst(plan, id, coords);
    const uint64_t key = rng::parameterKey(plan.proto.train().seed(), t.name());
    const double stddev = t.param().init_std();
    if (pool != nullptr)
      pool->parallelFor(n, 4096, [&](int64_t begin, int64_t end) {
        fillNormal(out, begin, end, key, stddev, layout, rows);
      });
    else
      fillNormal(out, 0, n, key, stddev, layout, rows);
    break;
  }
  }
}

void initParameters(const LoadedPlan &plan, uint8_t *arena, ThreadPool *pool,
                    const MeshCoords &coords) {
  for (uint32_t id : plan.parameters)
    initParameter(plan, id,
                  reinterpret_cast<float *>(arena + plan.imageOffset(id)),
                  pool, coords);
}

} // namespace braid
