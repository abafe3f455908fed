#include "runtime/comm/Mesh.h"

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
  return absl::StrJoin(parts, " x ");
}

MeshShape planMesh(const plan::Mesh &mesh) {
  MeshShape shape;
  shape.sizes = {mesh.tp(), mesh.cp(), mesh.pp(), mesh.dp()};
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

} // namespace braid
