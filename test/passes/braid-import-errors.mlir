// RUN: braid-opt %s --braid-import=spec=%models/llama-tiny.pbtxt --verify-diagnostics

// Import fills an empty module; it refuses to mix a model into existing IR.
// expected-error @+1 {{braid-import expects an empty module}}
module {
  func.func @existing() {
    return
  }
}
