//===- braid-opt.cpp - run braid passes on MLIR ---------------------------===//
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

#include "dialects/braid/BraidDialect.h"
#include "dialects/sched/SchedDialect.h"
#include "passes/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<braid::BraidDialect, braid::sched::SchedDialect,
                  mlir::func::FuncDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  braid::registerAllBraidPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Braid optimizer driver\n", registry));
}
