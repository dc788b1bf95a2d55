// Which tiles of an sm_90 program live in mma.sync fragment order instead of the blocked spread,
// so that keys are loaded straight into A registers and dot results stay in accumulators
// (no shared-memory round trip per 16-token tile). Internal to lowering/.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dsl/Ir.h"
#include "lowering/Spread.h"

namespace m3idx::lowering {

// One spread per ValueId. A dot.tiles that `mmaFits` gets MmaRows keys when its key chain (loads,
// loop-carried copies, decode) is used by nothing else, and keeps MmaAcc results through
// elementwise ops, iota, splat and loop-carried values until a reduce.max.groups; one that
// `wgmmaFits` the same with MmaRows keys of 16 rows per warp and WgmmaAcc results, whose
// fold.max (pairs 8) is WgmmaAccFolded through elementwise ops, splat and loop-carried values.
// Any value also needed in blocked order keeps its whole group Blocked.
std::vector<Spread> assignMmaSpreads(const dsl::Kernel &k,
                                     const std::function<bool(const dsl::Op &)> &mmaFits,
                                     const std::function<bool(const dsl::Op &)> &wgmmaFits = {});

} // namespace m3idx::lowering
