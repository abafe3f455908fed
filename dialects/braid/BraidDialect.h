//===- BraidDialect.h - the braid dialect -----------------------*- C++ -*-===//
#pragma once

#include "mlir/IR/Dialect.h"

#include "dialects/braid/BraidDialect.h.inc"
