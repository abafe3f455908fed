//===- CompileProgress.h - notes on long compilations -----------*- C++ -*-===//
//
// A deep model can take a while to compile; without a sign of life a user
// cannot tell a slow compilation from a hung one.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "mlir/Pass/PassManager.h"

namespace braid {

// Instruments `pm` for a compiler tool: once the compilation has run for a
// few seconds (--compile-progress-after, default 3), `tool` prints one line
// to stderr, "TOOL: still compiling (3.0 s so far, now in PASS)", and another
// every --compile-progress-every seconds (default 10) after that; the clock
// starts here and stops when `pm` is destroyed. Also times the passes when
// MLIR's --mlir-timing options ask for it (the tool registers them with
// mlir::registerDefaultTimingManagerCLOptions).
void addCompileInstrumentation(mlir::PassManager &pm, llvm::StringRef tool);

} // namespace braid
