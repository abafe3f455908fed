// Initial parameter values (docs/numerics.md, "Initial weights"): element i
// of a NORMAL parameter is float(init_std * z_i), z_i the i-th normal draw of
// rng::parameterKey(seed, name); ZEROS and ONES are constants. Values depend
// only on the seed and the name, never on thread count or parameter order.
// A sharded parameter's rank writes its shard's elements of the whole one,
// so every layout starts from the values one rank would.
#pragma once

#include <cstdint>

#include "runtime/plan/PlanLoader.h"

namespace braid {

class ThreadPool;

// Writes the initial value of every PARAMETER of `plan` into `arena`.
// `shardIndex` is this rank's index along the axis its sharded parameters
// are split over (0 when none is). Spreads the work over `pool` when given.
void initParameters(const LoadedPlan &plan, uint8_t *arena, ThreadPool *pool,
                    int64_t shardIndex = 0);

// Writes the initial value of PARAMETER `id` into `out` (its numel floats),
// for arenas that are not host memory.
void initParameter(const LoadedPlan &plan, uint32_t id, float *out,
                   ThreadPool *pool, int64_t shardIndex = 0);

} // namespace braid
