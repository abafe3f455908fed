//===- BraidDialect.h - the braid dialect -----------------------*- C++ -*-===//
#pragma once

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialects/F64Parameter.h"
#include "dialects/braid/BraidDialect.h.inc"
#include "dialects/braid/BraidEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/braid/BraidAttrs.h.inc"
