#include "passes/pipeline/Schedule.h"

#include "absl/strings/str_cat.h"

namespace braid::pipeline {

const char *familyName(Family family) {
  switch (family) {
  case Family::kGPipe:
    return "GPIPE";
  case Family::kOneFOneB:
    return "ONE_F_ONE_B";
  case Family::kInterleaved:
    return "INTERLEAVED";
  case Family::kZbH1:
    return "ZB_H1";
  case Family::kDualPipeV:
    return "DUALPIPE_V";
  }
  return "?";
}

const char *kindName(Kind kind) {
  switch (kind) {
  case Kind::kF:
    return "F";
  case Kind::kB:
    return "B";
  case Kind::kW:
    return "W";
  case Kind::kBW:
    return "BW";
  case Kind::kFB:
    return "FB";
  }
  return "?";
}

int64_t Placement::stageOf(int64_t rank, int64_t chunk) const {
  if (vShape)
    return chunk == 0 ? rank : 2 * ranks - 1 - rank;
  return chunk * ranks + rank;
}

int64_t Placement::rankOf(int64_t stage) const {
  if (vShape)
    return stage < ranks ? stage : 2 * ranks - 1 - stage;
  return stage % ranks;
}

int64_t Placement::chunkOf(int64_t stage) const {
  if (vShape)
    return stage < ranks ? 0 : 1;
  return stage / ranks;
}

std::string scheduleJson(const Schedule &schedule) {
  std::string out = "{";
  for (size_t r = 0; r < schedule.ranks.size(); ++r) {
    absl::StrAppend(&out, r == 0 ? "" : ",", "\n  \"", r, "\": [");
    const std::vector<Entry> &entries = schedule.ranks[r];
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry &e = entries[i];
      absl::StrAppend(&out, i == 0 ? "\n    " : ",\n    ", "{\"kind\": \"",
                      kindName(e.kind), "\", \"mb\": ", e.mb,
                      ", \"chunk\": ", e.chunk);
      if (e.kind == Kind::kFB)
        absl::StrAppend(&out, ", \"b_mb\": ", e.bMb, ", \"b_chunk\": ",
                        e.bChunk);
      out += "}";
    }
    out += entries.empty() ? "]" : "\n  ]";
  }
  out += "\n}\n";
  return out;
}

} // namespace braid::pipeline
