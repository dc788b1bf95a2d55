// One step plan for every backend: the kernels a step launches, in order, each with its config,
// grid and arguments by name (the names its dsl::Kernel declares), over the step's buffers named
// by role. Backends only bind roles to memory and launch (bindLaunch). Also the metadata builder's
// part of the work: the prefill row-tile table and per-row block counts.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/Batch.h"
#include "core/Status.h"
#include "kernels_src/KernelCatalog.h"

namespace m3idx::kernels {

// The buffers a step's kernels read and write, by role.
enum class StepBuffer : uint8_t {
  Q, Kv, BlockTable, SeqLens, QueryStartLoc, // the batch (SPEC §3)
  TileRequest, TileRowBegin, RowBlocks,       // metadata the plan's owner fills (below)
  Scores, Topk, Partial,                      // [H, T, W] f32, [H, T, 16] i32, i64 segment keys
  Arrivals, // i32 [H, T]: a row's segment programs done; zero before and after every step
  // The key image: i8 [image blocks, kKeyImageBlockBytes], decode_keys' output; its metadata the
  // plan's owner fills (fillKeyImage): each prefill request's first image block (i32, by
  // request) and each image block's page (i32).
  KeyImage, ImageBase, ImagePages,
  // i64 [kStatusWords], sticky (include/m3idx/Indexer.h's DeviceStatus); i32, one per
  // score_decode program, written by each every step (kernels_src/Nvfp4Score.cpp's checks)
  Status, ProgramFlags,
};
inline constexpr int kStepBufferCount = static_cast<int>(StepBuffer::ProgramFlags) + 1;
inline constexpr int kStatusWords = 2; // seq_lens, block table
const char *stepBufferName(StepBuffer b);

// A target's choices for one step's heads and decode_query_len (tuning/TargetTuning.h fills it):
// every kernel's config and the sizes its grids aim at.
struct StepTuning {
  std::array<KernelConfig, 5> configs; // by KernelKind
  // score_decode's grid aims at decodeScorePrograms programs (from shapes: a graph's capacity);
  // a step's blocks are spread over about decodeActivePrograms of them, in runs of at most
  // decodeMaxBlocksPerProgram, the rest leaving at once (decodeRun, read on the device).
  int64_t decodeScorePrograms = 1, decodeActivePrograms = 1, decodeMaxBlocksPerProgram = 8;
  int64_t prefillScorePrograms = 1, prefillMaxBlocksPerProgram = 8, prefillMinBlocksPerProgram = 1;
  int64_t topkPrograms = 1;
  // Rows a topk_prefill program takes at most (TargetTuning's): in steps whose prefill rows all
  // have at most kShortTopkRowBlocks blocks, and in the others.
  int64_t topkPrefillRows = 1, topkPrefillLongRows = 1;
  // Prefill steps whose rows all have at most fusedTopkMaxBlocks blocks: the last score_prefill
  // program of a row tile to finish tops the tile's rows fusedTopkTrip a trip (counted in
  // arrivals; KernelConfig::fusedTopkTrip, 0: never), and no topk_prefill launch.
  int fusedTopkTrip = 0;
  int64_t fusedTopkMaxBlocks = 0;
  // Prefill steps (not fused) whose row tiles read at least keyImageMinReads blocks for each block
  // of their requests plus keyImageLaunchReads (keyImageReads against keyImageBlocks: what a read
  // saves against what a block's decode and the launch cost; keyImageMinReads 0: never) decode
  // every block once into the key image (decode_keys) and score from it (KernelConfig::keyImage).
  int64_t keyImageMinReads = 0, keyImageLaunchReads = 0;
  const KernelConfig &config(KernelKind k) const { return configs[static_cast<int>(k)]; }
};

struct LaunchArg {
  const char *name = ""; // a string literal of the planner's: a step allocates no names
  bool isBuffer = false;
  StepBuffer buffer = StepBuffer::Q; // isBuffer
  int64_t value = 0;                 // a buffer's elements, or the scalar's value
};

struct Launch {
  KernelKind kind;
  KernelConfig config;
  int64_t programs = 0;
  std::vector<LaunchArg> args;
};

// Which launches of a step a plan holds: the decode-CP path scores one rank's share, exchanges,
// then runs the decode top-k on its own scores.
enum StepParts : unsigned {
  kScoreDecode = 1, kScorePrefill = 2, kTopkDecode = 4, kTopkPrefill = 8,
  kAllParts = kScoreDecode | kScorePrefill | kTopkDecode | kTopkPrefill,
};

struct StepPlan {
  std::vector<Launch> launches;
  int rowTile = 1;           // rows of a prefill score program
  int64_t prefillTiles = 0;  // entries of TileRequest and TileRowBegin (fillPrefillTiles)
  int64_t imageBlocks = 0;   // entries of ImagePages (fillKeyImage); 0: no key image
  std::array<int64_t, kStepBufferCount> elements{}; // per StepBuffer: elements the launches use
  int64_t elementsOf(StepBuffer b) const { return elements[static_cast<int>(b)]; }
};

// Decode blocks begin, begin + step, ... only (a decode-CP rank's share; all for 0, 1).
struct DecodeBlocks {
  int64_t begin = 0, step = 1;
};

// Plans a validated batch with scores of `width` columns. Errors: an invalid block range, a CP
// share (step > 1) with prefill scoring of prefill rows or with top-k, a grid over 2^31 - 1
// programs.
StatusOr<StepPlan> planStep(const BatchView &b, int64_t width, const StepTuning &tuning,
                            unsigned parts = kAllParts, DecodeBlocks blocks = {});

// A decode-only step planned from shapes alone, for metadata that stays on the device (and CUDA
// graphs): `shape`'s params, numRows, numPages, numRequests and maxBlocks are read, never its
// arrays. Grids come from the number of requests and the tuning's program target; kernels read
// each request's length, split it over its programs, check every value they read (seq_len in
// [0, maxSeqLen], page ids) and give padding (seq_len 0) and flagged requests no blocks.
// `width` must hold blocksFor(maxSeqLen) columns.
StatusOr<StepPlan> planDeviceDecode(const BatchView &shape, int64_t width, int64_t maxSeqLen,
                                    const StepTuning &tuning);

// Decode CP (SPEC §6) on one rank of a group that shares one array of device memory
// (runtime/gpu/PeerArray.h): rank k's part holds head k's scores [scoreHeadRows, W] from its start,
// so writing [ranks, scoreHeadRows, W] from the array's base puts each head's into its owner's
// part; each rank's score programs' flags lie flagRankStride elements after the rank before's.
struct DecodeShare {
  int rank = 0, ranks = 1;
  int64_t scoreHeadRows = 0;  // >= the step's rows
  int64_t flagRankStride = 0; // >= a rank's flags
};
// A rank's step: its score_decode over the group's heads (q [T, ranks, 128], one head a rank,
// `group`'s configs) for blocks rank, rank + ranks, ...; then, once every rank's writes into its
// part are done, topk_decode on its own head's scores (`own`'s configs), reading every rank's
// flags, so a bad page id any rank met gives the request no blocks on all.
struct SharePlans {
  StepPlan score, topk;
};
StatusOr<SharePlans> planDeviceDecodeShare(const BatchView &shape, int64_t width, int64_t maxSeqLen,
                                           const StepTuning &group, const StepTuning &own, const DecodeShare &share);

// A kernel's arguments in signature order: buffers first, then scalars.
struct KernelSignature {
  std::vector<std::string> buffers, scalars;
  // The kernel awaits the ones launched before it (dsl grid.await): a backend may start it while
  // the kernel ahead of it in the same step still runs (CUDA's programmatic dependent launch).
  bool awaitsEarlierGrids = false;
};
// The kernel's argument names, in order (a backend asks once per config it loads, of the kernel
// it builds for its code).
KernelSignature signatureOf(const dsl::Kernel &kernel);
// ... of the kernel built for `config` (tests).
StatusOr<KernelSignature> signatureOf(KernelKind kind, const KernelConfig &config);

// Calls buffer() for each of the signature's buffers, then scalar() for each scalar, with the
// launch's argument of that name. An argument the launch lacks, or one it has that the kernel does
// not take, is an error naming it (the plan and the kernels disagree).
Status bindLaunch(const KernelSignature &signature, const Launch &launch,
                  const std::function<void(StepBuffer, int64_t elements)> &buffer,
                  const std::function<void(int64_t)> &scalar);

// The most blocks any request in [first, last) has: the block extent of a score grid.
int64_t maxRequestBlocks(const BatchView &b, int64_t first, int64_t last);

// Slots of decode blocks begin, begin + step, ... below `blocks`.
inline int64_t blockSlots(int64_t blocks, int64_t begin, int64_t step) {
  return blocks > begin ? (blocks - begin + step - 1) / step : 0;
}

// A score grid: `units` (decode requests or prefill row tiles) x `chunks` programs, each scoring
// up to blocksPerProgram consecutive blocks of its unit's `blocks` (the most any unit has). Runs of
// blocks share a program's query load and keep its key stream going; the grid keeps at least
// `targetPrograms` programs when there are that many blocks. Runs are at least
// minBlocksPerProgram long while that leaves targetPrograms / 2 programs: longer runs spread a
// program's fixed cost (its staging) over more blocks where programs are costly to start.
struct ScoreGrid {
  int64_t chunks = 1, blocksPerProgram = 1;
  int64_t programs(int64_t units) const { return units * chunks; }
};
ScoreGrid scoreGrid(int64_t units, int64_t blocks, int64_t targetPrograms, int64_t maxBlocksPerProgram,
                    int64_t minBlocksPerProgram = 1);

// Top-k of `rows` (head, row) pairs of up to `blocks` blocks: rows too few to fill the target are
// cut into segments of segmentBlocks (a multiple of the 32-score step, at least 128) whose top 16s
// the row's last segment program merges; with one segment each program writes its row's ids.
// The kernels use fewer segments on a row shorter than `blocks` (one per kMinSegmentBlocks of its
// own length, read on the device: kernels_src/Topk.cpp; topk_decode's grid has every row's first
// segment first), so a grid sized for capacity costs a short row about what one sized for it
// would. Rows past the target keep a program each (programs of several strided rows were slower:
// bench/RESULTS.md).
inline constexpr int64_t kMinSegmentBlocks = 128;
// Rows of at most this many blocks are "short" for topk_prefill's rows a program (two merge steps
// at most: TargetTuning::topkPrefillRows).
inline constexpr int64_t kShortTopkRowBlocks = 32;
struct TopkSplit {
  int64_t segments = 1, segmentBlocks = 1;
  int64_t partialKeys(int64_t headRows) const { return segments > 1 ? headRows * segments * 16 : 1; }
  int64_t arrivals(int64_t headRows) const { return segments > 1 ? headRows : 1; }
};
TopkSplit topkSplit(int64_t rows, int64_t blocks, int64_t targetPrograms);

// Number of prefill row tiles of `rowTile` rows, and the table itself: tile t covers rows
// [rowBegin[t], + rowTile) of request request[t], requests in order, each one's tiles from its last
// rows to its first (the longest first). Arrays hold prefillTileCount(b, rowTile) entries.
int64_t prefillTileCount(const BatchView &b, int rowTile);
void fillPrefillTiles(const BatchView &b, int rowTile, int32_t *request, int32_t *rowBegin);

// A key image of a batch's prefill requests: request r's blocks 0 .. blocksFor(seq_len) - 1 are
// image blocks base[r] .. (prefill requests in order; decode requests' entries are 0 and unread).
// keyImageBlocks: their count; keyImageReads: the blocks a step's row tiles of rowTile rows read.
int64_t keyImageBlocks(const BatchView &b);
int64_t keyImageReads(const BatchView &b, int rowTile);
// base holds numRequests entries, pages keyImageBlocks(b).
void fillKeyImage(const BatchView &b, int32_t *base, int32_t *pages);

// nblk of every prefill row (decode rows are left as they are): rowBlocks holds T entries.
void fillPrefillRowBlocks(const BatchView &b, int32_t *rowBlocks);

} // namespace m3idx::kernels
