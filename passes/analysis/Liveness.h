//===- Liveness.h - live ranges of transient sched buffers ------*- C++ -*-===//
#pragma once

#include <cstdint>
#include <vector>

#include "dialects/sched/SchedOps.h"

namespace braid {

// A transient buffer's live range, in program order counting the ops that
// touch buffers on a stream (sched.launch, sched.collective, sched.send and
// sched.recv) only: from
// its first use to the last such op that is not ordered after all of its
// uses (runtime/plan/StreamOrder.h). On one stream that is its last use;
// across streams, only events order them, never position. A buffer made
// outside a sched.repeat and used in its body is live over the whole body,
// since every iteration uses it.
struct LiveRange {
  sched::AllocOp alloc;
  int64_t bytes = 0;
  int64_t begin = 0;
  int64_t end = 0;

  bool overlaps(const LiveRange &o) const {
    return begin <= o.end && o.begin <= end;
  }
};

// Live ranges of every sched.alloc of `program` that some launch,
// collective or transfer uses; unused allocs are skipped. `uses` receives those ops in
// order. A wait waits for the records of its event before it in program
// order.
std::vector<LiveRange>
computeLiveRanges(sched::ProgramOp program,
                  std::vector<mlir::Operation *> *uses = nullptr);

// Bytes of a static buffer type; -1 when that does not fit in int64.
int64_t bufferBytes(mlir::MemRefType type);

} // namespace braid
