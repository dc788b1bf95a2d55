// The host's per-kernel state that its conversion patterns (host/HostPatterns.h) share: the
// function's entry block (where every stack buffer goes), the program id, the dot_tiles b operands
// widened where they are defined, the buffers each converted region yields into, the first error,
// and the wide tiles' buffers (HostTiles.h). One per converted kernel. The host's type converter
// is declared here too. Internal to lowering/.
#pragma once

#include <string>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "lowering/host/HostTiles.h"
#include "mlir/Transforms/DialectConversion.h"

namespace m3idx::lowering {

// The host's types: a tile of at most HostTiles::kPiece lanes is a vector; a wider one a stack
// buffer (memref<N x storage>); scalars and buffers stay as they are.
class HostTypeConverter final : public mlir::TypeConverter {
public:
  HostTypeConverter();
};

struct HostKernelState {
  HostTiles tiles;
  mlir::Value programId;                                      // of the loop over program ids
  llvm::DenseMap<mlir::Value, mlir::Value> widenedRows;       // dot_tiles b (tile form) -> f32 rows
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Value>> yieldInto; // converted for / if
  int shuffleTables = 0;
  std::string error;                 // the first, with the kernel line of its op
  mlir::Operation *failedOp = nullptr; // its op

  // Keeps the first error, naming the op's kernel line; failure() for the pattern to return.
  mlir::LogicalResult fail(mlir::Operation *op, const std::string &what);
  // After an op of the tile form is replaced by `converted` (insertion point after them): a
  // result that some dot_tiles takes as b gets its rows widened here, once.
  void defined(mlir::ImplicitLocOpBuilder &b, mlir::Operation *op, mlir::ValueRange converted);
  // b's rows of k lanes widened to f32 into stack scratch.
  mlir::Value widenRows(mlir::ImplicitLocOpBuilder &b, mlir::Value tile, mlir::Value converted, int64_t k);
};

} // namespace m3idx::lowering
