// NVFP4 score kernels (SPEC §4). One program scores a run of up to blocks_per_program KV blocks
// for a tile of query rows of one request: each key token is loaded and decoded once and dotted
// with every row and head of the tile. Decode tiles are a request's decode_query_len rows;
// prefill tiles are up to queryRows consecutive rows of one request (the config's row tile),
// listed by the runtime's tile table.
#include "kernels_src/ScoreKernels.h"

#include <functional>
#include <limits>

#include "core/Spec.h"

namespace m3idx::kernels {

using namespace dsl;

namespace {

// Decode programs check the metadata values they read (the device-metadata decode path gets no
// host validation): a seq_len outside [0, max_seq_len] or a page id outside [0, num_pages) is
// recorded in `status` (include/m3idx/Indexer.h's DeviceStatus words), page 0 is read in place of
// a bad page, and every program writes its `program_flags` entry (0, then 1 if it meets a bad
// page: written every step, so nothing is reset between steps or graph replays); topk_decode
// gives a request with a bad seq_len or a flagged program no blocks. Prefill metadata is always
// validated on the host.
struct ScoreArgs {
  Buffer q, kv, blockTable, seqLens, queryStartLoc, tileRequest, tileRowBegin, scores, status, programFlags;
  Buffer topk, arrivals; // prefill programs that top their tile's rows (KernelConfig::fusedTopkTrip)
  Buffer keyImage, imageBase; // KernelConfig::keyImage (then no kv and no block_table)
  Value numRows, maxBlocks, width, blocksPerProgram, initBlocks, localBlocks, blockBegin, numPages, maxSeqLen,
      maxRun;
  Divisor gridChunks, blockStep, runUnits, activePrograms; // what the prologue divides by
  bool checked = false; // decode: the checks above
  Value program;        // checked kernels: this program's flag's index
};

ScoreArgs declareArgs(KernelBuilder &b, bool prefill, bool fusedTopk = false, bool keyImage = false) {
  ScoreArgs a;
  a.checked = !prefill;
  a.q = b.buffer("q", Elem::I8, Access::Read);
  if (keyImage) {
    a.keyImage = b.buffer("key_image", Elem::I8, Access::Read);
    a.imageBase = b.buffer("image_base", Elem::I32, Access::Read);
  } else {
    a.kv = b.buffer("kv", Elem::I8, Access::Read);
    a.blockTable = b.buffer("block_table", Elem::I32, Access::Read);
  }
  a.seqLens = b.buffer("seq_lens", Elem::I32, Access::Read);
  if (prefill) {
    a.queryStartLoc = b.buffer("query_start_loc", Elem::I32, Access::Read);
    a.tileRequest = b.buffer("tile_request", Elem::I32, Access::Read);
    a.tileRowBegin = b.buffer("tile_row_begin", Elem::I32, Access::Read);
  }
  a.scores = b.buffer("scores", Elem::F32, fusedTopk ? Access::ReadWrite : Access::Write);
  if (fusedTopk) {
    a.topk = b.buffer("topk", Elem::I32, Access::Write);
    a.arrivals = b.buffer("arrivals", Elem::I32, Access::ReadWrite);
  }
  if (a.checked) {
    a.status = b.buffer("status", Elem::I64, Access::Write);
    a.programFlags = b.buffer("program_flags", Elem::I32, Access::Write);
  }
  a.numRows = b.scalarArg("num_rows", Elem::I64);
  a.maxBlocks = b.scalarArg("max_blocks", Elem::I64);
  a.width = b.scalarArg("width", Elem::I64);
  a.gridChunks = b.divisorArg("grid_chunks"); // programs per request (decode) or row tile
  if (prefill) // decode programs split their request's own blocks over the grid's chunks
    a.blocksPerProgram = b.scalarArg("blocks_per_program", Elem::I64);
  a.initBlocks = b.scalarArg("init_blocks", Elem::I64);
  a.localBlocks = b.scalarArg("local_blocks", Elem::I64);
  if (!prefill) { // decode CP: rank r scores blocks r, r + 4, ... with this same code
    a.blockBegin = b.scalarArg("block_begin", Elem::I64);
    a.blockStep = b.divisorArg("block_step");
    a.numPages = b.scalarArg("num_pages", Elem::I64);
    a.maxSeqLen = b.scalarArg("max_seq_len", Elem::I64);
    a.runUnits = b.divisorArg("run_units"); // decodeRun's
    a.activePrograms = b.divisorArg("active_programs");
    a.maxRun = b.scalarArg("max_run", Elem::I64);
  }
  return a;
}

// A bad value's status word: bit 62 set, then the request and the value (and a page id's block).
Value seqLenError(Value req, Value seqLen) { return (req << 32 | (seqLen & 0xFFFFFFFF)) | (int64_t{1} << 62); }
Value pageError(Value req, Value blk, Value page) {
  return ((req << 45) | (blk << 32) | (page & 0xFFFFFFFF)) | (int64_t{1} << 62);
}

// Records a bad value in its status word.
void report(KernelBuilder &b, const ScoreArgs &a, int word, Value code) { b.store(a.status, b.constInt(word), code); }

Value loadI64(KernelBuilder &b, Buffer buf, Value offset) {
  return b.load(buf, offset).to(Elem::I64);
}


// A program's query rows: rows [firstRow, firstRow + count) of the batch, of which the q elements
// below qLimit exist (rows past the batch's end read 0 and are padding, seeing no token).
struct RowTile {
  Value firstRow, qLimit;
  int count = 0;
  std::function<Value(Value)> causalOf; // i64 tile of row slots -> tokens each sees
  Value leastCausal;                    // a scalar no row slot sees fewer tokens than
  // For configs with narrowMask: causalOf(r) = max(r + causalBase, 0) for slots r < validRows, 0
  // past them (i64 scalars).
  Value causalBase, validRows;
};

// The blocks a program scores: slots [first, last) of its request's block list, slot i being
// block blockOf(i) (decode CP scores every blockStep-th block), in increasing block order.
// slotsBefore(n): how many slots of the whole list hold a block below block n.
struct BlockRange {
  Value first, last;
  std::function<Value(Value)> blockOf;
  std::function<Value(Value)> slotsBefore;
  // Optional: the table entry of block guessBlock, loaded before the range was known (guessPage,
  // unchecked); the first block's page is taken from it when that is the block.
  Value guessBlock, guessPage;
};

// A block's scores, lane n = (row slot n / heads, head n % heads), each stored where its row sees
// the block (SPEC §4's sentinels applied): one scatter, no per-row scalars kept across the loop.
struct BlockStore {
  BlockStore(KernelBuilder &b, const ScoreArgs &a, const RowTile &rt, int numHeads) : b(b), a(a), rt(rt) {
    TileShape rowHeads(b, {rt.count, numHeads});
    slotRow = rowHeads.index(0);
    slotHead = rowHeads.index(1);
  }
  void operator()(Value blk, Value best) const {
    Value nblk = spec::blocksFor(rt.causalOf(slotRow));
    Value s = b.select(blk < a.initBlocks, b.constF32(spec::kInitSentinel), best);
    s = b.select(blk >= nblk - a.localBlocks, b.constF32(spec::kLocalSentinel), s);
    Value at = (slotHead * a.numRows + rt.firstRow + slotRow) * a.width + blk;
    b.storeScatter(a.scores, at, s, blk < nblk);
  }
  KernelBuilder &b;
  const ScoreArgs &a;
  const RowTile &rt;
  Value slotRow, slotHead;
};

// Scores every block of `range` of request `req` for every row of the tile and every head. A
// block is 128 / T tiles of T key tokens (the config's token tile); each tile is one dot.tiles of (tokens
// x 128) against (rows*heads x 128), which matrix units run as one MFMA / MMA tile, into a running
// max per (token slot, row, head), reduced over the slots and stored after the block's last tile.
// Loops nest as blocks, then tiles: a tile's address is its block's page plus a constant step,
// and the max starts afresh per block, so the per-tile work is the decode, the dot and the max
// (one loop over all tiles spends about 1.6x the instructions per tile, on index arithmetic and
// block-end selects: bench/RESULTS.md). Software-pipelined by hand: the loads of the next
// c.tilesAhead tiles (the next block's first ones near a block's end, its page read one block
// ahead) are in flight while a tile is scored, as loop-carried values -- a prefetch across the two
// loops, which pipelinedFor (one loop's next trip) does not express.
void scoreBlocks(KernelBuilder &b, const ScoreArgs &a, const KernelConfig &c, Value req, const BlockRange &range,
                 const RowTile &rt) {
  const int numHeads = c.numHeads, D = spec::kIndexHeadDim, T = c.tokenTile, steps = spec::kSparseBlockSize / T;
  const int N = rt.count * numHeads; // (row, head) pairs, row-major

  Value q; // [rows, heads, 128] of q: loaded below, after the first key tiles
  // The running max per (token slot, row, head): T slots, or T / 2 when tiles fold token pairs.
  const int slots = c.foldTokenPairs ? T / 2 : T;
  Value negInf = b.splat(b.constF32(-std::numeric_limits<double>::infinity()), N * T);
  Value negInfSlots =
      slots == T ? negInf : b.splat(b.constF32(-std::numeric_limits<double>::infinity()), N * slots);

  // Byte offset of the page of slot i (in the key image: of its block's keys); only slots in
  // [first, last) are read.
  const bool image = c.keyImage;
  Value imageBlock0 = image ? loadI64(b, a.imageBase, req) : Value(); // the request's block 0
  auto pageOf = [&](Value i, bool first = false) {
    Value blk = range.blockOf(i);
    if (image)
      return (imageBlock0 + blk) * kKeyImageBlockBytes;
    auto load = [&] { return loadI64(b, a.blockTable, req * a.maxBlocks + blk); };
    Value page = first && range.guessPage.id().valid()
                     ? b.ifElse(blk == range.guessBlock, [&] { return Values{range.guessPage}; },
                                [&] { return Values{load()}; })[0]
                     : load();
    if (!a.checked)
      return page * spec::kPageBytes;
    // A bad id is reported where it is met (a branch not taken on good metadata: nothing is
    // carried through the loops, whose registers are counted) and page 0 read in its place.
    Value ok = ltU(page, a.numPages);
    b.ifThen(b.select(ok, b.constInt(0), b.constInt(1)) != 0, [&] {
      report(b, a, 1, pageError(req, blk, page));
      b.store(a.programFlags, a.program, b.constInt(1, Elem::I32));
    });
    return b.select(ok, page, b.constInt(0)) * spec::kPageBytes;
  };
  // Pages are 9216 = 16 x 576 bytes and tiles start at multiples of 16 tokens: both loads are
  // 16-byte aligned when kv is (SPEC §3's reason for splitting data and scales).
  auto loadTile = [&](Value page, Value tile) {
    Value tok0 = tile * T;
    if (image) // 128 bytes a token: the tile's keys whole
      return Values{b.loadTile(a.keyImage, page + tok0 * D, T * D, 16)};
    return Values{b.loadTile(a.kv, page + tok0 * spec::kDataBytesPerToken, T * spec::kDataBytesPerToken, 16),
                  b.loadTile(a.kv, page + spec::kPageDataBytes + tok0 * spec::kScalesPerToken,
                             T * spec::kScalesPerToken, 16)};
  };
  const BlockStore storeBlock(b, a, rt, numHeads);
  // Slots [lo, hi); carried: the page of slot lo and its first `ahead` tiles' (data, scales) --
  // or keys, from the image -- in order. The last block reloads its own first tiles as the
  // "next" ones (in the page, unused).
  const size_t perTile = image ? 1 : 2;
  auto keysOf = [&](const Values &tile) { // jt[1..]: the tile being scored
    return image ? tile[1].bitcast(Elem::F8E4M3FN) : b.decodeNvfp4(tile[1], tile[2]);
  };
  // Only masked loops compare token positions: fmaxf drops NaN dots; invisible tokens count as -inf.
  const int ahead = c.tilesAhead;
  auto blockLoop = [&](Value lo, Value hi, const Values &init, bool masked) {
    return b.forLoop(lo, hi, b.constInt(1), init, [&](Value i, const Values &it) {
      Value page = it[0], nextPage = pageOf(b.minS(i + 1, range.last - 1));
      Value blk = range.blockOf(i);
      // The loop over a whole block's tiles may run blockUnroll per trip (a hint to the
      // lowering); the masked one runs once or twice per program and stays rolled.
      Values carried = {negInfSlots};
      carried.insert(carried.end(), it.begin() + 1, it.end());
      Values tiles = b.forLoop(
          b.constInt(0), b.constInt(steps), b.constInt(1), carried,
          [&](Value t, const Values &jt) {
            // tile t + ahead of the stream: in the next block's page from t = steps - ahead on
            Value inNext = ahead == 1 ? t == b.constInt(steps - 1) : t >= b.constInt(steps - ahead);
            Value at = ahead == 1 ? b.select(inNext, b.constInt(0), t + 1)
                                  : b.select(inNext, t + (ahead - steps), t + ahead);
            Values next = loadTile(b.select(inNext, nextPage, page), at);
            Value dots = b.dotTiles(keysOf(jt), q, D);
            // a dot.tiles result is rows x heads x tokens (the lanes are made here, not before the
            // loops: live across the unmasked loop, they cost it registers)
            if (masked && !c.narrowMask) {
              TileShape lanes(b, {rt.count, numHeads, T});
              Value tok = blk * spec::kSparseBlockSize + t * T + lanes.index(2);
              dots = b.select(tok < rt.causalOf(lanes.index(0)), dots, negInf);
            } else if (masked) {
              // Token m of this tile is seen by its row iff m - row < causalBase - (the tile's
              // first token), rows past validRows seeing none: one i32 per lane that does not
              // change in the loop.
              TileShape lanes(b, {rt.count, numHeads, T}, Elem::I32);
              Value row = lanes.index(0), past = lanes.index(2) - row;
              past = b.select(row < rt.validRows.to(Elem::I32), past, b.constInt(INT32_MAX, Elem::I32));
              Value seen = rt.causalBase - (blk * spec::kSparseBlockSize + t * T);
              dots = b.select(past < seen.to(Elem::I32), dots, negInf);
            }
            if (c.foldTokenPairs) // tokens m and m + 8 of each 16
              dots = b.foldMax(dots, 8);
            Values out = {b.maxNumF(jt[0], dots)};
            out.insert(out.end(), jt.begin() + 1 + perTile, jt.end());
            out.insert(out.end(), next.begin(), next.end());
            return out;
          },
          masked ? 1 : c.blockUnroll);
      storeBlock(blk, b.reduceMaxGroups(tiles[0], N));
      Values out = {nextPage};
      out.insert(out.end(), tiles.begin() + 1, tiles.end());
      return out;
    });
  };
  // Blocks every row of the tile sees whole come first and need no mask; the rest (the last block
  // or two of a row tile; slots past a sequence's end are inside its last page) are masked. The
  // second loop takes over the first's prefetched tile.
  Value whole = b.maxS(b.minS(range.slotsBefore(rt.leastCausal / spec::kSparseBlockSize), range.last),
                       range.first);
  Value firstPage = pageOf(range.first, /*first=*/true);
  Values init = {firstPage};
  for (int t = 0; t < ahead; ++t)
    for (Value v : loadTile(firstPage, b.constInt(t)))
      init.push_back(v);
  // [rows, heads, 128] of q is one contiguous tile, loaded once per program, after the first
  // tiles' loads are issued: targets stage it through shared memory behind a barrier, which
  // ahead of them had put its latency in every short program's chain (metadata, q, page, tiles).
  // (rows of H x 128 bytes: 16-byte aligned, and rows past the limit whole parts of a thread's)
  q = b.loadTile(a.q, rt.firstRow * (numHeads * D), N * D, rt.qLimit, 16).bitcast(Elem::F8E4M3FN);
  blockLoop(whole, range.last, blockLoop(range.first, whole, init, false), true);
}

// The same as scoreBlocks for a prefill row tile (KernelConfig::keyStages), as a staged loop over
// whole blocks: the producer reads a block's page (its table entry, 8192 code bytes and 1024
// scales) and decodes its 128 tokens; the work dots them with every (row, head) column at once,
// masks the tokens a row does not see where not every row sees the whole block, and stores each
// column's max. On a target with producer warps the decode runs beside the dots, the keys handed
// over in a ring of keyStages buffers (FlashAttention-3's layout: queries as M, keys as N, the max
// over a block's tokens inside a thread's columns); elsewhere trip by trip.
void scoreBlocksStaged(KernelBuilder &b, const ScoreArgs &a, const KernelConfig &c, Value req,
                       const BlockRange &range, const RowTile &rt) {
  const int numHeads = c.numHeads, D = spec::kIndexHeadDim, B = spec::kSparseBlockSize;
  const int N = rt.count * numHeads;
  Value q = b.loadTile(a.q, rt.firstRow * (numHeads * D), N * D, rt.qLimit, 16).bitcast(Elem::F8E4M3FN);
  const BlockStore storeBlock(b, a, rt, numHeads);
  Value negInf = b.splat(b.constF32(-std::numeric_limits<double>::infinity()), N * B);
  b.stagedFor(
      range.first, range.last, c.keyStages, {},
      [&](Value i) {
        Value page = loadI64(b, a.blockTable, req * a.maxBlocks + range.blockOf(i)) * spec::kPageBytes;
        return Values{b.decodeNvfp4(b.loadTile(a.kv, page, B * spec::kDataBytesPerToken, 16),
                                    b.loadTile(a.kv, page + spec::kPageDataBytes, B * spec::kScalesPerToken, 16))};
      },
      [&](Value i, const Values &keys, const Values &) {
        Value blk = range.blockOf(i);
        Value dots = b.dotTiles(keys[0], q, D); // rows x heads x tokens
        // Every row sees tokens below leastCausal: only blocks reaching past it are masked.
        Value whole = blk * B + B <= rt.leastCausal;
        dots = b.ifElse(whole, [&] { return Values{dots}; },
                        [&] {
                          TileShape lanes(b, {rt.count, numHeads, B});
                          Value tok = blk * B + lanes.index(2);
                          return Values{b.select(tok < rt.causalOf(lanes.index(0)), dots, negInf)};
                        })[0];
        // (tokens m and m + 64 first: a group's max over at most 64 lanes, as every target takes)
        storeBlock(blk, b.reduceMaxGroups(b.foldMax(dots, B / 2), N));
        return Values{};
      });
}

// A program's slots: [chunk * perProgram, + perProgram) of `slots`.
BlockRange chunkOf(KernelBuilder &b, Value chunk, Value perProgram, Value slots,
                   std::function<Value(Value)> blockOf, std::function<Value(Value)> slotsBefore) {
  Value first = chunk * perProgram;
  return {first, b.minS(first + perProgram, slots), std::move(blockOf), std::move(slotsBefore)};
}

} // namespace

Value decodeRun(KernelBuilder &b, Value slots, const Divisor &gridChunks, Value units, const Divisor &activePrograms,
                Value maxRun) {
  Value fit = divide(slots + (gridChunks.value - 1), gridChunks);
  // Past maxRun runs the spread is maxRun: capping the numerator there keeps it a divide()
  // numerator whatever the step's size (the plan bounds active_programs x (max_run + 1)).
  Value demand = b.minS(slots * units, maxRun * activePrograms.value);
  Value spread = b.minS(divide(demand + (activePrograms.value - 1), activePrograms), maxRun);
  return b.maxS(b.maxS(fit, spread), b.constInt(1));
}

StatusOr<Kernel> buildScoreDecode(const KernelConfig &c) {
  KernelBuilder b("score_decode", c.warps);
  ScoreArgs a = declareArgs(b, /*prefill=*/false);
  // The top-k's programs may start as soon as all of these have (they await this kernel's end
  // before reading what it writes), so that theirs is not a second launch after it.
  b.releaseNextGrid();
  const int Q = c.queryRows, tiles = c.decodeRowTiles(), R = c.decodeTileRows();
  Value pid = b.programId();
  // Programs are (chunk, request, row tile), (request, row tile) fastest: a step's programs that
  // have blocks (a request's first chunks, decodeRun) come first in the grid and the empty rest,
  // a graph's capacity, after them -- interleaved, the empty ones held residency slots the working
  // ones waited for (bench/RESULTS.md, 2026-12-03 (4)). Flags stay request-major, chunk fastest.
  const QuotientRemainder byUnit = divideWithRemainder(pid, a.runUnits);
  Value chunk = byUnit.quotient, unit = byUnit.remainder;
  Value req = unit / tiles, tile = unit % tiles;
  // seq_len is in [0, max_seq_len] (0: a padding request, no blocks; below q_len a request's
  // first rows see nothing, as validateBatch allows), or flagged and scored as padding.
  Value given = loadI64(b, a.seqLens, req);
  // The page of the program's first block if its run is one block (a short step's programs): its
  // table entry is loaded beside seq_len rather than after it, one memory latency off the chain
  // of a small step (unchecked here; clamped into the request's row of the table).
  Value guessBlock = b.minS(a.blockBegin + chunk * a.blockStep.value, a.maxBlocks - 1);
  Value guessPage = loadI64(b, a.blockTable, req * a.maxBlocks + guessBlock);
  Value valid = b.select(ltU(a.maxSeqLen, given), b.constInt(0), b.constInt(1)); // negatives too
  Value first = b.select(chunk == 0, tile == 0, chunk == 0); // one program a request reports it
  b.ifThen(b.select(first, valid, b.constInt(1)) == 0, [&] { report(b, a, 0, seqLenError(req, given)); });
  Value seqLen = b.select(valid == 1, given, b.constInt(0));
  // This rank's blocks of the request: blockBegin + i * blockStep for i < slots, in runs of
  // decodeRun over the request's grid_chunks programs, so that a grid sized from shapes alone
  // splits every request by its own length.
  auto slotsBefore = [&](Value n) { // slots i with blockBegin + i * blockStep < n
    return divide(b.maxS(n - a.blockBegin + (a.blockStep.value - 1), b.constInt(0)), a.blockStep);
  };
  Value slots = slotsBefore(spec::blocksFor(seqLen));
  BlockRange range = chunkOf(b, chunk, decodeRun(b, slots, a.gridChunks, a.runUnits.value, a.activePrograms, a.maxRun),
                             slots, [&](Value i) { return a.blockBegin + i * a.blockStep.value; }, slotsBefore);
  range.guessBlock = guessBlock;
  range.guessPage = guessPage;
  // The program's flag: 0 first, then 1 where a bad page is met (pageOf, in program order).
  a.program = unit * a.gridChunks.value + chunk;
  b.store(a.programFlags, a.program, b.constInt(0, Elem::I32));
  b.ifThen(range.first < range.last, [&] {
    // The tile's rows: [tile * R, + R) of the request's Q, decode requests first with Q rows each;
    // a last tile past Q has padding slots, which see nothing.
    Value rowBegin = tile * R;
    Value zero = b.constInt(0);
    RowTile rt;
    rt.firstRow = req * Q + rowBegin;
    rt.count = R;
    // row r of the request sees L - Q + r + 1 tokens (at least 0)
    Value causalBase = seqLen - (Q - 1) + rowBegin;
    const bool ragged = Q % R != 0;
    Value validRows = ragged ? b.minS(b.constInt(Q) - rowBegin, b.constInt(R)) : b.constInt(R);
    rt.qLimit = validRows * (c.numHeads * spec::kIndexHeadDim);
    rt.causalOf = [&, ragged](Value r) {
      Value sees = b.maxS(r + causalBase, zero);
      return ragged ? b.select(r < validRows, sees, zero) : sees;
    };
    rt.leastCausal = ragged ? b.select(validRows == R, b.maxS(causalBase, zero), zero) : b.maxS(causalBase, zero);
    if (c.narrowMask) {
      rt.causalBase = causalBase;
      rt.validRows = validRows;
    }
    scoreBlocks(b, a, c, req, range, rt);
  });
  return b.finish();
}

StatusOr<Kernel> buildScorePrefill(const KernelConfig &c) {
  KernelBuilder b("score_prefill", c.warps);
  const bool fused = c.fusedTopkTrip > 0;
  ScoreArgs a = declareArgs(b, /*prefill=*/true, /*fusedTopk=*/fused, c.keyImage);
  b.releaseNextGrid(); // as score_decode's
  Value pid = b.programId();
  Value tileId = divide(pid, a.gridChunks);
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
  // The tile's blocks, and which of the tile's grid_chunks programs this one is.
  Value tileBlocks = spec::blocksFor(tileCausal), chunk = pid - tileId * a.gridChunks.value;
  BlockRange range = chunkOf(b, chunk, a.blocksPerProgram, tileBlocks,
                             [](Value i) { return i; }, [](Value n) { return n; });
  b.ifThen(range.first < range.last, [&] {
    RowTile rt;
    rt.firstRow = rowBegin;
    rt.qLimit = numValid * (c.numHeads * spec::kIndexHeadDim);
    rt.count = c.queryRows;
    // the first row sees least; with padding slots (which see nothing) no tile is seen whole
    rt.leastCausal = b.select(numValid == b.constInt(c.queryRows), causalOf(rowBegin - qStart), zero);
    rt.causalBase = seqLen - qLen + rowBegin - qStart + 1;
    rt.validRows = numValid;
    rt.causalOf = [&](Value r) { // slots past numValid are padding: they see nothing
      return b.select(r < numValid, b.maxS(r + rt.causalBase, zero), zero);
    };
    if (c.keyStages > 0)
      scoreBlocksStaged(b, a, c, req, range, rt);
    else
      scoreBlocks(b, a, c, req, range, rt);
  });
  if (fused) {
    // The tile's programs with blocks (at least its first, which tops a tile that sees none) each
    // count themselves in; the last to arrive has every score of the tile's rows (an atomic orders
    // the others' stores before its loads) and tops them, then zeroes the count for the next step
    // (arrivals are 0 between steps, as topk_decode's). So the split of the tile's blocks over the
    // grid stays, and the step has no topk_prefill launch.
    // Head row i of the tile is (row i / H, head i % H), as BlockStore's lanes: the tile's valid
    // rows are i < numValid x H (the padding rows past them are the next request's, or past the
    // batch's end, and are neither read nor written).
    Value used = b.maxS((tileBlocks + (a.blocksPerProgram - 1)) / a.blocksPerProgram, b.constInt(1));
    b.ifThen(chunk < used, [&] {
      Value last = b.ifElse(used == 1, [&] { return Values{b.constInt(1, Elem::I1)}; },
                            [&] {
                              Value before = b.atomicAdd(a.arrivals, tileId, b.constInt(1, Elem::I32));
                              return Values{before.to(Elem::I64) == used - 1};
                            })[0];
      b.ifThen(last, [&] {
        b.ifThen(used > 1, [&] { b.store(a.arrivals, tileId, b.constInt(0, Elem::I32)); });
        const int H = c.numHeads, R = c.fusedTopkTrip;
        Value causalBase = seqLen - qLen + rowBegin - qStart + 1, headRows = numValid * H;
        Value tripLanes = b.iota(R);
        TripRows rows;
        rows.lengths = [&](Value trip) {
          Value i = trip + tripLanes;
          return b.select(i < headRows, spec::blocksFor(b.maxS(i / H + causalBase, zero)), zero).to(Elem::I32);
        };
        rows.headRow = [&](Value at) { return (at % H) * a.numRows + rowBegin + at / H; };
        rows.width = a.width;
        rows.longest = tileBlocks; // the tile's last valid row sees most
        b.programSync(); // its own lanes' stores, where no atomic ordered them
        topkTrips(b, a.scores, a.topk, R, zero, headRows, rows.lengths(zero), rows);
      });
    });
  }
  return b.finish();
}

// Program j writes block j of the step's key image: the 128 keys of page image_pages[j] (SPEC
// §2's elements, e4m3), 128 bytes a token, T tokens a trip (KernelConfig::tokenTile). A prefill
// step whose row tiles read each block many times decodes it here once, and score_prefill's
// keyImage form loads the keys (kernels_src/LaunchPlan.cpp says which steps). Prefill metadata is
// validated on the host: every page id is in range.
StatusOr<Kernel> buildDecodeKeys(const KernelConfig &c) {
  KernelBuilder b("decode_keys", c.warps);
  Buffer kv = b.buffer("kv", Elem::I8, Access::Read);
  Buffer pages = b.buffer("image_pages", Elem::I32, Access::Read);
  Buffer image = b.buffer("key_image", Elem::I8, Access::Write);
  const int T = c.tokenTile, D = spec::kIndexHeadDim;
  Value j = b.programId();
  Value page = loadI64(b, pages, j) * spec::kPageBytes, block = j * kKeyImageBlockBytes;
  b.forLoop(b.constInt(0), b.constInt(spec::kSparseBlockSize / T), b.constInt(1), {}, [&](Value t, const Values &) {
    Value tok0 = t * T;
    Value keys = b.decodeNvfp4(b.loadTile(kv, page + tok0 * spec::kDataBytesPerToken, T * spec::kDataBytesPerToken, 16),
                               b.loadTile(kv, page + spec::kPageDataBytes + tok0 * spec::kScalesPerToken,
                                          T * spec::kScalesPerToken, 16));
    b.storeTile(image, block + tok0 * D, keys.bitcast(Elem::I8), 16);
    return Values{};
  });
  return b.finish();
}

} // namespace m3idx::kernels
