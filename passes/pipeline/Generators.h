// The schedule families' generators: each rank's order of F, B, W and FB
// entries for P ranks, V chunks per rank and M micro-batches.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/pipeline/Schedule.h"

namespace braid::pipeline {

// The schedule of `family`, or an error that says what to change (too few
// micro-batches for the family, V where the family has no chunks, ...).
// `chunks` is the spec's virtual_stages: 1 but for kInterleaved (>= 2);
// kDualPipeV always has 2 and takes 1 here (its V placement is implied).
absl::StatusOr<Schedule> makeSchedule(Family family, int64_t ranks,
                                      int64_t chunks, int64_t microBatches);

// One rank's order, each family's own generator (arguments checked by
// makeSchedule).
std::vector<Entry> gpipeOrder(int64_t rank, int64_t ranks, int64_t mbs);
std::vector<Entry> oneFOneBOrder(int64_t rank, int64_t ranks, int64_t mbs);
std::vector<Entry> interleavedOrder(int64_t rank, int64_t ranks, int64_t chunks,
                                    int64_t mbs);
std::vector<Entry> zbH1Order(int64_t rank, int64_t ranks, int64_t mbs);
std::vector<Entry> dualPipeVOrder(int64_t rank, int64_t ranks, int64_t mbs);

} // namespace braid::pipeline
