//===- F64Parameter.h - a double as an attribute parameter ------*- C++ -*-===//
//
// Attribute storage hashes and compares its parameters, and a plain double
// has no llvm::hash_value (and a NaN would compare unequal to itself). F64
// holds the double and is hashed and compared by its bits; it converts to
// and from double, so the attributes' accessors return doubles
// (F64Parameter.td).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/bit.h"

namespace braid {

class F64 {
public:
  F64(double value = 0.0) : value_(value) {}
  operator double() const { return value_; }
  bool operator==(const F64 &other) const { return bits() == other.bits(); }
  friend llvm::hash_code hash_value(const F64 &f) {
    return llvm::hash_value(f.bits());
  }

private:
  uint64_t bits() const { return llvm::bit_cast<uint64_t>(value_); }
  double value_;
};

} // namespace braid
