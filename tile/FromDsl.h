// A DSL kernel (dsl/Ir.h) as the m3idx tile dialect: one func.func in a module, one op per DSL op
// (TileOps.td says which upstream op stands for which). Internal: it speaks MLIR.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/Status.h"
#include "dsl/Ir.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "tile/TileText.h"

namespace m3idx::tile {

// The context must have registerTileDialects' dialects loaded (loadTileDialects does it). With
// `values`, it gets the MLIR value of each DSL value (per ValueId).
StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> fromDsl(const dsl::Kernel &k, mlir::MLIRContext &ctx,
                                                    std::vector<mlir::Value> *values = nullptr);
void loadTileDialects(mlir::MLIRContext &ctx);
// Tile text parsed (and verified) in a context of the tile dialects, `transform` run on it (given
// the diagnostics so far), verified again and printed; an error where any step fails, naming the
// diagnostics. reprintTileText is this with no transform.
StatusOr<std::string> transformTileText(
    const std::string &text, const std::function<Status(mlir::ModuleOp, const std::string &diagnostics)> &transform);
// The builtin type of a DSL element type (the lowering's too).
mlir::Type elemType(mlir::MLIRContext *ctx, dsl::Elem e);

} // namespace m3idx::tile
