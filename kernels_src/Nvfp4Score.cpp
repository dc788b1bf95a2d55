// NVFP4 score kernels (SPEC §4). One program scores one KV block for a tile of query rows of one
// request: each key token is loaded and decoded once and dotted with every row and head of the
// tile. Decode tiles are a request's decode_query_len rows; prefill tiles are up to
// kPrefillRowTile consecutive rows of one request, listed by the runtime's tile table.
#include "kernels_src/ScoreKernels.h"

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

// Scores block `blk` of request `req` for every row of the tile and every head.
void scoreBlock(KernelBuilder &b, const ScoreArgs &a, int numHeads, Value req, Value blk,
                const std::vector<TileRow> &rows, Value tokens) {
  const int D = spec::kIndexHeadDim;
  Value page = loadI64(b, a.blockTable, req * a.maxBlocks + blk);
  Value pageBase = page * spec::kPageBytes;

  // Query rows as f32, loaded once per program.
  std::vector<Value> qf, accs;
  for (const TileRow &r : rows)
    for (int h = 0; h < numHeads; ++h) {
      Value bytes = b.loadTile(a.q, (r.row * numHeads + h) * D, D);
      qf.push_back(b.convert(OpKind::ExtF, b.convert(OpKind::Bitcast, bytes, Elem::F8E4M3FN),
                             Elem::F32));
      accs.push_back(b.constF32(-std::numeric_limits<double>::infinity()));
    }

  Value tokenBase = blk * spec::kSparseBlockSize;
  Value zero = b.constInt(0), one = b.constInt(1);
  Values best = b.forLoop(zero, tokens, one, accs, [&](Value t, const Values &acc) {
    Value packed = b.loadTile(a.kv, pageBase + t * spec::kDataBytesPerToken,
                              spec::kDataBytesPerToken);
    Value scales = b.loadTile(a.kv, pageBase + spec::kPageDataBytes + t * spec::kScalesPerToken,
                              spec::kScalesPerToken);
    Value key = b.convert(OpKind::ExtF, b.decodeNvfp4(packed, scales), Elem::F32);
    Value pos = tokenBase + t;
    Values next;
    for (size_t r = 0; r < rows.size(); ++r) {
      Value visible = pos < rows[r].causal;
      for (int h = 0; h < numHeads; ++h) {
        Value prev = acc[r * numHeads + h];
        Value dot = b.dot(qf[r * numHeads + h], key);
        next.push_back(b.select(visible, b.maxNumF(prev, dot), prev)); // fmaxf drops NaN dots
      }
    }
    return next;
  });

  Value local = b.constF32(spec::kLocalSentinel), init = b.constF32(spec::kInitSentinel);
  for (size_t r = 0; r < rows.size(); ++r) {
    Value nblk = blocksFor(rows[r].causal);
    b.ifThen(blk < nblk, [&] {
      for (int h = 0; h < numHeads; ++h) {
        Value s = b.select(blk >= nblk - a.localBlocks, local,
                           b.select(blk < a.initBlocks, init, best[r * numHeads + h]));
        b.store(a.scores, (b.constInt(h) * a.numRows + rows[r].row) * a.width + blk, s);
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
    Value row0 = loadI64(b, a.queryStartLoc, req);
    std::vector<TileRow> rows;
    for (int r = 0; r < c.queryRows; ++r) // row r sees L - Q + r + 1 tokens (at least 0)
      rows.push_back({row0 + r, b.maxS(seqLen - (c.queryRows - r - 1), b.constInt(0))});
    Value tokens = b.minS(seqLen - blk * spec::kSparseBlockSize, b.constInt(spec::kSparseBlockSize));
    scoreBlock(b, a, c.numHeads, req, blk, rows, tokens);
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
    std::vector<TileRow> rows;
    for (int r = 0; r < c.queryRows; ++r) {
      Value valid = b.constInt(r) < numValid;
      rows.push_back({b.select(valid, rowBegin + r, rowBegin),
                      b.select(valid, causalOf(rowBegin + r - qStart), zero)});
    }
    Value tokens =
        b.minS(tileCausal - blk * spec::kSparseBlockSize, b.constInt(spec::kSparseBlockSize));
    scoreBlock(b, a, c.numHeads, req, blk, rows, tokens);
  });
  return b.finish();
}

} // namespace m3idx::kernels
