// The m3idx tile dialect (TileOps.td): the ops of the DSL upstream MLIR has none for. Internal:
// it speaks MLIR (the compiler's side; the runtime never includes it).
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tile/TileDialect.h.inc"
#include "tile/TileEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tile/TileAttrs.h.inc"

#define GET_OP_CLASSES
#include "tile/TileOps.h.inc"

namespace m3idx::tile {

// The dialects a tile kernel uses: this one, func, arith, scf, tensor, memref.
void registerTileDialects(mlir::DialectRegistry &registry);

// A tile type's layout: its tensor encoding, Blocked where it has none (before a layout pass).
Layout layoutOf(mlir::Type tile);
// The tile type with that layout as its encoding.
mlir::RankedTensorType withLayout(mlir::Type tile, Layout layout);
// A kernel's warps per program: its m3idx.warps (1 without one); an error on `fn` and failure
// outside [1, 32], which no program of either GPU target runs.
mlir::FailureOr<int64_t> warpsOf(mlir::func::FuncOp fn);

} // namespace m3idx::tile
