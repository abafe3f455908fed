//===- ImportSpec.cpp - the braid-import pass -----------------------------===//
#include "passes/Passes.h"

#include "compiler/import/ImportSpec.h"
#include "compiler/spec/SpecLoader.h"

namespace braid {
#define GEN_PASS_DEF_IMPORTSPECPASS
#include "passes/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace braid {
namespace {

struct ImportSpecPass : impl::ImportSpecPassBase<ImportSpecPass> {
  using ImportSpecPassBase::ImportSpecPassBase;
  explicit ImportSpecPass(std::shared_ptr<const spec::ModelSpec> spec)
      : preloaded_(std::move(spec)) {}

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (preloaded_) {
      if (failed(importSpec(*preloaded_, module)))
        signalPassFailure();
      return;
    }
    if (specPath.empty()) {
      module.emitError("braid-import needs a spec: --braid-import=spec=PATH");
      return signalPassFailure();
    }
    absl::StatusOr<spec::ModelSpec> spec = loadSpecFile(specPath);
    if (!spec.ok()) {
      module.emitError() << std::string(spec.status().message());
      return signalPassFailure();
    }
    if (failed(importSpec(*spec, module)))
      signalPassFailure();
  }

private:
  std::shared_ptr<const spec::ModelSpec> preloaded_;
};

} // namespace

std::unique_ptr<Pass>
createImportSpecPass(std::shared_ptr<const spec::ModelSpec> spec) {
  return std::make_unique<ImportSpecPass>(std::move(spec));
}

} // namespace braid
