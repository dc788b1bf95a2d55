// Per-target tuning tables: the kernel config each target builds for a step (token tile, warps,
// folding, unroll hint, mask form) and the sizes of its grids. Kernels (kernels_src/) say what
// is computed and name no target; these tables say how each target runs them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/Status.h"
#include "kernels_src/DecodeWorkspace.h"
#include "kernels_src/KernelCatalog.h"
#include "kernels_src/LaunchPlan.h"

namespace m3idx::tuning {

// How a target runs score_prefill programs: each decoded key tile of `tokenTile` tokens is dotted
// with `columns` (rows x heads) query columns, on `warps` warps; grids keep about `programs`
// programs of at most `maxBlocksPerProgram` blocks, runs being at least `minBlocksPerProgram`
// long while programs / 2 remain. `foldTokenPairs`: each tile's dots are folded over token pairs
// (m, m + 8) before the running max, which then holds half as many values.
struct PrefillForm {
  int columns = 16, tokenTile = kernels::kTokenTile, warps = 1;
  int64_t programs = 16384, maxBlocksPerProgram = 8, minBlocksPerProgram = 1;
  bool foldTokenPairs = false;
  int keyStages = 0; // KernelConfig::keyStages
};

struct TargetTuning {
  std::string target; // "host", "sm_90", "gfx950"
  PrefillForm prefill;
  int64_t decodeScorePrograms = 16384, decodeMaxBlocksPerProgram = 8;
  // One-warp score_decode programs a step's blocks are spread over (kernels::decodeRun; 0: the
  // grid's target); warpgroup programs spread over their grid's.
  int64_t decodeActivePrograms = 0;
  // Columns (rows x heads) one score_decode program takes at most (0: no limit): a wider
  // request's rows are split into row tiles (KernelConfig::rowTile) of decodeTileColumns.
  int decodeMaxColumns = 0, decodeTileColumns = 16;
  // A request of more columns than this that are not a power of two is split into row tiles of
  // the largest power of two below them (divided by heads) instead.
  int decodePowerOfTwoAbove = 1 << 30;
  // score_decode programs of more columns than this compare masked tiles in i32 (narrowMask).
  int decodeNarrowAbove = 1 << 30;
  int64_t topkPrograms = 4096;
  // A topk_prefill program takes up to this many rows (32 a trip, a GPU thread a row) while at
  // least topkPrograms programs remain, where rows are not cut into segments.
  int64_t topkPrefillRows = 1;
  // The same in steps with a prefill row of more than kernels::kShortTopkRowBlocks blocks (whose
  // rows take more merge steps).
  int64_t topkPrefillLongRows = 1;
  // Rows a topk_prefill trip sorts as one tile, 16 lanes each (KernelConfig::queryRows): a GPU
  // program's threads, so that each holds one row; the host's 4 keep tiles at one 64-lane vector
  // (wider ones compile as loops over pieces: 512 lanes took LLVM 6 s).
  int topkPrefillTripRows = 4;
  // Steps whose prefill rows all have at most fusedTopkMaxBlocks blocks: the last score program of
  // each row tile to finish tops the tile's rows, fusedTopkTrip rows a trip
  // (KernelConfig::fusedTopkTrip; either 0: never): one launch where two were, the tile's blocks
  // still split over the grid. A GPU program's threads a trip (each a row, as topk_prefill's).
  int fusedTopkTrip = 0;
  int64_t fusedTopkMaxBlocks = 0;
  // Prefill steps whose row tiles read at least keyImageMinReads blocks for each block of their
  // requests, plus keyImageLaunchReads, decode every block once into a key image and score from it
  // (kernels::StepTuning's; 0: never); decode_keys programs of decodeKeysWarps warps decode
  // decodeKeysTokens tokens a trip.
  int64_t keyImageMinReads = 0, keyImageLaunchReads = 0;
  int decodeKeysTokens = 16, decodeKeysWarps = 1;
  int scoreUnroll = 4; // the unmasked block loop's unroll hint (KernelConfig::blockUnroll)
  int decodeTilesAhead = 1; // score_decode's key tiles in flight (KernelConfig::tilesAhead)
  // score_decode programs by their columns (rows x heads, a row tile's where split): the first
  // form they fit (columns <= maxColumns) gives their grid target and tiles in flight in place of
  // decodeScorePrograms and decodeTilesAhead.
  struct DecodeForm {
    int maxColumns;
    int64_t programs;
    int tilesAhead;
  };
  std::vector<DecodeForm> decodeForms = {};
  // score_decode programs of a request's rows x heads columns above this, a multiple of 8 up to
  // 64, run as one warpgroup (4 warps on 64-token tiles, token pairs folded: sm_90's wgmma, each
  // warp decoding its 16 tokens once for every column) on a grid of decodeWarpgroupPrograms.
  int decodeWarpgroupAbove = 1 << 30;
  int64_t decodeWarpgroupPrograms = 4096;
  // Whether a request of columns that are no multiple of 8 is asked about as the next multiple of 8
  // (its row tile padded with rows that see nothing, KernelConfig::rowTile): a 4-column request can
  // then run as a warpgroup, 2 tiles a block where a warp runs 8 in sequence.
  bool decodeWarpgroupPad = false;
  // Steps of at most this many decode requests score every request of up to kSmallStepColumns
  // padded columns as one warpgroup program, its columns padded to a multiple of 8 (as
  // decodeWarpgroupPad would; each warp's own mma.sync, the form measured): such a step's time is a
  // program's dependent chain, which four warps sharing a block's tiles shorten, where a large
  // step's is throughput, which one warp a block spends better (bench/RESULTS.md). The host knows
  // a step's requests when it plans it; a CUDA graph is captured per batch size.
  int64_t decodeWarpgroupRequests = 0;
  static constexpr int kSmallStepColumns = 16;
  // Programs of their grid (decodeWarpgroupPrograms) those small steps' blocks are spread over,
  // as decodeActivePrograms for one-warp programs (0: the whole grid): a small step's long
  // requests run several blocks a program, its short ones one.
  int64_t decodeSmallStepActive = 0;

