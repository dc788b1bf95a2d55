// Layouts of the GPU form: how a tile's lanes are spread over a program's threads. They are the
// tile dialect's layout encodings (tile/TileOps.td), assigned by a target's layout pass on the
// tile kernel (TargetLowering::assignLayouts; sm_90's is nvvm/Sm90Layouts.cpp), which the GPU
// conversion's patterns dispatch on (GpuPatterns.h); `m3idx inspect --emit layouts` prints the
// encoded kernel.
// Internal to lowering/.
#pragma once

#include "tile/TileDialect.h"

namespace m3idx::lowering {

// How a tile's lanes are spread over the threads of a program (g = thread / 4, t = thread % 4 in
// its warp):
// - Blocked: thread i holds lanes [i * c, i * c + c) (or lane i of a tile narrower than the warp).
// - MmaRows: a tile of 16 rows x R lanes (R a multiple of 4): thread (g, t) holds row g's lanes
//   [t R/4, (t + 1) R/4) and then row g + 8's. Keys in this order are mma A fragments (with the
//   K positions of each 32-wide step permuted, which the B fragments mirror); NVFP4 bytes, their
//   scales and the decoded keys share it, so a decode needs no data movement.
// - MmaAcc: a dot.tiles result of N columns x 16 tokens (lane n * 16 + m): per 8-column tile,
//   thread (g, t) holds tokens g, g + 8 of columns 2t, 2t + 1 in accumulator order c0..c3.
// - WgmmaAcc: a dot.tiles result of N (a multiple of 8 up to 128) columns x 64 tokens on a
//   warpgroup (wgmma m64nNk16's D, tokens its M): thread (w, g, t) holds tokens 16w + g and
//   16w + g + 8 of columns 8i + 2t and 8i + 2t + 1 (i < N / 8) in register 4i + 2 (token half) +
//   (column parity).
// - WgmmaAccFolded: fold.max (pairs 8) of a WgmmaAcc tile, N columns x 32 folded tokens (lane
//   n * 32 + 8 (m / 16) + m % 8 for token m): thread (w, g, t) holds folded token 8w + g, the max
//   of its two tokens, of columns 8i + 2t and 8i + 2t + 1 in register 2i + (column parity). Half
//   the registers.
using Spread = tile::Layout;

} // namespace m3idx::lowering
