// A pipeline schedule: for every rank of the pipeline, the ordered list of
// what its compute stream runs in one optimizer step. No MLIR here, so that
// the partitioner, the generators, the static check, the simulator and the
// timeline are tested on their own (test/unit/pipeline).
//
// Vocabulary. The model is cut into S = P * V stages, in model order; stage
// 0 holds the embedding, stage S - 1 the loss. Each of the P ranks holds V
// of them, its chunks: chunk c of rank r is its c-th stage in the order the
// schedule family places them (Placement below).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace braid::pipeline {

enum class Family {
  kGPipe,       // all forwards, then all backwards
  kOneFOneB,    // Megatron-Core's 1F1B
  kInterleaved, // Megatron-Core's interleaved 1F1B (V chunks per rank)
  kZbH1,        // zero bubble H1: backward split into B and W, W delayed
  kDualPipeV,   // DeepSeek's DualPipeV: V placement, overlapped F&B pairs
};

// "GPIPE", "ONE_F_ONE_B", ... as the spec spells them, and back.
const char *familyName(Family family);
std::optional<Family> familyNamed(const std::string &name);

enum class Kind {
  kF,  // forward of one micro-batch through one chunk
  kB,  // input gradient only (its weight gradient is a later W)
  kW,  // weight gradient of an earlier B
  kBW, // whole backward: input and weight gradients
  kFB, // a forward and another micro-batch's backward, overlapped
};

// "F", "B", "W", "BW", "FB".
const char *kindName(Kind kind);

struct Entry {
  Kind kind = Kind::kF;
  int64_t mb = 0;    // micro-batch (of the forward, for kFB)
  int64_t chunk = 0; // chunk (of the forward, for kFB)
  // kFB only: the backward's micro-batch and chunk. Its backward is whole
  // (input and weight gradients).
  int64_t bMb = -1;
  int64_t bChunk = -1;

  static Entry f(int64_t mb, int64_t chunk) { return {Kind::kF, mb, chunk}; }
  static Entry b(int64_t mb, int64_t chunk) { return {Kind::kB, mb, chunk}; }
  static Entry w(int64_t mb, int64_t chunk) { return {Kind::kW, mb, chunk}; }
  static Entry bw(int64_t mb, int64_t chunk) { return {Kind::kBW, mb, chunk}; }
  static Entry fb(int64_t mb, int64_t chunk, int64_t bMb, int64_t bChunk) {
    return {Kind::kFB, mb, chunk, bMb, bChunk};
  }
  bool operator==(const Entry &o) const {
    return kind == o.kind && mb == o.mb && chunk == o.chunk && bMb == o.bMb &&
           bChunk == o.bChunk;
  }
  bool operator!=(const Entry &o) const { return !(*this == o); }
};

// Where the stages sit: the stage of chunk c on rank r, and back.
struct Placement {
  int64_t ranks = 1;   // P
  int64_t chunks = 1;  // V: 1, or more for interleaved, 2 for DualPipeV
  bool vShape = false; // DualPipeV: rank r holds stages r and 2P - 1 - r

  int64_t stages() const { return ranks * chunks; }
  int64_t stageOf(int64_t rank, int64_t chunk) const;
  int64_t rankOf(int64_t stage) const;
  int64_t chunkOf(int64_t stage) const;
};

struct Schedule {
  Family family = Family::kOneFOneB;
  Placement placement;
  int64_t microBatches = 1;
  std::vector<std::vector<Entry>> ranks; // ranks[r]: rank r's order
};

// {"0": [{"kind": "F", "mb": 0, "chunk": 0}, ...], "1": [...]}, the
// format of braidc --dump-schedule.
std::string scheduleJson(const Schedule &schedule);

// One rank's order as text, the form the IR carries (braid-schedule):
// entries separated by spaces, each a kind and a micro-batch, with ".c"
// for chunk c where a rank has more than one; a FB pair is its forward
// and its backward joined by '+'. E.g. "F0 F1 BW0 F2 BW1 BW2", or with two
// chunks "F0.0 F0.1 F3.0+BW0.1 B1.1 W1.1".
std::string formatOrder(const std::vector<Entry> &order, bool withChunks);
// The inverse of formatOrder (chunk 0 where a token has none), or an error
// naming the token it cannot read.
absl::StatusOr<std::vector<Entry>> parseOrder(const std::string &text);

} // namespace braid::pipeline
