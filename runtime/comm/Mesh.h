// The rank mesh: axes TP (innermost: neighbouring ranks, the fastest
// links), CP, PP and DP (outermost), as Megatron orders them. A plan names
// the axis sizes; a rank derives from its world rank its coordinates and,
// per axis, the group of ranks that differ from it only along that axis.
// Pure logic, shared by the launcher, the runtime and the tests.
//
//   rank = ((dp * PP + pp) * CP + cp) * TP + tp
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/plan/plan.pb.h"

namespace braid {

enum class MeshAxis { kTP = 0, kCP = 1, kPP = 2, kDP = 3 };
inline constexpr int kNumMeshAxes = 4;
// Innermost first: the order in which communicators are created.
inline constexpr std::array<MeshAxis, kNumMeshAxes> kMeshAxes = {
    MeshAxis::kTP, MeshAxis::kCP, MeshAxis::kPP, MeshAxis::kDP};

// "tp", "cp", "pp", "dp".
const char *meshAxisName(MeshAxis axis);

struct MeshShape {
  // Sizes by MeshAxis; each at least 1.
  std::array<int64_t, kNumMeshAxes> sizes = {1, 1, 1, 1};
  // Expert parallel: DP ranks per EP group (1: none); divides size(kDP).
  // Not an axis of the rank order: it splits each DP group in two ways
  // (meshExpertGroup, meshExpertDataGroup).
  int64_t expert = 1;

  int64_t size(MeshAxis axis) const { return sizes[static_cast<int>(axis)]; }
  // The number of ranks: the product of the sizes.
  int64_t worldSize() const;
  // "tp 1 x cp 1 x pp 1 x dp 4".
  std::string describe() const;
};

// The mesh a plan was compiled for (plan.mesh, checked by the loader).
MeshShape planMesh(const plan::Mesh &mesh);

using MeshCoords = std::array<int64_t, kNumMeshAxes>;

// The coordinates of world rank `rank` (0 <= rank < worldSize()).
MeshCoords meshCoords(const MeshShape &shape, int64_t rank);
int64_t meshRank(const MeshShape &shape, const MeshCoords &coords);

// The world ranks of `rank`'s group along `axis`, by their coordinate on
// the axis (so a rank's index in its group is its coordinate).
std::vector<int64_t> meshGroup(const MeshShape &shape, int64_t rank,
                               MeshAxis axis);
// Which group along `axis` `rank` is in: equal for the ranks of one group,
// 0 .. worldSize / size(axis) - 1 over the groups.
int64_t meshGroupIndex(const MeshShape &shape, int64_t rank, MeshAxis axis);

// Context parallel's gradient group (plan.proto MeshAxis DP_CP, Megatron's
// data-parallel group with context parallel): the world ranks that differ
// from `rank` in their DP and CP coordinates only, in the order of
// dp * CP + cp, which is a rank's index in the group.
std::vector<int64_t> meshDataGroup(const MeshShape &shape, int64_t rank);
// Which such group `rank` is in: tp + TP * pp.
int64_t meshDataGroupIndex(const MeshShape &shape, int64_t rank);

// Expert parallel (plan.proto MeshAxis EP and EDP; shape.expert ranks per
// EP group). The EP group: the `expert` consecutive DP ranks of `rank`'s
// DP group that hold every expert once between them, by DP coordinate; a
// rank's index in it is dp % expert. The EDP group, which sums the
// experts' gradients: the DP ranks that hold the same experts as `rank`
// (dp % expert equal) with every CP rank of theirs (as Megatron-Core's
// expert data-parallel group), in the order of (dp / expert) * CP + cp,
// which is a rank's index in it.
std::vector<int64_t> meshExpertGroup(const MeshShape &shape, int64_t rank);
std::vector<int64_t> meshExpertDataGroup(const MeshShape &shape,
                                         int64_t rank);
// Which such group `rank` is in (equal for the ranks of one group) and its
// index in it.
int64_t meshExpertGroupIndex(const MeshShape &shape, int64_t rank);
int64_t meshExpertDataGroupIndex(const MeshShape &shape, int64_t rank);
int64_t meshExpertRank(const MeshShape &shape, int64_t rank);
int64_t meshExpertDataRank(const MeshShape &shape, int64_t rank);

} // namespace braid