  // Rows of one prefill program: columns / heads.
  int prefillRowTile(int numHeads) const;
  // A step's decode requests past any small-step rule (decodeWarpgroupRequests).
  static constexpr int64_t kLargeStep = INT64_MAX;
  // The config `kind` is built with for a step of `numHeads` heads, `decodeQueryLen` rows and
  // `numRequests` decode requests (only score_decode's form may follow the requests).
  kernels::KernelConfig configFor(kernels::KernelKind kind, int numHeads, int decodeQueryLen,
                                  int64_t numRequests = kLargeStep) const;
  // Every config `kind` is built with for steps of these heads and rows, whatever their requests
  // (what a warm-up or an AOT bundle compiles), without repeats.
  std::vector<kernels::KernelConfig> configsFor(kernels::KernelKind kind, int numHeads, int decodeQueryLen) const;
  // Every kernel's config and the grid sizes of such a step, for kernels::planStep.
  kernels::StepTuning forStep(int numHeads, int decodeQueryLen, int64_t numRequests) const;
  // The largest decode score grid target of any form (scratch sized before the step is known).
  int64_t mostDecodeScorePrograms() const;
  // The decode workspace of steps up to these bounds under this table (kernels_src/DecodeWorkspace.h).
  kernels::DecodeWorkspaceLayout decodeWorkspace(int heads, int64_t maxRows, int64_t width) const;

private:
  // The decode form of a score_decode program of `columns` columns (the defaults' if none fits).
  DecodeForm decodeFormFor(int columns) const;
  // Whether a request of `columns` columns (rows x heads) is scored by one warpgroup program, in a
  // step that is small (decodeWarpgroupRequests) or not.
  bool decodeAsWarpgroup(int columns, bool smallStep) const;
  // The columns a warpgroup program of a request of these heads and rows takes (rows x heads, or
  // with decodeWarpgroupPad or in a small step the next multiple of 8).
  int decodeWarpgroupColumns(int numHeads, int decodeQueryLen, bool smallStep) const;
};

// The table of a target ("host", "sm_90", "gfx950"); an unknown name is an error naming the known.
StatusOr<const TargetTuning *> tuningFor(const std::string &target);
const TargetTuning &hostTuning();
std::vector<std::string> tunedTargets();

} // namespace m3idx::tuning
