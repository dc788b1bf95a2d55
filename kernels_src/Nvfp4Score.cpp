// NVFP4 score kernels (SPEC §4). One program scores one KV block for a tile of query rows of one
// request: each key token is loaded and decoded once and dotted with every row and head of the
// tile. Decode tiles are a request's decode_query_len rows; prefill tiles are up to
// prefillRowTile(heads) consecutive rows of one request, listed by the runtime's tile table.
#include "kernels_src/ScoreKernels.h"

#include <functional>
#include <limits>

#include "core/Spec.h"

namespace m3idx::kernels {

using namespace dsl;

namespace {

struct ScoreArgs {
  Buffer q, kv, blockTable, seqLens, queryStartLoc, tileRequest, tileRowBegin, scores;
  Value numRows, maxBlocks, width, gridBlocks, initBlocks, localBlocks, blockBegin, blockStep;
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
  a.gridBlocks = b.scalarArg("grid_blocks", Elem::I64);
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

struct TileRow {
  Value row;    // global query row (a valid row even for padding slots)
  Value causal; // tokens the row sees; 0 for padding slots
};

// A program's query rows: rows [firstRow, firstRow + rows.size()) of the batch, of which the q
// elements below qLimit exist (rows past the batch's end read 0 and are padding).
struct RowTile {
  Value firstRow, qLimit;
  std::vector<TileRow> rows;
  std::function<Value(Value)> causalOf; // i64 tile of row slots -> tokens each sees
};

// Scores block `blk` of request `req` for every row of the tile and every head. Keys are taken
// kTokenTile tokens at a time: one dot.tiles of (tokens x 128) against (rows*heads x 128), which
// matrix units run as one MFMA / MMA tile, then a masked max over the tile's tokens.
void scoreBlock(KernelBuilder &b, const ScoreArgs &a, int numHeads, Value req, Value blk,
                const RowTile &rt, Value tokens) {
  const int D = spec::kIndexHeadDim, T = kTokenTile;
  const int N = static_cast<int>(rt.rows.size()) * numHeads; // (row, head) pairs, row-major
  Value page = loadI64(b, a.blockTable, req * a.maxBlocks + blk);
  Value pageBase = page * spec::kPageBytes;

  // [rows, heads, 128] of q is one contiguous tile, loaded once per program.
  Value q = b.convert(OpKind::Bitcast, b.loadTile(a.q, rt.firstRow * (numHeads * D), N * D, rt.qLimit),
                      Elem::F8E4M3FN);
  // Lane n*T + m of a dot.tiles result is token m against (row, head) n.
  Value lane = b.iota(N * T);
  Value token = lane % T;
  Value causal = rt.causalOf(lane / (T * numHeads));
  Value negInf = b.splat(b.constF32(-std::numeric_limits<double>::infinity()), N * T);

  Value tokenBase = blk * spec::kSparseBlockSize;
  Value tiles = (tokens + (T - 1)) / T; // the last tile reads slots past `tokens`, inside the page
  Value none = b.splat(b.constF32(-std::numeric_limits<double>::infinity()), N);
  // Pages are 9216 = 16 x 576 bytes and tiles start at multiples of 16 tokens: both loads are
  // 16-byte aligned when kv is (SPEC §3's reason for splitting data and scales).
  auto loadKeys = [&](Value tile) {
    Value tok0 = tile * T;
    return Values{b.loadTile(a.kv, pageBase + tok0 * spec::kDataBytesPerToken,
                             T * spec::kDataBytesPerToken, 16),
                  b.loadTile(a.kv, pageBase + spec::kPageDataBytes + tok0 * spec::kScalesPerToken,
                             T * spec::kScalesPerToken, 16)};
  };
  // Software-pipelined: tile j + 1 is loaded before tile j is scored, so a load is always in
  // flight behind the arithmetic (the last iteration reloads its own tile: in the page, unused).
  Values first = loadKeys(b.constInt(0));
  Values best = b.forLoop(
      b.constInt(0), tiles, b.constInt(1), {none, first[0], first[1]}, [&](Value j, const Values &it) {
        Values next = loadKeys(b.minS(j + 1, tiles - 1));
        Value dots = b.dotTiles(b.decodeNvfp4(it[1], it[2]), q, D);
        Value visible = b.splat(tokenBase + j * T, N * T) + token < causal;
        // fmaxf drops NaN dots; invisible tokens count as -inf
        return Values{b.maxNumF(it[0], b.reduceMaxGroups(b.select(visible, dots, negInf), N)),
                      next[0], next[1]};
      });

  Value local = b.constF32(spec::kLocalSentinel), init = b.constF32(spec::kInitSentinel);
  for (size_t r = 0; r < rt.rows.size(); ++r) {
    Value nblk = blocksFor(rt.rows[r].causal);
    b.ifThen(blk < nblk, [&] {
      for (int h = 0; h < numHeads; ++h) {
        Value dot = b.extract(best[0], static_cast<int>(r) * numHeads + h);
        Value s = b.select(blk >= nblk - a.localBlocks, local,
                           b.select(blk < a.initBlocks, init, dot));
        b.store(a.scores, (b.constInt(h) * a.numRows + rt.rows[r].row) * a.width + blk, s);
      }
    });
  }
}

} // namespace

StatusOr<Kernel> buildScoreDecode(const KernelConfig &c) {
  KernelBuilder b("score_decode");
  ScoreArgs a = declareArgs(b, /*prefill=*/false);
  Value pid = b.programId();
  Value req = pid / a.gridBlocks;
  Value blk = a.blockBegin + (pid % a.gridBlocks) * a.blockStep;
  Value seqLen = loadI64(b, a.seqLens, req);
  b.ifThen(blk < blocksFor(seqLen), [&] {
    const int Q = c.queryRows;
    RowTile rt;
    rt.firstRow = loadI64(b, a.queryStartLoc, req);
    rt.qLimit = b.constInt(static_cast<int64_t>(Q) * c.numHeads * spec::kIndexHeadDim);
    for (int r = 0; r < Q; ++r) // row r sees L - Q + r + 1 tokens (at least 0)
      rt.rows.push_back({rt.firstRow + r, b.maxS(seqLen - (Q - r - 1), b.constInt(0))});
    rt.causalOf = [&](Value r) {
      return b.maxS(r + b.splat(seqLen - (Q - 1), r.type().lanes), b.splat(b.constInt(0), r.type().lanes));
    };
    Value tokens = b.minS(seqLen - blk * spec::kSparseBlockSize, b.constInt(spec::kSparseBlockSize));
    scoreBlock(b, a, c.numHeads, req, blk, rt, tokens);
  });
  return b.finish();
}

StatusOr<Kernel> buildScorePrefill(const KernelConfig &c) {
  KernelBuilder b("score_prefill");
  ScoreArgs a = declareArgs(b, /*prefill=*/true);
  Value pid = b.programId();
  Value tileId = pid / a.gridBlocks, blk = pid % a.gridBlocks;
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
  b.ifThen(blk < blocksFor(tileCausal), [&] {
    RowTile rt;
    rt.firstRow = rowBegin;
    rt.qLimit = numValid * (c.numHeads * spec::kIndexHeadDim);
    for (int r = 0; r < c.queryRows; ++r) {
      Value valid = b.constInt(r) < numValid;
      rt.rows.push_back({b.select(valid, rowBegin + r, rowBegin),
                         b.select(valid, causalOf(rowBegin + r - qStart), zero)});
    }
    rt.causalOf = [&](Value r) { // slots past numValid are padding: they see nothing
      const int n = r.type().lanes;
      Value seen = b.maxS(r + b.splat(seqLen - qLen + rowBegin - qStart + 1, n), b.splat(zero, n));
      return b.select(r < b.splat(numValid, n), seen, b.splat(zero, n));
    };
    Value tokens =
        b.minS(tileCausal - blk * spec::kSparseBlockSize, b.constInt(spec::kSparseBlockSize));
    scoreBlock(b, a, c.numHeads, req, blk, rt, tokens);
  });
  return b.finish();
}

} // namespace m3idx::kernels
