#include "tuning/TargetTuning.h"

#include "lowering/nvvm/WgmmaShape.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

namespace m3idx::tuning {

using kernels::KernelConfig;
using kernels::KernelKind;

namespace {

// The host: thread-pool grids (a few hundred work items), one 16 x 16 dot tile per prefill key
// tile (host dot.tiles are two loops: wider tiles do not pay).
TargetTuning makeHost() {
  TargetTuning t;
  t.target = "host";
  t.prefill.programs = 256;
  t.decodeScorePrograms = 256;
  t.topkPrograms = 64;
  // As on GPUs: every host test of a large prompt step runs programs of several rows.
  t.topkPrefillRows = 8;
  t.topkPrefillLongRows = 2;
  // Steps of rows up to 16 blocks top them in the score programs (trips of topk_prefill's 4 rows):
  // every host test of such a step runs the fused form, longer ones topk_prefill.
  t.fusedTopkTrip = 4;
  t.fusedTopkMaxBlocks = 16;
  // Prompts of more than about 8 row tiles a request score from the key image: the host tests'
  // long prompts run that form, short ones and chunks of a few tiles the pages.
  t.keyImageMinReads = 4;
  return t;
}

// sm_90 (H100, H200): prefill programs are a warpgroup running wgmma m64n128k16 on 64 tokens x 128
// columns with token pairs folded (a thread's two tokens: 32 registers fewer at 128 columns), 64
// blocks each since a program first stages its queries and a key table, and runs of at least 16
// while 1024 programs remain. Measured choices: bench/RESULTS.md (prefill form, runs of blocks).
TargetTuning makeSm90() {
  TargetTuning t;
  t.target = "sm_90";
  t.prefill = PrefillForm{128, 64, 4, 2048, 64, 16, true};
  // A one-warp decode program holds its queries as mma B fragments and a running max per column;
  // above 16 columns its masked tiles compare i32 offsets, which keeps it from spilling. Up to 24
  // columns in one program, wider ones in row tiles of 16: what requests that are no warpgroup
  // (below) take, and the forms measured before warpgroups (bench/RESULTS.md).
  t.decodeMaxColumns = 24;
  t.decodeNarrowAbove = 16;
  // Two key tiles in flight gave programs of 8 columns 2.5% and ones of 4 nothing; 16-column
  // programs (two mma column tiles, 104 registers) ran 8% faster on runs twice as long, which
  // programs of up to 8 columns did not (bench/RESULTS.md). A step's blocks go to about 2048 of
  // a grid's programs (runs of up to 8 blocks; the rest leave at once): against spreading them
  // over the whole grid, the same on the largest steps and up to 32% faster on mid-size ones
  // (32 x 32K, 4 heads: 0.086 -> 0.058 ms), each program's prologue (key table, queries) paid
  // for more blocks; 1024 lost on several (bench/RESULTS.md, 2026-12-03 (4)).
  t.decodeForms = {{4, t.decodeScorePrograms, 1}, {8, t.decodeScorePrograms, 2}, {16, 8192, 1}};
  t.decodeActivePrograms = 2048;
  // topk_prefill programs of one warp, 32 rows (a trip, a thread a row) while topkPrograms of them
  // remain: the most programs that keep every thread a row.
  t.topkPrefillRows = 32;
  t.topkPrefillLongRows = 32;
  t.topkPrefillTripRows = 32;
  // Steps of rows up to 16 blocks (2K tokens) top them in the score programs, trips of 128 (the
  // program's threads, a row each), by each row tile's last program to finish. H100, kernels a
  // step, ms, fused / two launches: 1 x 1K 0.015 / 0.017, 1 x 2K 0.019 / 0.021, 64 x 2K 0.159 /
  // 0.158 (H=4 0.513 / 0.510); longer rows lose (16 x 4K 0.141 / 0.136, 1 x 8K at H=4 0.136 /
  // 0.127, 4 x 32K 1.309 / 1.285: a tile's tail in a 168-register program against topk_prefill's
  // one-warp programs; bench/RESULTS.md, 2026-12-07 (3)).
  t.fusedTopkTrip = 128;
  t.fusedTopkMaxBlocks = 16;
  // decode_keys: a warpgroup a block, a thread 16 keys (one scale) a trip. Steps whose row tiles
  // read 16 blocks for each block decoded, plus 16384, score from the key image. H100, ms of
  // score_prefill from the pages / from the image, + decode_keys: 4 x 32K 1.169 / 1.092 + 0.015
  // (H=4 4.433 / 4.083), 1 x 128K 4.230 / 3.936 + 0.015: a block read saves 0.6 ns; decode_keys
  // costs about 7.5 us + 7 ns a block, so 1 x 8K at H=4 (8K reads: 0.110 / 0.105 + 0.008) and
  // 16 x 4K (8K reads: 0.121 / 0.115 + 0.011) lose (bench/RESULTS.md, 2026-12-07 (4)).
  t.keyImageMinReads = 16;
  t.keyImageLaunchReads = 16384;
  t.decodeKeysTokens = 16;
  t.decodeKeysWarps = 4;
  // Wider requests (24 and 32 columns: 6 and 8 rows x 4 heads) as one warpgroup on wgmma m64nN,
  // which decodes each key once for all columns where row tiles decode it once per tile (64 x 128K
  // at 8 rows x 4 heads: 0.475 -> 0.351 ms); 16 columns and fewer ran slower so (bench/RESULTS.md).
  t.decodeWarpgroupAbove = 16;
  // Steps of up to 8 requests as padded warpgroups of up to 16 columns, each warp 2 of a block's 8
  // tiles on its own mma.sync: 1 x 4K 0.016 -> 0.012 ms, 1 x 2K at 4 heads 0.017 -> 0.013, 8 x 8K
  // 0.020 -> 0.016 (H200); the long requests of a small step lose (1 x 512K 0.036 -> 0.045, 8 x 1M
  // 0.206 -> 0.252) and still beat vLLM's path (H100 graphs: 1.27x, 1.81x); at 16-32 requests
  // only short ones gain (32 x 2K 0.017 -> 0.015, 32 x 8K 0.023 -> 0.026, 16 x 32K 0.037 -> 0.042:
  // bench/RESULTS.md, 2026-12-04 (4) and 2026-12-05 (3)).
  t.decodeWarpgroupRequests = 8;
  // Their blocks spread over 512 programs of the 4096 rather than all: runs of up to 8 blocks,
  // each program's prologue (its queries, the key table) paid once for them. Graph replay at
  // capacity 1M, H100: 8 x 32K at 4 heads 29.0 -> 25.6 us, 2 x 128K 29.2 -> 26.4, 1 x 512K
  // 42.1 -> 40.1 (the runs of a 512 grid, measured first); 8 x 128K at one head 55.9 -> 58.0,
  // short requests as before. The 512 grid itself had made 8 x 1M's runs 128 blocks long (268
  // -> 287 us: bench/RESULTS.md, 2026-12-05 (6)).
  t.decodeSmallStepActive = 512;
  return t;
}

// gfx950 (MI355X): one 16 x 16 x 128 MFMA tile per prefill key tile, the decode grid's sizes.
// A one-program decode reduces its 16 token slots per column in the wave's blocked layout
// (columns x 16 lanes over 64 threads), which needs 16 lanes a multiple of a thread's: 12, 14,
// 20, 24 and 28 columns (2 heads x 6-7 rows, 4 heads x 3 or 5-7) did not compile (reduce_max_groups
// in lowering/GpuThreads.cpp), so they run as row tiles of 8 or 16 columns. Not measured (no AMD GPU here).
TargetTuning makeGfx950() {
  TargetTuning t;
  t.target = "gfx950";
  t.decodePowerOfTwoAbove = 8;
  // topk_prefill trips of a wave's 64 rows, a program one trip (as sm_90's warp).
  t.topkPrefillRows = 64;
  t.topkPrefillLongRows = 64;
  t.topkPrefillTripRows = 64;
  t.decodeKeysTokens = 8; // a wave's 64 threads, 16 keys (one scale) each
  return t;
}

const std::vector<TargetTuning> &tables() {
  static const std::vector<TargetTuning> all = {makeHost(), makeSm90(), makeGfx950()};
  return all;
}

} // namespace

int TargetTuning::prefillRowTile(int numHeads) const {
  return numHeads >= 1 && numHeads <= prefill.columns ? prefill.columns / numHeads : 1;
}

KernelConfig TargetTuning::configFor(KernelKind kind, int numHeads, int decodeQueryLen, int64_t numRequests) const {
  KernelConfig c;
  const bool smallStep = numRequests <= decodeWarpgroupRequests;
  switch (kind) {
  case KernelKind::ScoreDecode:
    c.numHeads = numHeads;
    c.queryRows = decodeQueryLen;
    c.blockUnroll = scoreUnroll;
    if (const int columns = decodeWarpgroupColumns(numHeads, decodeQueryLen, smallStep);
        decodeAsWarpgroup(columns, smallStep)) {
      if (columns != numHeads * decodeQueryLen)
        c.rowTile = columns / numHeads; // padding rows past decodeQueryLen
      c.tokenTile = 64; // a warp's 16 tokens each
      c.warps = 4;
      c.foldTokenPairs = true;
      c.narrowMask = true;
      c.tilesAhead = decodeFormFor(c.decodeColumns()).tilesAhead;
      return c;
    }
    if (decodeMaxColumns > 0 && numHeads * decodeQueryLen > decodeMaxColumns)
      c.rowTile = std::max(1, std::min(decodeMaxColumns, decodeTileColumns) / numHeads);
    else if (const int columns = numHeads * decodeQueryLen;
             columns > decodePowerOfTwoAbove && (columns & (columns - 1)) != 0)
      c.rowTile = std::max(1, static_cast<int>(std::bit_floor(static_cast<unsigned>(columns))) / numHeads);
    c.narrowMask = c.decodeColumns() > decodeNarrowAbove;
    c.tilesAhead = decodeFormFor(c.decodeColumns()).tilesAhead;
    return c;
  case KernelKind::ScorePrefill:
    c.numHeads = numHeads;
    c.queryRows = prefillRowTile(numHeads);
    c.tokenTile = prefill.tokenTile;
    c.warps = prefill.warps;
    c.foldTokenPairs = prefill.foldTokenPairs;
    c.keyStages = prefill.keyStages;
    c.blockUnroll = scoreUnroll;
    // A prefill program's masked tiles hold up to 128 columns x 64 tokens: per-lane i64 token
    // positions cost a warpgroup's threads 60 registers where i32 offsets fit (ptxas); decode
    // programs (at most 8 lanes a thread) keep the i64 form, measured faster there.
    c.narrowMask = true;
    return c;
  case KernelKind::TopkDecode:
    c.queryRows = decodeQueryLen; // heads come from the grid
    return c;
  case KernelKind::TopkPrefill:
    c.queryRows = topkPrefillTripRows;
    return c;
  case KernelKind::DecodeKeys:
    c.tokenTile = decodeKeysTokens;
    c.warps = decodeKeysWarps;
    return c;
  }
  return c;
}

std::vector<KernelConfig> TargetTuning::configsFor(KernelKind kind, int numHeads, int decodeQueryLen) const {
  std::vector<KernelConfig> all = {configFor(kind, numHeads, decodeQueryLen)};
  if (kind == KernelKind::ScorePrefill && fusedTopkTrip > 0 && fusedTopkMaxBlocks > 0) {
    KernelConfig fused = all[0];
    fused.fusedTopkTrip = fusedTopkTrip;
    all.push_back(fused);
  }
  if (kind == KernelKind::ScorePrefill && keyImageMinReads > 0) {
    KernelConfig image = all[0];
    image.keyImage = true;
    all.push_back(image);
  }
  if (decodeWarpgroupRequests > 0)
    if (KernelConfig small = configFor(kind, numHeads, decodeQueryLen, 1); small.str() != all[0].str())
      all.push_back(small);
  return all;
}

kernels::StepTuning TargetTuning::forStep(int numHeads, int decodeQueryLen, int64_t numRequests) const {
  kernels::StepTuning s;
  for (KernelKind k : kernels::allKernels())
    s.configs[static_cast<int>(k)] = configFor(k, numHeads, decodeQueryLen, numRequests);
  const KernelConfig &decode = s.config(KernelKind::ScoreDecode);
  s.decodeScorePrograms =
      decode.warps > 1 ? decodeWarpgroupPrograms : decodeFormFor(decode.decodeColumns()).programs;
  s.decodeActivePrograms =
      decode.warps > 1 || decodeActivePrograms <= 0 ? s.decodeScorePrograms : decodeActivePrograms;
  // a warpgroup of at most kSmallStepColumns columns is a small step's (wider requests' are wider)
  if (decode.warps > 1 && numRequests <= decodeWarpgroupRequests && decode.decodeColumns() <= kSmallStepColumns &&
      decodeSmallStepActive > 0)
    s.decodeActivePrograms = std::min(decodeSmallStepActive, s.decodeScorePrograms);
  s.decodeMaxBlocksPerProgram = decodeMaxBlocksPerProgram;
  s.prefillScorePrograms = prefill.programs;
  s.prefillMaxBlocksPerProgram = prefill.maxBlocksPerProgram;
  s.prefillMinBlocksPerProgram = prefill.minBlocksPerProgram;
  s.topkPrograms = topkPrograms;
  s.topkPrefillRows = topkPrefillRows;
  s.topkPrefillLongRows = topkPrefillLongRows;
  s.fusedTopkTrip = fusedTopkTrip;
  s.fusedTopkMaxBlocks = fusedTopkMaxBlocks;
  s.keyImageMinReads = keyImageMinReads;
  s.keyImageLaunchReads = keyImageLaunchReads;
  return s;
}

TargetTuning::DecodeForm TargetTuning::decodeFormFor(int columns) const {
  for (const DecodeForm &f : decodeForms)
    if (columns <= f.maxColumns)
      return f;
  return {columns, decodeScorePrograms, decodeTilesAhead};
}

bool TargetTuning::decodeAsWarpgroup(int columns, bool smallStep) const {
  // wgmma's columns (lowering/nvvm/WgmmaShape.h), at most 64 for a decode (its 64-token tile's
  // accumulators under the warpgroup's register cap, Sm90Wgmma::wgmmaRegisterCap).
  return (columns > decodeWarpgroupAbove || (smallStep && columns <= kSmallStepColumns)) && columns <= 64 &&
         lowering::wgmmaTakesColumns(columns);
}

int TargetTuning::decodeWarpgroupColumns(int numHeads, int decodeQueryLen, bool smallStep) const {
  const int columns = numHeads * decodeQueryLen, padded = (columns + 7) / 8 * 8;
  const bool pad = decodeWarpgroupPad || (smallStep && padded <= kSmallStepColumns);
  return pad && numHeads > 0 && padded % numHeads == 0 ? padded : columns;
}

int64_t TargetTuning::mostDecodeScorePrograms() const {
  // a large step's widest request is a warpgroup iff any is; a small step's 16 padded columns are
  // one wherever the small-step rule is on
  const bool warpgroups = decodeAsWarpgroup(64, false) || decodeAsWarpgroup(kSmallStepColumns, decodeWarpgroupRequests > 0);
  int64_t most = std::max(decodeScorePrograms, warpgroups ? decodeWarpgroupPrograms : 0);
  for (const DecodeForm &f : decodeForms)
    most = std::max(most, f.programs);
  return most;
}

kernels::DecodeWorkspaceLayout TargetTuning::decodeWorkspace(int heads, int64_t maxRows, int64_t width) const {
  return kernels::decodeWorkspaceLayout(forStep(heads, 1, kLargeStep), heads, maxRows, width, mostDecodeScorePrograms());
}

StatusOr<const TargetTuning *> tuningFor(const std::string &target) {
  for (const TargetTuning &t : tables())
    if (t.target == target)
      return &t;
  return invalidArgument("target", fmt::format("one of {}", fmt::join(tunedTargets(), ", ")), target);
}

const TargetTuning &hostTuning() { return tables()[0]; }

std::vector<std::string> tunedTargets() {
  std::vector<std::string> names;
  for (const TargetTuning &t : tables())
    names.push_back(t.target);
  return names;
}

} // namespace m3idx::tuning
