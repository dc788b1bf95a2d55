// Where the host form's wide tiles live: a tile of more than kPiece lanes has a stack buffer of its
// own (made once per call, in the function's entry block), and is read and written kPiece lanes at
// a time (host/HostTiles.cpp says why). Splats, constants and iota are not stored: their pieces are
// made where they are used. One per kernel, owned by its HostProgram. Internal to lowering/.
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "lowering/EmitterImpl.h"

namespace m3idx::lowering {

class HostTiles {
public:
  static constexpr int64_t kPiece = 64;

  explicit HostTiles(Emitter &e) : e_(e), b_(e.builder()), k_(e.kernel()), values_(e.values()) {}
  void beginFunction(mlir::Block *entry) { entry_ = entry; }

  bool wide(dsl::ValueId v) const;
  mlir::Value entryAlloca(int64_t n, mlir::Type elem); // scratch, allocated once per call
  mlir::Type storage(Elem e); // a tile's element in memory: bytes for i1 and small floats
  mlir::Value newBuffer(dsl::ValueId v);
  mlir::Value buffer(dsl::ValueId v); // a wide value's buffer; a narrow one stored into scratch
  mlir::Value loadPiece(mlir::Value buf, Elem e, mlir::Value at, int64_t lanes);
  void storePiece(mlir::Value buf, Elem e, mlir::Value at, mlir::Value piece);
  mlir::Value loadWhole(mlir::Value buf, dsl::ValueId v);
  // Lanes [at, at + n) of wide value v: made in place for splats, constants and iota, else loaded.
  mlir::Value pieceOf(dsl::ValueId v, mlir::Value at, int64_t n);
  void setResult(dsl::ValueId v, mlir::Value buf); // wide: the buffer; narrow: loaded from it
  // body(at, n) for pieces [at, at + n) of `lanes`: a loop over whole pieces, then the tail.
  void forPieces(int64_t lanes, int64_t piece, const std::function<void(mlir::Value, int64_t)> &body);
  void copy(mlir::Value dst, mlir::Value src, int64_t lanes);
  mlir::scf::ForOp rolledLoop(int64_t lo, int64_t hi, mlir::ValueRange inits = {});
  // ids[i] names buffers[i] where there is one (a wide value), else the next of `narrow`.
  void bind(ArrayRef<dsl::ValueId> ids, const std::vector<mlir::Value> &buffers, mlir::ValueRange narrow);

  std::map<int32_t, mlir::Value> wideBuf_; // wide value id -> its buffer
  std::map<int32_t, int32_t> splats_;      // wide splat / constant / iota id -> its op

private:
  Emitter &e_;
  ImplicitLocOpBuilder &b_;
  const dsl::Kernel &k_;
  std::vector<mlir::Value> &values_;
  mlir::Block *entry_ = nullptr;
};

} // namespace m3idx::lowering
