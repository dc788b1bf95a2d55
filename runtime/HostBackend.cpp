#include "runtime/HostBackend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "core/Spec.h"
#include "kernels_src/LaunchPlan.h"
#include "runtime/KernelArgs.h"
#include "runtime/ThreadPool.h"

namespace m3idx::runtime {

using kernels::KernelKind;
using kernels::maxRequestBlocks;

namespace {

// Programs per chunk taken by a thread: small enough to balance, large enough that the counter
// is not contended.
constexpr int64_t kChunk = 8;

int64_t decodeRows(const BatchView &b) { return b.queryStartLoc[b.params.numDecodes]; }

void addBatchBuffers(KernelArgs &a, const BatchView &b) {
  a.buffer(b.q, b.numRows * b.params.numHeads * spec::kIndexHeadDim)
      .buffer(b.kv, b.numPages * spec::kPageBytes)
      .buffer(b.blockTable, b.numRequests * b.maxBlocks)
      .buffer(b.seqLens, b.numRequests)
      .buffer(b.queryStartLoc, b.numRequests + 1);
}

int64_t scoreCount(const BatchView &b, int64_t width) { return b.params.numHeads * b.numRows * width; }

void launch(const lowering::HostKernel &k, const KernelArgs &a, int64_t programs) {
  parallelFor(programs, kChunk, [&](int64_t s, int64_t e) { a.call(k, s, e); });
}

} // namespace

int64_t HostBackend::compileCount() const {
  int64_t n = 0;
  for (const KernelRecord &r : kernelRecords())
    n += r.source == KernelSource::Compiled;
  return n;
}

Status HostBackend::scoreDecode(const BatchView &b, int64_t width, float *scores,
                                int64_t blockBegin, int64_t blockStep) {
  const int64_t D = b.params.numDecodes;
  if (D == 0)
    return Status();
  auto k = kernel(KernelKind::ScoreDecode,
                  kernels::configFor(KernelKind::ScoreDecode, b.params.numHeads,
                                     b.params.decodeQueryLen));
  if (!k.ok())
    return k.status();
  const int64_t blocks = maxRequestBlocks(b, 0, D);
  const kernels::ScoreGrid grid = kernels::scoreGrid(
      D, kernels::blockSlots(blocks, blockBegin, blockStep), kernels::kHostScorePrograms);
  KernelArgs a;
  addBatchBuffers(a, b);
  a.buffer(scores, scoreCount(b, width)).scalar(b.numRows).scalar(b.maxBlocks).scalar(width)
      .scalar(grid.chunks).scalar(grid.blocksPerProgram).scalar(b.params.initBlocks)
      .scalar(b.params.localBlocks).scalar(blockBegin).scalar(blockStep);
  launch(**k, a, grid.programs(D));
  return Status();
}

Status HostBackend::scorePrefill(const BatchView &b, int64_t width, float *scores) {
  const int64_t D = b.params.numDecodes, R = b.numRequests;
  const kernels::KernelConfig config =
      kernels::configFor(KernelKind::ScorePrefill, b.params.numHeads, b.params.decodeQueryLen, prefill_);
  const int64_t tiles = kernels::prefillTileCount(b, config.queryRows);
  if (tiles == 0)
    return Status();
  int32_t *tileRequest = tileRequest_.ensure(tiles), *tileRowBegin = tileRowBegin_.ensure(tiles);
  kernels::fillPrefillTiles(b, config.queryRows, tileRequest, tileRowBegin);
  auto k = kernel(KernelKind::ScorePrefill, config);
  if (!k.ok())
    return k.status();
  const kernels::ScoreGrid grid = kernels::scoreGrid(tiles, maxRequestBlocks(b, D, R), kernels::kHostScorePrograms);
  KernelArgs a;
  addBatchBuffers(a, b);
  a.buffer(tileRequest, tiles).buffer(tileRowBegin, tiles).buffer(scores, scoreCount(b, width))
      .scalar(b.numRows).scalar(b.maxBlocks).scalar(width).scalar(grid.chunks)
      .scalar(grid.blocksPerProgram).scalar(b.params.initBlocks).scalar(b.params.localBlocks);
  launch(**k, a, grid.programs(tiles));
  return Status();
}

Status HostBackend::topkDecode(const BatchView &b, int64_t width, const float *scores,
                               int32_t *topk) {
  const int64_t rows = decodeRows(b);
  if (rows == 0)
    return Status();
  auto k = kernel(KernelKind::TopkDecode,
                  kernels::configFor(KernelKind::TopkDecode, b.params.numHeads,
                                     b.params.decodeQueryLen));
  if (!k.ok())
    return k.status();
  const int64_t H = b.params.numHeads;
  const kernels::TopkSplit split = kernels::topkSplit(H * rows, width, kernels::kHostTopkPrograms);
  int64_t *partial = partial_.ensure(split.partialKeys(H * b.numRows));
  KernelArgs a;
  a.buffer(scores, scoreCount(b, width)).buffer(b.seqLens, b.numRequests)
      .buffer(topk, H * b.numRows * spec::kTopkBlocks).buffer(partial, split.partialKeys(H * b.numRows))
      .scalar(b.numRows).scalar(width).scalar(rows).scalar(split.segmentBlocks).scalar(split.segments);
  launch(**k, a, H * rows * split.segments);
  return mergeTopk(b, split, 0, rows, topk);
}

// Each (head, row)'s segment top 16s into its top 16 (nothing to do for unsplit rows).
Status HostBackend::mergeTopk(const BatchView &b, const kernels::TopkSplit &split, int64_t rowBegin,
                              int64_t rows, int32_t *topk) {
  if (split.segments == 1)
    return Status();
  auto k = kernel(KernelKind::TopkMerge, kernels::configFor(KernelKind::TopkMerge, 1, 0));
  if (!k.ok())
    return k.status();
  const int64_t H = b.params.numHeads;
  KernelArgs a;
  a.buffer(partial_.data(), split.partialKeys(H * b.numRows))
      .buffer(topk, H * b.numRows * spec::kTopkBlocks)
      .scalar(b.numRows).scalar(rowBegin).scalar(rows).scalar(split.segments);
  launch(**k, a, H * rows);
  return Status();
}

Status HostBackend::topkPrefill(const BatchView &b, int64_t width, const float *scores,
                                int32_t *topk) {
  const int64_t first = decodeRows(b), rows = b.numRows - first;
  if (rows <= 0)
    return Status();
  auto k = kernel(KernelKind::TopkPrefill,
                  kernels::configFor(KernelKind::TopkPrefill, b.params.numHeads,
                                     b.params.decodeQueryLen));
  if (!k.ok())
    return k.status();
  int32_t *rowBlocks = rowBlocks_.ensure(b.numRows);
  kernels::fillPrefillRowBlocks(b, rowBlocks);
  const int64_t H = b.params.numHeads;
  const kernels::TopkSplit split = kernels::topkSplit(H * rows, width, kernels::kHostTopkPrograms);
  int64_t *partial = partial_.ensure(split.partialKeys(H * b.numRows));
  KernelArgs a;
  a.buffer(scores, scoreCount(b, width)).buffer(rowBlocks, b.numRows)
      .buffer(topk, H * b.numRows * spec::kTopkBlocks).buffer(partial, split.partialKeys(H * b.numRows))
      .scalar(b.numRows).scalar(width).scalar(first).scalar(rows).scalar(split.segmentBlocks)
      .scalar(split.segments);
  launch(**k, a, H * rows * split.segments);
  return mergeTopk(b, split, first, rows, topk);
}

Status HostBackend::execute(const BatchView &b, int64_t W, float *scores, int32_t *topk) {
  M3IDX_RETURN_IF_ERROR(scoreDecode(b, W, scores));
  M3IDX_RETURN_IF_ERROR(scorePrefill(b, W, scores));
  M3IDX_RETURN_IF_ERROR(topkDecode(b, W, scores, topk));
  return topkPrefill(b, W, scores, topk);
}

StatusOr<IndexerOutput> HostBackend::run(const BatchView &b, const RunOptions &options) {
  M3IDX_RETURN_IF_ERROR(validateBatch(b));
  const RowPlan plan = planRows(b);
  const int H = b.params.numHeads;
  const int64_t T = b.numRows, W = plan.scoreWidth;
  IndexerOutput out;
  out.numHeads = H;
  out.numRows = T;
  out.scoreWidth = W;
  out.topk.assign(static_cast<size_t>(H) * T * spec::kTopkBlocks, -1);
  // Scratch is never initialised: kernels write every entry b < nblk and read nothing else.
  const int64_t count = H * T * W;
  std::unique_ptr<float[]> scores(new float[std::max<int64_t>(count, 1)]);
  M3IDX_RETURN_IF_ERROR(execute(b, W, scores.get(), out.topk.data()));
  if (options.keepScores) {
    out.scores.assign(scores.get(), scores.get() + count);
    for (int h = 0; h < H; ++h) // SPEC §8: entries b >= nblk are NaN in the file
      for (int64_t r = 0; r < T; ++r)
        std::fill(out.scores.begin() + (h * T + r) * W + plan.rows[r].nblk,
                  out.scores.begin() + (h * T + r + 1) * W, std::numeric_limits<float>::quiet_NaN());
  }
  return out;
}

} // namespace m3idx::runtime
