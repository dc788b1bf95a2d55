// The indexer's kernels by name and the compile-time config that shapes their code. Everything
// else (sizes, init/local blocks, score width) is a run-time argument.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/Status.h"
#include "dsl/Ir.h"

namespace m3idx::kernels {

// DecodeKeys writes a step's key image (each prefill request's visible blocks decoded to e4m3,
// once a step) that score_prefill's keyImage form reads in place of the pages.
enum class KernelKind { ScoreDecode, ScorePrefill, TopkDecode, TopkPrefill, DecodeKeys };

// Key tokens a score program decodes and dots at once unless its config says otherwise: the M of
// one 16x16 matrix tile.
inline constexpr int kTokenTile = 16;

// A block's keys in a key image (decode_keys' output): 128 tokens of 128 e4m3 bytes, token-major.
inline constexpr int64_t kKeyImageBlockBytes = 128 * 128;

// Everything that shapes a kernel's code. The kernels name no target: which config a target
// builds for a step is its tuning table's choice (tuning/TargetTuning.h).
struct KernelConfig {
  int numHeads = 1;
  // Rows that share each key read: decode_query_len for decode kernels, the row tile for
  // score_prefill; for topk_prefill, the rows a trip sorts as one tile of 16 lanes a row (a power
  // of two up to 64: a GPU thread's row each, a warp's or wave's worth).
  int queryRows = 4;
  // Key tokens per dot (a divisor of the 128-token block) and warps per GPU program.
  int tokenTile = kTokenTile, warps = 1;
  // score_prefill: fold each tile's dots over token pairs (m, m + 8) before the running max.
  bool foldTokenPairs = false;
  // Score kernels: the unmasked loop over a block's tiles may run this many tiles per trip (a
  // hint the lowering takes where its register layout gains from it).
  int blockUnroll = 1;
  // Score kernels: masked tiles compare one i32 offset per lane (token minus row, against the
  // row's causal length past the tile's start) instead of each lane's i64 token position.
  bool narrowMask = false;
  // score_decode: rows one program scores when not queryRows (0: all of a request's rows). Below
  // it, the rows are split into tiles of rowTile, each tile's programs reading the keys (from L2
  // after the first) where one program for every column would hold too many registers; above it,
  // the one tile is padded with rows that see nothing (a warpgroup's wgmma takes columns in 8s).
  int rowTile = 0;
  // Score kernels: key tiles whose loads are in flight while one is dotted (1: the next tile
  // only). More cover longer memory latency at the cost of their registers.
  int tilesAhead = 1;
  // score_prefill: 0, or its blocks as a staged loop of this many stages (dsl stagedFor): a
  // producer loads and decodes a whole block, the work dots its 128 tokens with every column at
  // once (FlashAttention-3's layout on a target with producer warps: queries as M, keys as N).
  int keyStages = 0;
  // score_prefill: 0, or each program also tops its own rows (top-16 ids, as topk_prefill would),
  // this many rows a trip (a power of two up to 128; topk_prefill's queryRows): for steps whose
  // every prefill row tile one program scores whole, which then need no topk_prefill launch.
  int fusedTopkTrip = 0;
  // score_prefill: read the step's key image (decode_keys' output: a block's 128 keys as e4m3,
  // 128 bytes a token) instead of decoding the pages, so that each block is decoded once a step
  // rather than once for every row tile that reads it.
  bool keyImage = false;

  auto tied() const {
    return std::tie(numHeads, queryRows, tokenTile, warps, foldTokenPairs, blockUnroll, narrowMask, rowTile,
                    tilesAhead, keyStages, fusedTopkTrip, keyImage);
  }
  // Row tiles of a decode request (1 without rowTile), the rows of one, and its columns (rows x
  // heads: what one score_decode program dots each key tile with).
  int decodeRowTiles() const { return rowTile > 0 ? (queryRows + rowTile - 1) / rowTile : 1; }
  int decodeTileRows() const { return rowTile > 0 ? rowTile : queryRows; }
  int decodeColumns() const { return numHeads * decodeTileRows(); }
  bool operator==(const KernelConfig &o) const { return tied() == o.tied(); }
  bool operator<(const KernelConfig &o) const { return tied() < o.tied(); }
  // "heads=4,rows=4", then ",tokens=T,warps=W" unless 16 and 1, ",fold" if folding, ",unroll=U"
  // unless 1, ",narrow" for i32 masks, ",tile=R" for a decode row tile, ",ahead=A" unless 1,
  // ",stages=S" for staged keys, ",topk=R" for a fused top-k, ",image" for the key image: every
  // field, so two configs never print alike.
  std::string str() const;
};

const std::vector<KernelKind> &allKernels();
const char *kernelName(KernelKind k);
std::optional<KernelKind> kernelByName(const std::string &name);

StatusOr<dsl::Kernel> buildKernel(KernelKind k, const KernelConfig &config);

} // namespace m3idx::kernels
