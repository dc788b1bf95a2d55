// Runs a target's pass pipeline (kept as data) on an emitted module, optionally recording the IR
// after every pass, as mlir-opt's --mlir-print-ir-after-all would.
#pragma once

#include <string>

#include "core/Status.h"
#include "lowering/Target.h"

namespace mlir {
class ModuleOp;
class MLIRContext;
} // namespace mlir

namespace m3idx::lowering {

// Loads the dialects the conversions (the tile dialect's among them) and the pipelines use.
void loadDialects(mlir::MLIRContext &ctx);
// Makes a context with the dialects, translations and passes every pipeline needs.
std::unique_ptr<mlir::MLIRContext> makeContext();

Status runPipeline(mlir::ModuleOp module, const Target &target, std::string *irAfterEachPass);

} // namespace m3idx::lowering
