// Which tiles of an sm_90 program live in mma.sync fragment order instead of the blocked spread,
// so that keys are loaded straight into A registers and dot results stay in accumulators
// (no shared-memory round trip per 16-token tile). Internal to lowering/.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dsl/Ir.h"

namespace m3idx::lowering {

// How a tile's lanes are spread over the 32 threads of a warp (g = thread / 4, t = thread % 4).
enum class Spread : uint8_t {
  // Thread i holds lanes [i * c, i * c + c) (or lane i of a tile narrower than the warp).
  Blocked,
  // A tile of 16 rows x R lanes (R a multiple of 4): thread (g, t) holds row g's lanes
  // [t R/4, (t + 1) R/4) and then row g + 8's. Keys in this order are mma A fragments (with the
  // K positions of each 32-wide step permuted, which the B fragments mirror); NVFP4 bytes, their
  // scales and the decoded keys share it, so a decode needs no data movement.
  MmaRows,
  // A dot.tiles result of N columns x 16 tokens (lane n * 16 + m): per 8-column tile, thread
  // (g, t) holds tokens g, g + 8 of columns 2t, 2t + 1 in accumulator order c0..c3.
  MmaAcc,
};

// One spread per ValueId. A dot.tiles that `mmaFits` gets MmaRows keys when its key chain (loads,
// loop-carried copies, decode) is used by nothing else, and keeps MmaAcc results through
// elementwise ops, iota, splat and loop-carried values until a reduce.max.groups. Any value also
// needed in blocked order keeps its whole group Blocked.
std::vector<Spread> assignMmaSpreads(const dsl::Kernel &k,
                                     const std::function<bool(const dsl::Op &)> &mmaFits);

} // namespace m3idx::lowering
