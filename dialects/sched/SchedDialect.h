//===- SchedDialect.h - the sched dialect -----------------------*- C++ -*-===//
#pragma once

#include "mlir/IR/Dialect.h"

#include "dialects/sched/SchedDialect.h.inc"
