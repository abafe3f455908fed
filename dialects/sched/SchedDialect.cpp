//===- SchedDialect.cpp - the sched dialect -------------------------------===//
#include "dialects/sched/SchedDialect.h"
#include "dialects/sched/SchedOps.h"

using namespace mlir;
using namespace braid::sched;

#include "dialects/sched/SchedDialect.cpp.inc"

void SchedDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/sched/SchedOps.cpp.inc"
      >();
}
