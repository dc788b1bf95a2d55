// A GPU program's types as an MLIR TypeConverter over the tile dialect's types: scalars and
// buffers stay as they are; a tile's per-thread type follows its layout encoding (tile/TileOps.td):
// blocked is vector<chunk(lanes) x T> (GpuThreads.h: N / threads consecutive lanes a thread, or
// one), a target's own layouts (sm_90's fragment orders) what its TargetProgram adds
// (addTypeConversions). One per kernel emitted, as a target's fragment types depend on the
// kernel's program. Internal to lowering/.
#pragma once

#include "mlir/Transforms/DialectConversion.h"

namespace m3idx::lowering {

class GpuTypeConverter final : public mlir::TypeConverter {
public:
  explicit GpuTypeConverter(int threads); // a program's threads
};

} // namespace m3idx::lowering
