#include "kernels_src/LaunchPlan.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/Spec.h"
#include "dsl/Divisor.h"

namespace m3idx::kernels {

const char *stepBufferName(StepBuffer b) {
  static const char *const names[kStepBufferCount] = {
      "q",           "kv",        "block_table", "seq_lens", "query_start_loc", "tile_request",
      "tile_row_begin", "row_nblk", "scores",     "topk",     "partial",  "arrivals", "key_image",
      "image_base", "image_pages", "status", "program_flags"};
  return names[static_cast<int>(b)];
}

namespace {

// Builds one launch's argument list; every buffer it names is recorded with its extent.
class LaunchBuilder {
public:
  LaunchBuilder(StepPlan &plan, KernelKind kind, const KernelConfig &config, int64_t programs)
      : plan_(plan), launch_{kind, config, programs, {}} {}
  LaunchBuilder &buffer(StepBuffer b, int64_t elements) {
    launch_.args.push_back({stepBufferName(b), true, b, elements});
    int64_t &extent = plan_.elements[static_cast<int>(b)];
    extent = std::max(extent, elements);
    return *this;
  }
  LaunchBuilder &scalar(const char *name, int64_t v) {
    launch_.args.push_back({name, false, StepBuffer::Q, v});
    return *this;
  }
  Status add() {
    if (launch_.programs > std::numeric_limits<int32_t>::max())
      return invalidArgument(fmt::format("{} grid", kernelName(launch_.kind)), "at most 2^31 - 1 programs",
                             launch_.programs);
    if (launch_.programs > 0)
      plan_.launches.push_back(std::move(launch_));
    return Status();
  }

private:
  StepPlan &plan_;
  Launch launch_;
};

// What topk_decode reads of the score_decode grid(s) that scored its rows: their programs' flags
// and the split of a request's blocks over them (decodeRun's arguments).
struct ScoreFlags {
  int64_t programs = 0; // flags a request (0: none to read: host-validated rows)
  int64_t chunks = 1;   // programs a (request, row tile)
  int64_t runUnits = 1, activePrograms = 1, maxRun = 1;
  int64_t ranks = 1, rankStride = 0; // decode CP: every rank's grid, flags rankStride apart
};

// decodeRun's arguments for a score grid of `chunks` programs a (request, row tile) of `t`'s
// score_decode config. Its numerators must stay below dsl/Divisor.h's limit: at most
// active_programs x (max_run + 1).
StatusOr<ScoreFlags> scoreFlags(int64_t D, int64_t chunks, const StepTuning &t) {
  if (std::max<int64_t>(t.decodeActivePrograms, 1) * (std::max<int64_t>(t.decodeMaxBlocksPerProgram, 1) + 1) >=
      dsl::kNumeratorLimit)
    return Status::error(fmt::format("decode active programs ({}) x (blocks a program ({}) + 1) must be below 2^32",
                                     t.decodeActivePrograms, t.decodeMaxBlocksPerProgram));
  const KernelConfig &score = t.config(KernelKind::ScoreDecode);
  ScoreFlags f;
  f.programs = score.decodeRowTiles() * chunks;
  f.chunks = std::max<int64_t>(chunks, 1);
  f.runUnits = std::max<int64_t>(D * score.decodeRowTiles(), 1);
  f.activePrograms = std::max<int64_t>(t.decodeActivePrograms, 1);
  f.maxRun = std::max<int64_t>(t.decodeMaxBlocksPerProgram, 1);
  return f;
}

// The launches of a step: decode scoring on `decodeChunks` programs a request (0: none), prefill
// scoring, and top-k, after planStep's or planDeviceDecode's checks. Decode kernels check seq_lens
// against maxSeqLen. `scoreHeadRows`: rows between heads in the scores score_decode writes (0: the
// step's); `flagsFrom`: the grid that scored the decode rows when this plan has no score_decode
// (decode CP's top-k).
StatusOr<StepPlan> planLaunches(const BatchView &b, int64_t W, const StepTuning &t, unsigned parts,
                                DecodeBlocks blocks, int64_t decodeChunks, int64_t maxSeqLen,
                                int64_t scoreHeadRows = 0, const ScoreFlags *flagsFrom = nullptr) {
  const int H = b.params.numHeads;
  const int64_t T = b.numRows, R = b.numRequests, D = b.params.numDecodes;
  const int64_t decodeRows = D * b.params.decodeQueryLen, prefillRows = T - decodeRows;
  // topk_prefill loads a row's scores 16 at a time as wide loads aligned to 16 bytes (load.rows):
  // rows must start at multiples of 4 floats, as SPEC's widths (multiples of 64) do.
  if (W <= 0 || W % 4 != 0)
    return invalidArgument("score width", "a positive multiple of 4 (spec::scoreWidth's are of 64)", std::to_string(W));
  StepPlan plan;
  const int64_t scores = H * T * W, topk = H * T * spec::kTopkBlocks;
  const int64_t kvBytes = b.numPages * spec::kPageBytes;
  // What a score kernel reads of the batch: its queries, seq_lens and keys -- the pages through the
  // block table, or (imageBlocks > 0) the step's key image and each request's first image block.
  auto batch = [&](LaunchBuilder &l, int64_t imageBlocks = 0) -> LaunchBuilder & {
    l.buffer(StepBuffer::Q, T * H * spec::kIndexHeadDim);
    if (imageBlocks > 0)
      l.buffer(StepBuffer::KeyImage, imageBlocks * kKeyImageBlockBytes).buffer(StepBuffer::ImageBase, R);
    else
      l.buffer(StepBuffer::Kv, kvBytes).buffer(StepBuffer::BlockTable, R * b.maxBlocks);
    return l.buffer(StepBuffer::SeqLens, R);
  };
  auto scoreScalars = [&](LaunchBuilder &l, int64_t chunks, int64_t headRows) -> LaunchBuilder & {
    return l.scalar("num_rows", headRows).scalar("max_blocks", b.maxBlocks).scalar("width", W)
        .scalar("grid_chunks", chunks).scalar("init_blocks", b.params.initBlocks)
        .scalar("local_blocks", b.params.localBlocks);
  };
  StatusOr<ScoreFlags> own = scoreFlags(D, decodeChunks, t);
  if (!own.ok())
    return own.status();
  auto runScalars = [&](LaunchBuilder &l, const ScoreFlags &f) -> LaunchBuilder & {
    return l.scalar("run_units", f.runUnits).scalar("active_programs", f.activePrograms).scalar("max_run", f.maxRun);
  };
  // The flags the decode top-k reads: this plan's score programs', none (a host-validated step
  // without decode scoring), or flagsFrom's.
  ScoreFlags flags = flagsFrom ? *flagsFrom : *own;
  if (!flagsFrom && !((parts & kScoreDecode) && D > 0 && decodeChunks > 0))
    flags.programs = 0;
  if ((parts & kScoreDecode) && D > 0 && decodeChunks > 0) {
    const KernelConfig &score = t.config(KernelKind::ScoreDecode);
    const int64_t headRows = scoreHeadRows > 0 ? scoreHeadRows : T;
    LaunchBuilder l(plan, KernelKind::ScoreDecode, score, D * own->programs);
    scoreScalars(batch(l)
                     .buffer(StepBuffer::Scores, (H - 1) * headRows * W + T * W)
                     .buffer(StepBuffer::Status, kStatusWords)
                     .buffer(StepBuffer::ProgramFlags, D * own->programs),
                 decodeChunks, headRows)
        .scalar("block_begin", blocks.begin).scalar("block_step", blocks.step)
        .scalar("num_pages", b.numPages).scalar("max_seq_len", maxSeqLen);
    runScalars(l, *own);
    M3IDX_RETURN_IF_ERROR(l.add());
  }
  const KernelConfig &prefill = t.config(KernelKind::ScorePrefill);
  plan.rowTile = prefill.queryRows;
  const int64_t longestPrefill = maxRequestBlocks(b, D, R); // the score grid's and the top-k's
  // Short prefill rows (fusedTopkMaxBlocks): the last score program of a row tile to finish tops
  // its rows.
  const bool fusedTopk = t.fusedTopkTrip > 0 && (parts & kScorePrefill) && (parts & kTopkPrefill) &&
                         prefillRows > 0 && longestPrefill <= t.fusedTopkMaxBlocks;
  if ((parts & kScorePrefill) && prefillRows > 0) {
    plan.prefillTiles = prefillTileCount(b, plan.rowTile);
    // Row tiles that read each block many times: every block decoded once, into the key image.
    const int64_t imageBlocks = !fusedTopk && t.keyImageMinReads > 0 ? keyImageBlocks(b) : 0;
    if (imageBlocks > 0 &&
        keyImageReads(b, plan.rowTile) >= t.keyImageMinReads * imageBlocks + t.keyImageLaunchReads) {
      plan.imageBlocks = imageBlocks;
      LaunchBuilder d(plan, KernelKind::DecodeKeys, t.config(KernelKind::DecodeKeys), imageBlocks);
      d.buffer(StepBuffer::Kv, kvBytes)
          .buffer(StepBuffer::ImagePages, imageBlocks)
          .buffer(StepBuffer::KeyImage, imageBlocks * kKeyImageBlockBytes);
      M3IDX_RETURN_IF_ERROR(d.add());
    }
    const ScoreGrid g = scoreGrid(plan.prefillTiles, longestPrefill, t.prefillScorePrograms,
                                  t.prefillMaxBlocksPerProgram, t.prefillMinBlocksPerProgram);
    KernelConfig config = prefill;
    config.fusedTopkTrip = fusedTopk ? t.fusedTopkTrip : 0;
    config.keyImage = plan.imageBlocks > 0;
    LaunchBuilder l(plan, KernelKind::ScorePrefill, config, g.programs(plan.prefillTiles));
    scoreScalars(batch(l, plan.imageBlocks)
                     .buffer(StepBuffer::QueryStartLoc, R + 1)
                     .buffer(StepBuffer::TileRequest, plan.prefillTiles)
                     .buffer(StepBuffer::TileRowBegin, plan.prefillTiles)
                     .buffer(StepBuffer::Scores, scores),
                 g.chunks, T)
        .scalar("blocks_per_program", g.blocksPerProgram);
    if (fusedTopk) // a count of arrived programs per tile
      l.buffer(StepBuffer::Topk, topk).buffer(StepBuffer::Arrivals, plan.prefillTiles);
    M3IDX_RETURN_IF_ERROR(l.add());
  }
  // Rows too few to fill the target are cut into segments (topkSplit).
  auto topkLaunch = [&](KernelKind kind, int64_t rowBegin, int64_t rows) -> Status {
    const TopkSplit split = topkSplit(H * rows, W, t.topkPrograms);
    const int64_t partial = split.partialKeys(H * T);
    // Unsplit prefill rows, several a program while topkPrograms programs remain: up to
    // topkPrefillRows where every row has at most kShortTopkRowBlocks blocks, else
    // topkPrefillLongRows; rounded up to whole trips of the kernel's (its config's queryRows: a
    // GPU program's threads, each a row) where that stays within the most.
    int64_t rowsPerProgram = 1;
    if (kind == KernelKind::TopkPrefill && split.segments == 1) {
      const int64_t most = std::max<int64_t>(
          longestPrefill <= kShortTopkRowBlocks ? t.topkPrefillRows : t.topkPrefillLongRows, 1);
      const int64_t trip = std::max(t.config(kind).queryRows, 1);
      rowsPerProgram = std::clamp<int64_t>(H * rows / std::max<int64_t>(t.topkPrograms, 1), 1, most);
      rowsPerProgram = std::min(most, (rowsPerProgram + trip - 1) / trip * trip);
    }
    LaunchBuilder l(plan, kind, t.config(kind), (H * rows + rowsPerProgram - 1) / rowsPerProgram * split.segments);
    l.buffer(StepBuffer::Scores, scores);
    if (kind == KernelKind::TopkDecode)
      l.buffer(StepBuffer::SeqLens, R)
          .buffer(StepBuffer::ProgramFlags, std::max<int64_t>((flags.ranks - 1) * flags.rankStride + D * flags.programs, 1));
    else
      l.buffer(StepBuffer::RowBlocks, T);
    l.buffer(StepBuffer::Topk, topk).buffer(StepBuffer::Partial, partial)
        .buffer(StepBuffer::Arrivals, split.arrivals(H * T)).scalar("num_rows", T).scalar("width", W);
    if (kind == KernelKind::TopkDecode)
      runScalars(l.scalar("decode_rows", rows).scalar("max_seq_len", maxSeqLen).scalar("flag_programs", flags.programs)
                     .scalar("flag_chunks", flags.programs > 0 ? flags.chunks : 1).scalar("grid_rows", H * rows)
                     .scalar("flag_ranks", flags.ranks).scalar("flag_rank_stride", flags.rankStride),
                 flags);
    else
      l.scalar("row_begin", rowBegin).scalar("prefill_rows", rows).scalar("rows_per_program", rowsPerProgram)
          .scalar("head_rows", H * rows);
    l.scalar("segments", split.segments);
    return l.add();
  };
  if ((parts & kTopkDecode) && decodeRows > 0)
    M3IDX_RETURN_IF_ERROR(topkLaunch(KernelKind::TopkDecode, 0, decodeRows));
  if ((parts & kTopkPrefill) && prefillRows > 0 && !fusedTopk)
    M3IDX_RETURN_IF_ERROR(topkLaunch(KernelKind::TopkPrefill, decodeRows, prefillRows));
  return plan;
}

} // namespace

StatusOr<StepPlan> planStep(const BatchView &b, int64_t W, const StepTuning &t, unsigned parts,
                            DecodeBlocks blocks) {
  const int64_t T = b.numRows, D = b.params.numDecodes;
  const int64_t prefillRows = T - b.queryStartLoc[D];
  if (blocks.begin < 0 || blocks.step < 1 || (blocks.step > 1 && blocks.begin >= blocks.step))
    return invalidArgument("decode block range", "0 <= begin < step, step >= 1",
                           fmt::format("begin {}, step {}", blocks.begin, blocks.step));
  if (blocks.step > 1 && (parts & kScorePrefill) && prefillRows > 0)
    return invalidArgument("decode block range", "a decode-only batch (a CP rank's share)",
                           fmt::format("{} prefill rows", prefillRows));
  if (blocks.step > 1 && (parts & (kTopkDecode | kTopkPrefill)))
    return invalidArgument("decode block range", "score kernels only (a CP share's rows are completed by the exchange before top-k)",
                           fmt::format("begin {}, step {} with top-k", blocks.begin, blocks.step));
  // Validated lengths: the decode grid's chunks from the longest request, and a seq_len bound
  // (the table's and the scores' width) that no request passes.
  const int64_t units = D * t.config(KernelKind::ScoreDecode).decodeRowTiles(); // (request, row tile)
  const ScoreGrid g = scoreGrid(units, blockSlots(maxRequestBlocks(b, 0, D), blocks.begin, blocks.step),
                                t.decodeActivePrograms, t.decodeMaxBlocksPerProgram);
  return planLaunches(b, W, t, parts, blocks, g.chunks, std::min(b.maxBlocks, W) * spec::kSparseBlockSize);
}

namespace {

Status checkDeviceDecodeShape(const BatchView &shape, int64_t W, int64_t maxSeqLen) {
  const int64_t D = shape.params.numDecodes;
  if (shape.numRequests != D || shape.numRows != D * shape.params.decodeQueryLen)
    return invalidArgument("device decode shape", "decode requests only, decode_query_len rows each",
                           fmt::format("{} requests of which {} decodes, {} rows", shape.numRequests, D,
                                       shape.numRows));
  if (spec::blocksFor(maxSeqLen) > W)
    return invalidArgument("score width", fmt::format(">= {} blocks (max_seq_len {})",
                                                      spec::blocksFor(maxSeqLen), maxSeqLen),
                           W);
  return Status();
}

// Programs a (request, row tile) of a device decode's score grid scoring every `step`-th block:
// the target spread over them, no more than a request's most blocks.
int64_t deviceDecodeChunks(const BatchView &shape, int64_t maxSeqLen, const StepTuning &t, int64_t step) {
  const int64_t units = std::max<int64_t>(1, shape.params.numDecodes * t.config(KernelKind::ScoreDecode).decodeRowTiles());
  const int64_t mostBlocks = std::min(shape.maxBlocks, spec::blocksFor(maxSeqLen));
  const int64_t mostSlots = std::max<int64_t>(1, blockSlots(mostBlocks, 0, step));
  return std::clamp<int64_t>((t.decodeScorePrograms + units - 1) / units, 1, mostSlots);
}

} // namespace

StatusOr<StepPlan> planDeviceDecode(const BatchView &shape, int64_t W, int64_t maxSeqLen, const StepTuning &t) {
  M3IDX_RETURN_IF_ERROR(checkDeviceDecodeShape(shape, W, maxSeqLen));
  return planLaunches(shape, W, t, kAllParts, {}, deviceDecodeChunks(shape, maxSeqLen, t, 1),
                      std::min(maxSeqLen, shape.maxBlocks * spec::kSparseBlockSize));
}

StatusOr<SharePlans> planDeviceDecodeShare(const BatchView &shape, int64_t W, int64_t maxSeqLen,
                                           const StepTuning &group, const StepTuning &own, const DecodeShare &share) {
  M3IDX_RETURN_IF_ERROR(checkDeviceDecodeShape(shape, W, maxSeqLen));
  if (shape.params.numHeads != 1)
    return invalidArgument("decode CP heads", "1 a rank (SPEC §6)", shape.params.numHeads);
  if (share.ranks < 2 || share.rank < 0 || share.rank >= share.ranks)
    return invalidArgument("decode CP rank", "0 <= rank < ranks, ranks >= 2",
                           fmt::format("rank {} of {}", share.rank, share.ranks));
  if (share.scoreHeadRows < shape.numRows)
    return invalidArgument("decode CP score head rows", fmt::format(">= the step's {} rows", shape.numRows),
                           share.scoreHeadRows);
  BatchView g = shape; // the group's heads, one a rank, in rank order
  g.params.numHeads = share.ranks;
  const int64_t chunks = deviceDecodeChunks(g, maxSeqLen, group, share.ranks);
  const int64_t seqBound = std::min(maxSeqLen, shape.maxBlocks * spec::kSparseBlockSize);
  StatusOr<ScoreFlags> flags = scoreFlags(g.params.numDecodes, chunks, group);
  if (!flags.ok())
    return flags.status();
  flags->ranks = share.ranks;
  flags->rankStride = share.flagRankStride;
  if (share.flagRankStride < g.params.numDecodes * flags->programs)
    return invalidArgument("decode CP flag stride", fmt::format(">= a rank's {} flags", g.params.numDecodes * flags->programs),
                           share.flagRankStride);
  SharePlans plans;
  StatusOr<StepPlan> score = planLaunches(g, W, group, kScoreDecode, {share.rank, share.ranks}, chunks, seqBound,
                                          share.scoreHeadRows);
  if (!score.ok())
    return score.status();
  StatusOr<StepPlan> topk = planLaunches(shape, W, own, kTopkDecode, {}, 0, seqBound, 0, &*flags);
  if (!topk.ok())
    return topk.status();
  plans.score = std::move(*score);
  plans.topk = std::move(*topk);
  return plans;
}

KernelSignature signatureOf(const dsl::Kernel &kernel) {
  KernelSignature s;
  for (const dsl::BufferArg &b : kernel.buffers)
    s.buffers.push_back(b.name);
  for (const dsl::ScalarArgDecl &a : kernel.scalars)
    s.scalars.push_back(a.name);
  s.awaitsEarlierGrids = kernel.has(dsl::OpKind::GridAwait);
  return s;
}

StatusOr<KernelSignature> signatureOf(KernelKind kind, const KernelConfig &config) {
  StatusOr<dsl::Kernel> k = buildKernel(kind, config);
  if (!k.ok())
    return k.status();
  return signatureOf(*k);
}

Status bindLaunch(const KernelSignature &signature, const Launch &launch,
                  const std::function<void(StepBuffer, int64_t)> &buffer,
                  const std::function<void(int64_t)> &scalar) {
  auto find = [&](const std::string &name, bool isBuffer) -> const LaunchArg * {
    for (const LaunchArg &a : launch.args)
      if (a.isBuffer == isBuffer && name == a.name)
        return &a;
    return nullptr;
  };
  auto missing = [&](const std::string &name, const char *what) {
    return Status::error(fmt::format("the step plan gives {} ({}) no {} argument '{}'", kernelName(launch.kind),
                                     launch.config.str(), what, name));
  };
  for (const LaunchArg &a : launch.args) {
    const auto &names = a.isBuffer ? signature.buffers : signature.scalars;
    if (std::find(names.begin(), names.end(), a.name) == names.end())
      return Status::error(fmt::format("{} ({}) takes no {} argument '{}' that the step plan gives",
                                       kernelName(launch.kind), launch.config.str(),
                                       a.isBuffer ? "buffer" : "scalar", a.name));
  }
  for (const std::string &name : signature.buffers) {
    const LaunchArg *a = find(name, true);
    if (!a)
      return missing(name, "buffer");
    buffer(a->buffer, a->value);
  }
  for (const std::string &name : signature.scalars) {
    // A divisor's word is the plan's divisor value's (dsl/Divisor.h), never given by the plan.
    std::optional<std::string> divisor = dsl::divisorOfWordName(name);
    const LaunchArg *a = find(divisor ? *divisor : name, false);
    if (!a)
      return missing(divisor ? *divisor : name, "scalar");
    if (!divisor) {
      scalar(a->value);
      continue;
    }
    StatusOr<int64_t> word = dsl::divisorWord(a->value);
    if (!word.ok())
      return Status::error(fmt::format("{} ({}) argument '{}': {}", kernelName(launch.kind), launch.config.str(),
                                       *divisor, word.status().message()));
    scalar(*word);
  }
  return Status();
}

int64_t maxRequestBlocks(const BatchView &b, int64_t first, int64_t last) {
  int64_t m = 0;
  for (int64_t i = first; i < last; ++i)
    m = std::max<int64_t>(m, spec::blocksFor(b.seqLens[i]));
  return m;
}

ScoreGrid scoreGrid(int64_t units, int64_t blocks, int64_t targetPrograms, int64_t maxBlocksPerProgram,
                    int64_t minBlocksPerProgram) {
  ScoreGrid g;
  blocks = std::max<int64_t>(blocks, 1);
  const int64_t slots = units * blocks;
  const int64_t spread = slots / std::max<int64_t>(targetPrograms, 1);
  const int64_t longer = std::min(minBlocksPerProgram, slots / std::max<int64_t>(targetPrograms / 2, 1));
  g.blocksPerProgram = std::clamp<int64_t>(std::max(spread, longer), 1, maxBlocksPerProgram);
  g.chunks = (blocks + g.blocksPerProgram - 1) / g.blocksPerProgram;
  return g;
}

TopkSplit topkSplit(int64_t rows, int64_t blocks, int64_t targetPrograms) {
  TopkSplit t;
  t.segmentBlocks = std::max<int64_t>(blocks, 1);
  if (rows <= 0 || rows >= targetPrograms || blocks < 2 * kMinSegmentBlocks)
    return t;
  const int64_t wanted = std::min((targetPrograms + rows - 1) / rows, blocks / kMinSegmentBlocks);
  t.segmentBlocks = ((blocks + wanted - 1) / wanted + 31) / 32 * 32;
  t.segments = (blocks + t.segmentBlocks - 1) / t.segmentBlocks;
  return t;
}

namespace {
// Row tiles of request i: its rows in tiles of rowTile, the last one partial.
int32_t requestTiles(const BatchView &b, int64_t i, int rowTile) {
  return (b.queryStartLoc[i + 1] - b.queryStartLoc[i] + rowTile - 1) / rowTile;
}
} // namespace

int64_t prefillTileCount(const BatchView &b, int rowTile) {
  int64_t tiles = 0;
  for (int64_t i = b.params.numDecodes; i < b.numRequests; ++i)
    tiles += requestTiles(b, i, rowTile);
  return tiles;
}

// A request's tiles go last row first: a row sees at least what the row before it sees, so its
// tiles (and the programs of their chunks, in grid order) run longest first, and the grid ends on
// the last request's shortest tiles. Row order had ended it on the longest, which held a few SMs
// for a whole chunk of blocks while the others idled.
void fillPrefillTiles(const BatchView &b, int rowTile, int32_t *request, int32_t *rowBegin) {
  int64_t t = 0;
  for (int64_t i = b.params.numDecodes; i < b.numRequests; ++i) {
    for (int32_t k = requestTiles(b, i, rowTile) - 1; k >= 0; --k, ++t) {
      request[t] = static_cast<int32_t>(i);
      rowBegin[t] = b.queryStartLoc[i] + k * rowTile;
    }
  }
}

int64_t keyImageBlocks(const BatchView &b) {
  int64_t blocks = 0;
  for (int64_t i = b.params.numDecodes; i < b.numRequests; ++i)
    blocks += spec::blocksFor(b.seqLens[i]);
  return blocks;
}

int64_t keyImageReads(const BatchView &b, int rowTile) {
  int64_t reads = 0;
  for (int64_t i = b.params.numDecodes; i < b.numRequests; ++i) {
    const int64_t qLen = b.queryStartLoc[i + 1] - b.queryStartLoc[i];
    for (int64_t row = 0; row < qLen; row += rowTile) // a tile reads what its last row sees
      reads += spec::blocksFor(spec::causalLen(b.seqLens[i], qLen, std::min<int64_t>(row + rowTile, qLen) - 1));
  }
  return reads;
}

void fillKeyImage(const BatchView &b, int32_t *base, int32_t *pages) {
  int64_t at = 0;
  for (int64_t i = 0; i < b.numRequests; ++i) {
    base[i] = static_cast<int32_t>(at);
    if (i < b.params.numDecodes)
      continue;
    for (int64_t blk = 0; blk < spec::blocksFor(b.seqLens[i]); ++blk)
      pages[at++] = b.blockTable[i * b.maxBlocks + blk];
  }
}

void fillPrefillRowBlocks(const BatchView &b, int32_t *rowBlocks) {
  for (int64_t i = b.params.numDecodes; i < b.numRequests; ++i) {
    const int64_t begin = b.queryStartLoc[i], qLen = b.queryStartLoc[i + 1] - begin;
    for (int64_t r = 0; r < qLen; ++r)
      rowBlocks[begin + r] =
          static_cast<int32_t>(spec::blocksFor(spec::causalLen(b.seqLens[i], qLen, r)));
  }
}

} // namespace m3idx::kernels
