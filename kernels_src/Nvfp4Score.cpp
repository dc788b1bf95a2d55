// NVFP4 score kernels (SPEC §4). One program scores a run of up to blocks_per_program KV blocks
// for a tile of query rows of one request: each key token is loaded and decoded once and dotted
// with every row and head of the tile. Decode tiles are a request's decode_query_len rows;
// prefill tiles are up to prefillRowTile(heads) consecutive rows of one request, listed by the
// runtime's tile table.
#include "kernels_src/ScoreKernels.h"

#include <functional>
#include <limits>

#include "core/Spec.h"

namespace m3idx::kernels {

using namespace dsl;

namespace {

struct ScoreArgs {
  Buffer q, kv, blockTable, seqLens, queryStartLoc, tileRequest, tileRowBegin, scores;
  Value numRows, maxBlocks, width, gridChunks, blocksPerProgram, initBlocks, localBlocks, blockBegin,
      blockStep;
};

ScoreArgs declareArgs(KernelBuilder &b, bool prefill) {
  ScoreArgs a;
  a.q = b.buffer("q", Elem::I8, Access::Read);
  a.kv = b.buffer("kv", Elem::I8, Access::Read);
  a.blockTable = b.buffer("block_table", Elem::I32, Access::Read);
  a.seqLens = b.buffer("seq_lens", Elem::I32, Access::Read);
  a.queryStartLoc = b.buffer("query_start_loc", Elem::I32, Access::Read);
  if (prefill) {
    a.tileRequest = b.buffer("tile_request", Elem::I32, Access::Read);
    a.tileRowBegin = b.buffer("tile_row_begin", Elem::I32, Access::Read);
  }
  a.scores = b.buffer("scores", Elem::F32, Access::Write);
  a.numRows = b.scalarArg("num_rows", Elem::I64);
  a.maxBlocks = b.scalarArg("max_blocks", Elem::I64);
  a.width = b.scalarArg("width", Elem::I64);
  a.gridChunks = b.scalarArg("grid_chunks", Elem::I64); // programs per request (decode) or row tile
  a.blocksPerProgram = b.scalarArg("blocks_per_program", Elem::I64);
  a.initBlocks = b.scalarArg("init_blocks", Elem::I64);
  a.localBlocks = b.scalarArg("local_blocks", Elem::I64);
  if (!prefill) { // decode CP: rank r scores blocks r, r + 4, ... with this same code
    a.blockBegin = b.scalarArg("block_begin", Elem::I64);
    a.blockStep = b.scalarArg("block_step", Elem::I64);
  }
  return a;
}

Value loadI64(KernelBuilder &b, Buffer buf, Value offset) {
  return b.convert(OpKind::ExtS, b.load(buf, offset), Elem::I64);
}

Value blocksFor(Value tokens) { return (tokens + (spec::kSparseBlockSize - 1)) / spec::kSparseBlockSize; }

// A program's query rows: rows [firstRow, firstRow + count) of the batch, of which the q elements
// below qLimit exist (rows past the batch's end read 0 and are padding, seeing no token).
struct RowTile {
  Value firstRow, qLimit;
  int count = 0;
  std::function<Value(Value)> causalOf; // i64 tile of row slots -> tokens each sees
  Value leastCausal;                    // a scalar no row slot sees fewer tokens than
};

// The blocks a program scores: slots [first, last) of its request's block list, slot i being
// block blockOf(i) (decode CP scores every blockStep-th block).
struct BlockRange {
  Value first, last;
  std::function<Value(Value)> blockOf;
};

// Scores every block of `range` of request `req` for every row of the tile and every head. Keys
// are taken kTokenTile tokens at a time, as one stream over the program's blocks (so the load of
// the next tile, one step ahead, crosses block boundaries): one dot.tiles of (tokens x 128)
// against (rows*heads x 128), which matrix units run as one MFMA / MMA tile, into a running masked
// max per (token slot, row, head), reduced over the slots and stored when a block ends. Every
// block takes 128 / kTokenTile steps: slots past a sequence's end are inside its last page and
// masked like the tokens a row does not see.
void scoreBlocks(KernelBuilder &b, const ScoreArgs &a, int numHeads, Value req, const BlockRange &range,
                 const RowTile &rt) {
  const int D = spec::kIndexHeadDim, T = kTokenTile, steps = spec::kSparseBlockSize / kTokenTile;
  const int N = rt.count * numHeads; // (row, head) pairs, row-major

  // [rows, heads, 128] of q is one contiguous tile, loaded once per program.
  Value q = b.convert(OpKind::Bitcast, b.loadTile(a.q, rt.firstRow * (numHeads * D), N * D, rt.qLimit),
                      Elem::F8E4M3FN);
  // Lane n*T + m of a dot.tiles result is token m against (row, head) n.
  Value lane = b.iota(N * T);
  Value token = lane % T;
  Value causal = rt.causalOf(lane / (T * numHeads));
  Value negInf = b.splat(b.constF32(-std::numeric_limits<double>::infinity()), N * T);

  Value total = (range.last - range.first) * steps;
  // Pages are 9216 = 16 x 576 bytes and tiles start at multiples of 16 tokens: both loads are
  // 16-byte aligned when kv is (SPEC §3's reason for splitting data and scales).
  auto loadKeys = [&](Value j) {
    Value blk = range.blockOf(range.first + j / steps);
    Value pageBase = loadI64(b, a.blockTable, req * a.maxBlocks + blk) * spec::kPageBytes;
    Value tok0 = (j % steps) * T;
    return Values{b.loadTile(a.kv, pageBase + tok0 * spec::kDataBytesPerToken,
                             T * spec::kDataBytesPerToken, 16),
                  b.loadTile(a.kv, pageBase + spec::kPageDataBytes + tok0 * spec::kScalesPerToken,
                             T * spec::kScalesPerToken, 16)};
  };
  // A block's scores, lane n = (row slot n / heads, head n % heads), each stored where its row sees
  // the block: one scatter, no per-row scalars kept across the loop.
  Value slot = b.iota(N);
  Value slotRow = slot / numHeads, slotHead = slot % numHeads;
  auto tileOf = [&](Value scalar) { return b.splat(scalar, N); };
  auto storeBlock = [&](Value blk, Value best) {
    Value nblk = blocksFor(rt.causalOf(slotRow)), blkT = tileOf(blk);
    Value s = b.select(blkT >= nblk - tileOf(a.localBlocks), tileOf(b.constF32(spec::kLocalSentinel)),
                       b.select(blkT < tileOf(a.initBlocks), tileOf(b.constF32(spec::kInitSentinel)), best));
    Value at = (slotHead * tileOf(a.numRows) + tileOf(rt.firstRow) + slotRow) * tileOf(a.width) + blkT;
    b.storeScatter(a.scores, at, s, blkT < nblk);
  };
  // Software-pipelined: tiles j + 1 .. j + kKeyPrefetch are in flight while tile j is scored (the
  // last iterations reload the last tile: in the page, unused), so enough bytes are in flight per
  // warp to cover HBM latency at the occupancy the kernel's registers allow.
  Values inits = {negInf};
  for (int d = 0; d < kKeyPrefetch; ++d) {
    Values tile = loadKeys(b.minS(b.constInt(d), total - 1));
    inits.insert(inits.end(), tile.begin(), tile.end());
  }
  b.forLoop(b.constInt(0), total, b.constInt(1), inits, [&](Value j, const Values &it) {
    Values next = loadKeys(b.minS(j + kKeyPrefetch, total - 1));
    Value blk = range.blockOf(range.first + j / steps);
    Value dots = b.dotTiles(b.decodeNvfp4(it[1], it[2]), q, D);
    Value tok0 = blk * spec::kSparseBlockSize + (j % steps) * T;
    // fmaxf drops NaN dots; invisible tokens count as -inf. Most tiles are seen whole by every
    // row: those skip the mask (a uniform branch instead of a compare and select per lane).
    Value best = b.ifElse(
        tok0 + T <= rt.leastCausal, [&] { return Values{b.maxNumF(it[0], dots)}; },
        [&] {
          Value visible = b.splat(tok0, N * T) + token < causal;
          return Values{b.maxNumF(it[0], b.select(visible, dots, negInf))};
        })[0];
    Value blockEnds = j % steps == b.constInt(steps - 1);
    b.ifThen(blockEnds, [&] { storeBlock(blk, b.reduceMaxGroups(best, N)); });
    Values carried = {b.select(b.splat(blockEnds, N * T), negInf, best)};
    carried.insert(carried.end(), it.begin() + 3, it.end()); // the queue moves up one tile
    carried.insert(carried.end(), next.begin(), next.end());
    return carried;
  });
}

// A program's slots: [chunk * blocks_per_program, + blocks_per_program) of `slots`.
BlockRange chunkOf(KernelBuilder &b, const ScoreArgs &a, Value chunk, Value slots,
                   std::function<Value(Value)> blockOf) {
  Value first = chunk * a.blocksPerProgram;
  return {first, b.minS(first + a.blocksPerProgram, slots), std::move(blockOf)};
}

} // namespace

StatusOr<Kernel> buildScoreDecode(const KernelConfig &c) {
  KernelBuilder b("score_decode");
  ScoreArgs a = declareArgs(b, /*prefill=*/false);
  Value pid = b.programId();
  Value req = pid / a.gridChunks;
  Value seqLen = loadI64(b, a.seqLens, req);
  // This rank's blocks of the request: blockBegin + i * blockStep for i < slots.
  Value slots = b.maxS(blocksFor(seqLen) - a.blockBegin + (a.blockStep - 1), b.constInt(0)) / a.blockStep;
  BlockRange range = chunkOf(b, a, pid % a.gridChunks, slots,
                             [&](Value i) { return a.blockBegin + i * a.blockStep; });
  b.ifThen(range.first < range.last, [&] {
    const int Q = c.queryRows;
    RowTile rt;
    rt.firstRow = loadI64(b, a.queryStartLoc, req);
    rt.qLimit = b.constInt(static_cast<int64_t>(Q) * c.numHeads * spec::kIndexHeadDim);
    rt.count = Q;
    rt.causalOf = [&](Value r) { // row r sees L - Q + r + 1 tokens (at least 0)
      return b.maxS(r + b.splat(seqLen - (Q - 1), r.type().lanes), b.splat(b.constInt(0), r.type().lanes));
    };
    rt.leastCausal = b.maxS(seqLen - (Q - 1), b.constInt(0)); // row 0's
    scoreBlocks(b, a, c.numHeads, req, range, rt);
  });
  return b.finish();
}

StatusOr<Kernel> buildScorePrefill(const KernelConfig &c) {
  KernelBuilder b("score_prefill");
  ScoreArgs a = declareArgs(b, /*prefill=*/true);
  Value pid = b.programId();
  Value tileId = pid / a.gridChunks;
  Value req = loadI64(b, a.tileRequest, tileId);
  Value rowBegin = loadI64(b, a.tileRowBegin, tileId);
  Value qStart = loadI64(b, a.queryStartLoc, req);
  Value qEnd = loadI64(b, a.queryStartLoc, req + 1);
  Value seqLen = loadI64(b, a.seqLens, req);
  Value qLen = qEnd - qStart;
  Value zero = b.constInt(0);
  Value numValid = b.minS(qEnd - rowBegin, b.constInt(c.queryRows));
  // causal_len = max(L - q_len + r + 1, 0) for row r of the request
  auto causalOf = [&](Value rowInRequest) { return b.maxS(seqLen - qLen + rowInRequest + 1, zero); };
  Value tileCausal = causalOf(rowBegin + numValid - 1 - qStart); // the tile's last row sees most
  BlockRange range = chunkOf(b, a, pid % a.gridChunks, blocksFor(tileCausal), [](Value i) { return i; });
  b.ifThen(range.first < range.last, [&] {
    RowTile rt;
    rt.firstRow = rowBegin;
    rt.qLimit = numValid * (c.numHeads * spec::kIndexHeadDim);
    rt.count = c.queryRows;
    // the first row sees least; with padding slots (which see nothing) no tile is seen whole
    rt.leastCausal = b.select(numValid == b.constInt(c.queryRows), causalOf(rowBegin - qStart), zero);
    rt.causalOf = [&](Value r) { // slots past numValid are padding: they see nothing
      const int n = r.type().lanes;
      Value seen = b.maxS(r + b.splat(seqLen - qLen + rowBegin - qStart + 1, n), b.splat(zero, n));
      return b.select(r < b.splat(numValid, n), seen, b.splat(zero, n));
    };
    scoreBlocks(b, a, c.numHeads, req, range, rt);
  });
  return b.finish();
}

} // namespace m3idx::kernels
