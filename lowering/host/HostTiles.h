// Where the host form's wide tiles live: a tile of more than kPiece lanes has a stack buffer of its
// own (made once per call, in the function's entry block), and is read and written kPiece lanes at
// a time (host/HostTiles.cpp says why). Splats and iota are stored too, but their pieces are made
// where they are used. A value is named twice: `tile`, the tile form's value (its type says lanes
// and element; its defining op whether it is a splat), and `converted`, the host form's (a vector,
// or a wide tile's buffer). One per kernel, in its HostKernelState. Internal to lowering/.
#pragma once

#include <functional>

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace m3idx::lowering {

class HostTiles {
public:
  static constexpr int64_t kPiece = 64;

  void beginFunction(mlir::Block *entry) { entry_ = entry; }

  static bool wide(mlir::Type t); // a tile of more than kPiece lanes
  static bool wide(mlir::Value v) { return wide(v.getType()); }
  static int64_t lanes(mlir::Value tile);
  // A tile's element in memory: bytes for i1 and small floats.
  static mlir::Type storage(mlir::Type elem);
  mlir::Value entryAlloca(mlir::ImplicitLocOpBuilder &b, int64_t n, mlir::Type elem); // once per call
  mlir::Value newBuffer(mlir::ImplicitLocOpBuilder &b, mlir::Value tile); // for a wide result
  // A wide value's buffer; a narrow one stored into scratch.
  mlir::Value buffer(mlir::ImplicitLocOpBuilder &b, mlir::Value converted);
  mlir::Value loadPiece(mlir::ImplicitLocOpBuilder &b, mlir::Value buf, mlir::Type elem, mlir::Value at,
                        int64_t lanes);
  void storePiece(mlir::ImplicitLocOpBuilder &b, mlir::Value buf, mlir::Type elem, mlir::Value at,
                  mlir::Value piece);
  // Lanes [at, at + n) of a tile: made in place for wide splats and iota, else loaded.
  mlir::Value pieceOf(mlir::ImplicitLocOpBuilder &b, mlir::Value tile, mlir::Value converted, mlir::Value at,
                      int64_t n);
  // The host form of a result made in `buf`: the buffer when wide, else loaded from it.
  mlir::Value result(mlir::ImplicitLocOpBuilder &b, mlir::Value tile, mlir::Value buf);
  // body(at, n) for pieces [at, at + n) of `lanes`: a loop over whole pieces, then the tail.
  void forPieces(mlir::ImplicitLocOpBuilder &b, int64_t lanes, int64_t piece,
                 const std::function<void(mlir::Value, int64_t)> &body);
  void copy(mlir::ImplicitLocOpBuilder &b, mlir::Value dst, mlir::Value src, int64_t lanes);
  mlir::scf::ForOp rolledLoop(mlir::ImplicitLocOpBuilder &b, int64_t lo, int64_t hi, mlir::ValueRange inits = {});

private:
  mlir::Block *entry_ = nullptr;
};

} // namespace m3idx::lowering
