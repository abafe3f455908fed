#include "passes/pipeline/Schedule.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

std::optional<Family> familyNamed(const std::string &name) {
  for (Family f : {Family::kGPipe, Family::kOneFOneB, Family::kInterleaved,
                   Family::kZbH1, Family::kDualPipeV})
    if (name == familyName(f))
      return f;
  return std::nullopt;
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
        absl::StrAppend(&out, ", \"b_mb\": ", e.bMb,
                        ", \"b_chunk\": ", e.bChunk);
      out += "}";
    }
    out += entries.empty() ? "]" : "\n  ]";
  }
  out += "\n}\n";
  return out;
}

namespace {

std::string token(const char *kind, int64_t mb, int64_t chunk,
                  bool withChunks) {
  return withChunks ? absl::StrCat(kind, mb, ".", chunk)
                    : absl::StrCat(kind, mb);
}

// "BW12.1" -> kind, micro-batch, chunk.
bool parseToken(const std::string &text, Kind &kind, int64_t &mb,
                int64_t &chunk) {
  size_t digits = text.find_first_of("0123456789");
  if (digits == std::string::npos)
    return false;
  const std::string name = text.substr(0, digits);
  if (name == "F")
    kind = Kind::kF;
  else if (name == "B")
    kind = Kind::kB;
  else if (name == "W")
    kind = Kind::kW;
  else if (name == "BW")
    kind = Kind::kBW;
  else
    return false;
  const std::string rest = text.substr(digits);
  const size_t dot = rest.find('.');
  chunk = 0;
  if (dot != std::string::npos &&
      (!absl::SimpleAtoi(rest.substr(dot + 1), &chunk) || chunk < 0))
    return false;
  return absl::SimpleAtoi(rest.substr(0, dot), &mb) && mb >= 0;
}

} // namespace

std::string formatOrder(const std::vector<Entry> &order, bool withChunks) {
  std::string out;
  for (const Entry &e : order) {
    if (!out.empty())
      out += ' ';
    if (e.kind == Kind::kFB)
      absl::StrAppend(&out, token("F", e.mb, e.chunk, withChunks), "+",
                      token("BW", e.bMb, e.bChunk, withChunks));
    else
      out += token(kindName(e.kind), e.mb, e.chunk, withChunks);
  }
  return out;
}

absl::StatusOr<std::vector<Entry>> parseOrder(const std::string &text) {
  std::vector<Entry> order;
  const std::vector<std::string> items =
      absl::StrSplit(text, ' ', absl::SkipEmpty());
  for (const std::string &item : items) {
    auto bad = [&] {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", item,
          "' is not an entry; write F, B, W or BW with a "
          "micro-batch and an optional .chunk (F3, BW2.1), or a forward and "
          "a backward joined by + (F4.0+BW1.1)"));
    };
    Entry e;
    const size_t plus = item.find('+');
    if (plus == std::string::npos) {
      if (!parseToken(item, e.kind, e.mb, e.chunk))
        return bad();
    } else {
      Kind f, b;
      if (!parseToken(item.substr(0, plus), f, e.mb, e.chunk) ||
          !parseToken(item.substr(plus + 1), b, e.bMb, e.bChunk) ||
          f != Kind::kF || b != Kind::kBW)
        return bad();
      e.kind = Kind::kFB;
    }
    order.push_back(e);
  }
  return order;
}

} // namespace braid::pipeline
