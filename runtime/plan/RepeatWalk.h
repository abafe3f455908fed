// Walking a program's instructions as they run: a Repeat's body once per
// iteration, every other instruction once. The loader, the CPU executor and
// the CUDA device walk their own instruction types this way; each has the
// fields `kind`, `count` and `length` of LoadedInstruction, and the loader
// has checked that every body lies within its program.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "runtime/plan/PlanLoader.h"

namespace braid {

// Calls fn(op, iteration) for every run of an op (iteration 0 outside
// bodies) in program order and stops at the first error fn returns.
template <typename Op, typename Fn>
absl::Status forEachRun(const std::vector<Op> &ops, Fn &&fn) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind != LoadedInstruction::Kind::kRepeat) {
      if (absl::Status s = fn(ops[i], int64_t{0}); !s.ok())
        return s;
      continue;
    }
    const size_t begin = i + 1, end = begin + ops[i].length;
    for (int64_t it = 0; it < ops[i].count; ++it)
      for (size_t k = begin; k < end; ++k)
        if (absl::Status s = fn(ops[k], it); !s.ok())
          return s;
    i = end - 1;
  }
  return absl::OkStatus();
}

} // namespace braid
