// How the CUDA backend maps a program's streams and counter events onto CUDA
// streams and CUDA events. Pure logic, without CUDA, so that it is tested on
// machines without a GPU.
//
// A plan's events are counters (docs/plan-format.md): `wait e` on stream s
// is released once as many `record e` have run as precede the wait in
// program order. A CUDA event is not a counter: a stream waiting on it waits
// for one particular record. The runtime enqueues a program in program order
// from one host thread, so every record preceding a wait is already enqueued
// when the wait is, and the wait becomes: for every other stream that records
// e before it, wait for the last such record on that stream. Records on the
// waiting stream itself need nothing (a stream runs in order).
//
// When the records of e on streams other than s all lie on one stream, that
// is exactly the counter rule (that stream's records finish in order). When
// they lie on several streams, the counter rule lets whichever records finish
// first release the wait, an order that depends on timing; the runtime then
// waits for all preceding records, one valid order among those the counter
// rule allows, and refuses to freeze it into a CUDA graph (graphRefusal).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/plan/PlanLoader.h"

namespace braid {

// The event work of one instruction. Launches need none and are not listed.
struct EventOp {
  enum class Kind { kRecord, kWait };
  Kind kind = Kind::kRecord;
  // The instruction's index in the program and its stream.
  uint32_t instruction = 0;
  uint32_t stream = 0;
  // kRecord: the CUDA event (slot) this record instruction records.
  uint32_t slot = 0;
  // kWait: the slots the stream waits for (possibly none).
  std::vector<uint32_t> waitSlots;
};

struct StreamSchedule {
  // In program order. Records no wait depends on are left out, so a
  // one-stream program has no event work at all.
  std::vector<EventOp> eventOps;
  // CUDA events the program needs (slots 0..numSlots-1).
  uint32_t numSlots = 0;
  // The streams the program uses, ascending; stream 0 always (the runtime
  // orders its own copies on it, and forks the others from it).
  std::vector<uint32_t> streams;
  // Why one CUDA graph cannot express the program's order (a sentence
  // naming the instruction, event and streams), or nullopt when it can.
  std::optional<std::string> graphRefusal;
};

// The schedule of `program`, plan.programs[programIndex] of a validated plan
// with `numStreams` streams.
StreamSchedule scheduleProgram(const LoadedProgram &program, int programIndex,
                               uint32_t numStreams);

} // namespace braid
