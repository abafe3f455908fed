//===- BraidDialect.cpp - the braid dialect -------------------------------===//
#include "dialects/braid/BraidDialect.h"
#include "dialects/braid/BraidOps.h"

using namespace mlir;
using namespace braid;

#include "dialects/braid/BraidDialect.cpp.inc"

void BraidDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/braid/BraidOps.cpp.inc"
      >();
}
