// Which tiles of an sm_90 program live in mma.sync fragment order instead of the blocked spread,
// so that keys are loaded straight into A registers and dot results stay in accumulators
// (no shared-memory round trip per 16-token tile). Internal to lowering/.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dsl/Ir.h"

namespace m3idx::lowering {

// How a tile's lanes are spread over the threads of a program (g = thread / 4, t = thread % 4 in
// its warp).
enum class Spread : uint8_t;
const char *spreadName(Spread s); // "blocked", "mma.rows", ...

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
  // A dot.tiles result of N (64 or 128) columns x 64 tokens on a warpgroup (wgmma m64nNk16's D,
  // tokens its M): thread (w, g, t) holds tokens 16w + g and 16w + g + 8 of columns 8i + 2t and
  // 8i + 2t + 1 (i < N / 8) in register 4i + 2 (token half) + (column parity).
  WgmmaAcc,
  // fold.max (pairs 8) of a WgmmaAcc tile, N columns x 32 folded tokens (lane n * 32 + 8 (m / 16)
  // + m % 8 for token m): thread (w, g, t) holds folded token 8w + g, the max of its two tokens,
  // of columns 8i + 2t and 8i + 2t + 1 in register 2i + (column parity). Half the registers.
  WgmmaAccFolded,
};

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
