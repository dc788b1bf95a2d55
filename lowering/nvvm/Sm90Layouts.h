// sm_90's layout pass over a tile kernel (tile/TileOps.td): which tiles live in mma.sync / wgmma
// fragment order instead of blocked, so that keys load straight into A registers and dot results
// stay in accumulators (no shared-memory round trip per key tile). Internal to lowering/.
#pragma once

#include <memory>
#include <string>

#include "core/Status.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace m3idx::lowering {

// Gives every tile of `fn` (a program of `threads` threads: 32, or 128 for a warpgroup) its
// layout as its tensor type's encoding. A dot.tiles that mma.sync or wgmma takes
// (nvvm/WgmmaShape.h) gets MmaRows keys when its key chain (loads, loop-carried copies, decode)
// is used by nothing blocked, and MmaAcc (WgmmaAcc) results kept through elementwise ops, iota,
// splat and loop-carried values until a reduce_max_groups; a wgmma result's fold_max (pairs 8)
// is WgmmaAccFolded. Any other value also needed blocked keeps its whole group blocked, and a dot
// whose keys are in fragment order but whose results are so needed keeps them in accumulators,
// followed by an explicit convert_layout to blocked that all their uses read. Running it again assigns the same afresh.
mlir::LogicalResult assignSm90Layouts(mlir::func::FuncOp fn, int threads);

// --m3idx-assign-sm90-layouts: the same on every func.func of a module (32 threads a warp, times
// the function's m3idx.warps).
std::unique_ptr<mlir::Pass> createAssignSm90LayoutsPass();
void registerAssignSm90LayoutsPass(); // for m3idx-opt; idempotent

// A tile kernel's text (m3idx-opt's input) with the pass run on it, as text; an error where the
// text does not parse or verify, or the pass's result does not verify (the fuzz target
// Sm90Layouts: never a crash, and the same text when run on its own output).
StatusOr<std::string> assignSm90LayoutsToText(const std::string &text);

} // namespace m3idx::lowering
