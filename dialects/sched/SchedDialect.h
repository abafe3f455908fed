//===- SchedDialect.h - the sched dialect -----------------------*- C++ -*-===//
#pragma once

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialects/F64Parameter.h"
#include "dialects/sched/SchedDialect.h.inc"
#include "dialects/sched/SchedEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/sched/SchedAttrs.h.inc"
