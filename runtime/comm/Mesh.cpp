#include "runtime/comm/Mesh.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace braid {

const char *meshAxisName(MeshAxis axis) {
  switch (axis) {
  case MeshAxis::kTP:
    return "tp";
  case MeshAxis::kCP:
    return "cp";
  case MeshAxis::kPP:
    return "pp";
  case MeshAxis::kDP:
    return "dp";
  }
  return "?";
}

int64_t MeshShape::worldSize() const {
  int64_t n = 1;
  for (int64_t s : sizes)
    n *= s;
  return n;
}

std::string MeshShape::describe() const {
  std::vector<std::string> parts;
  for (MeshAxis a : kMeshAxes)
    parts.push_back(absl::StrCat(meshAxisName(a), " ", size(a)));
  std::string out = absl::StrJoin(parts, " x ");
  if (expert > 1)
    absl::StrAppend(&out, " (ep ", expert, " within dp)");
  return out;
}

MeshShape planMesh(const plan::Mesh &mesh) {
  MeshShape shape;
  shape.sizes = {mesh.tp(), mesh.cp(), mesh.pp(), mesh.dp()};
  shape.expert = std::max<int64_t>(1, mesh.ep());
  return shape;
}

MeshCoords meshCoords(const MeshShape &shape, int64_t rank) {
  MeshCoords c{};
  for (MeshAxis a : kMeshAxes) {
    c[static_cast<int>(a)] = rank % shape.size(a);
    rank /= shape.size(a);
  }
  return c;
}

int64_t meshRank(const MeshShape &shape, const MeshCoords &coords) {
  int64_t rank = 0;
  for (int i = kNumMeshAxes - 1; i >= 0; --i)
    rank = rank * shape.sizes[i] + coords[i];
  return rank;
}

std::vector<int64_t> meshGroup(const MeshShape &shape, int64_t rank,
                               MeshAxis axis) {
  MeshCoords c = meshCoords(shape, rank);
  std::vector<int64_t> group;
  for (int64_t k = 0; k < shape.size(axis); ++k) {
    c[static_cast<int>(axis)] = k;
    group.push_back(meshRank(shape, c));
  }
  return group;
}

int64_t meshGroupIndex(const MeshShape &shape, int64_t rank, MeshAxis axis) {
  // The rank's coordinates with the axis removed, as one number.
  MeshCoords c = meshCoords(shape, rank);
  int64_t index = 0;
  for (int i = kNumMeshAxes - 1; i >= 0; --i)
    if (i != static_cast<int>(axis))
      index = index * shape.sizes[i] + c[i];
  return index;
}

std::vector<int64_t> meshDataGroup(const MeshShape &shape, int64_t rank) {
  MeshCoords c = meshCoords(shape, rank);
  std::vector<int64_t> group;
  for (int64_t dp = 0; dp < shape.size(MeshAxis::kDP); ++dp)
    for (int64_t cp = 0; cp < shape.size(MeshAxis::kCP); ++cp) {
      c[static_cast<int>(MeshAxis::kDP)] = dp;
      c[static_cast<int>(MeshAxis::kCP)] = cp;
      group.push_back(meshRank(shape, c));
    }
  return group;
}

int64_t meshDataGroupIndex(const MeshShape &shape, int64_t rank) {
  const MeshCoords c = meshCoords(shape, rank);
  return c[static_cast<int>(MeshAxis::kTP)] +
         shape.size(MeshAxis::kTP) * c[static_cast<int>(MeshAxis::kPP)];
}

namespace {

constexpr int kDP = static_cast<int>(MeshAxis::kDP);
constexpr int kCP = static_cast<int>(MeshAxis::kCP);

// The world ranks of `rank`'s DP group whose DP coordinates `member`
// accepts, in DP order.
template <typename Member>
std::vector<int64_t> dpMembers(const MeshShape &shape, int64_t rank,
                               Member member) {
  MeshCoords c = meshCoords(shape, rank);
  const int64_t mine = c[kDP];
  std::vector<int64_t> group;
  for (int64_t dp = 0; dp < shape.size(MeshAxis::kDP); ++dp)
    if (member(mine, dp)) {
      c[kDP] = dp;
      group.push_back(meshRank(shape, c));
    }
  return group;
}

} // namespace

std::vector<int64_t> meshExpertGroup(const MeshShape &shape, int64_t rank) {
  return dpMembers(shape, rank, [&](int64_t mine, int64_t dp) {
    return dp / shape.expert == mine / shape.expert;
  });
}

// The DP ranks that hold the same experts, each with every CP rank of its
// CP group, in the order (dp / expert) * CP + cp.
std::vector<int64_t> meshExpertDataGroup(const MeshShape &shape,
                                         int64_t rank) {
  MeshCoords c = meshCoords(shape, rank);
  const int64_t mine = c[kDP] % shape.expert;
  std::vector<int64_t> group;
  for (int64_t dp = mine; dp < shape.size(MeshAxis::kDP); dp += shape.expert)
    for (int64_t cp = 0; cp < shape.size(MeshAxis::kCP); ++cp) {
      c[kDP] = dp;
      c[kCP] = cp;
      group.push_back(meshRank(shape, c));
    }
  return group;
}

int64_t meshExpertRank(const MeshShape &shape, int64_t rank) {
  return meshCoords(shape, rank)[kDP] % shape.expert;
}

int64_t meshExpertDataRank(const MeshShape &shape, int64_t rank) {
  const MeshCoords c = meshCoords(shape, rank);
  return c[kDP] / shape.expert * shape.size(MeshAxis::kCP) + c[kCP];
}

// The DP group's index, then which block of it (EP) or which place in the
// blocks (EDP).
int64_t meshExpertGroupIndex(const MeshShape &shape, int64_t rank) {
  const int64_t blocks = shape.size(MeshAxis::kDP) / shape.expert;
  return meshGroupIndex(shape, rank, MeshAxis::kDP) * blocks +
         meshExpertDataRank(shape, rank);
}

int64_t meshExpertDataGroupIndex(const MeshShape &shape, int64_t rank) {
  return meshDataGroupIndex(shape, rank) * shape.expert +
         meshExpertRank(shape, rank);
}

} // namespace braid
