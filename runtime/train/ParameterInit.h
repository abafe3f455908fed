// Initial parameter values (docs/numerics.md, "Initial weights"): element i
// of a NORMAL parameter is float(init_std * z_i), z_i the i-th normal draw of
// rng::parameterKey(seed, name); ZEROS and ONES are constants. Values depend
// only on the seed and the name, never on thread count or parameter order.
// A sharded parameter's rank writes its shard's elements of the whole one
// (i the whole tensor's index of each, runtime/plan/ShardLayout.h), so
// every layout starts from the values one rank would.
#pragma once

#include <cstdint>

#include "runtime/comm/Mesh.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/plan/ShardLayout.h"

namespace braid {

class ThreadPool;

// The layout of plan tensor `id` on the rank at mesh coordinates `coords`:
// its Shard's part for the rank's coordinate on the shard's axis (the
// group's size from plan.mesh), or the whole tensor when it has none.
ShardLayout tensorLayout(const LoadedPlan &plan, uint32_t id,
                         const MeshCoords &coords);

// With dp_rows (plan.proto Shard: ZeRO over a tensor-parallel part or an
// expert-parallel share) the rank holds only the rows of its index in the
// DP group (for an EP share, in its EDP group) of the part tensorLayout
// describes: local element i is element dpRowsFirst + i of the part. 0 for
// any other tensor.
int64_t dpRowsFirst(const LoadedPlan &plan, uint32_t id,
                    const MeshCoords &coords);

// Writes the initial value of every PARAMETER of `plan` into `arena`, a
// host image of the plan's memory (LoadedPlan::imageOffset), for
// the rank at mesh coordinates `coords` (Ranks::coords(); all 0 for a
// single rank): of a sharded parameter, the part that rank holds. Spreads
// the work over `pool` when given.
void initParameters(const LoadedPlan &plan, uint8_t *arena, ThreadPool *pool,
                    const MeshCoords &coords = {});

// Writes the initial value of PARAMETER `id` into `out` (its numel floats),
// for arenas that are not host memory.
void initParameter(const LoadedPlan &plan, uint32_t id, float *out,
                   ThreadPool *pool, const MeshCoords &coords = {});

} // namespace braid
