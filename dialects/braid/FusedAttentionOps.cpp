//===- FusedAttentionOps.cpp - verifiers of the fused attention ops -----------===//
#include "dialects/braid/BraidOps.h"
#include "dialects/braid/VerifyUtils.h"

using namespace mlir;
using namespace braid;
using namespace braid::verify;
