#include "reference/ReferenceIndexer.h"

#include <cmath>
#include <limits>

#include "core/Spec.h"
#include "reference/ReferenceScore.h"

namespace m3idx::reference {

namespace {

constexpr float kUnwritten = std::numeric_limits<float>::quiet_NaN();

int32_t requestBlocks(const BatchView &b, int64_t request) {
  return static_cast<int32_t>(spec::blocksFor(b.seqLens[request])); // the last row's nblk
}

QueryFn batchQuery(const BatchView &b) {
  const int H = b.params.numHeads;
  return [&b, H](int64_t row, int head) {
    return b.q + (row * H + head) * spec::kIndexHeadDim;
  };
}

// scores is [H, T, W]; scores every block of requests [first, last) for all heads.
void scoreRequests(const BatchView &b, const RowPlan &plan, int64_t first, int64_t last,
                   std::vector<float> &scores) {
  const int64_t T = b.numRows, W = plan.scoreWidth;
  QueryFn query = batchQuery(b);
  ScoreSink sink = [&](int h, int64_t row, int32_t blk, float s) {
    scores[(h * T + row) * W + blk] = s;
  };
  for (int64_t i = first; i < last; ++i)
    for (int32_t blk = 0; blk < requestBlocks(b, i); ++blk)
      scoreRequestBlock(b, plan, i, blk, b.params.numHeads, query, sink);
}

void selectRows(const RowPlan &plan, int numHeads, int64_t rowBegin, int64_t rowEnd,
                const std::vector<float> &scores, std::vector<int32_t> &topk) {
  const int64_t T = static_cast<int64_t>(plan.rows.size()), W = plan.scoreWidth;
  for (int h = 0; h < numHeads; ++h)
    for (int64_t row = rowBegin; row < rowEnd; ++row)
      topkRow(std::span<const float>(&scores[(h * T + row) * W], W), plan.rows[row].nblk,
              std::span<int32_t>(&topk[(h * T + row) * spec::kTopkBlocks], spec::kTopkBlocks));
}

IndexerOutput makeOutput(const BatchView &b, const RowPlan &plan) {
  IndexerOutput out;
  out.numHeads = b.params.numHeads;
  out.numRows = b.numRows;
  out.scoreWidth = plan.scoreWidth;
  out.topk.assign(static_cast<size_t>(out.numHeads) * out.numRows * spec::kTopkBlocks, -1);
  out.scores.assign(static_cast<size_t>(out.numHeads) * out.numRows * out.scoreWidth, kUnwritten);
  return out;
}

} // namespace

StatusOr<IndexerOutput> runReference(const BatchView &b, bool keepScores) {
  M3IDX_RETURN_IF_ERROR(validateBatch(b));
  RowPlan plan = planRows(b);
  IndexerOutput out = makeOutput(b, plan);
  scoreRequests(b, plan, 0, b.numRequests, out.scores);
  selectRows(plan, out.numHeads, 0, b.numRows, out.scores, out.topk);
  if (!keepScores)
    out.scores.clear();
  return out;
}

StatusOr<IndexerOutput> runReferenceDecodeCp(const BatchView &b, int worldSize,
                                             std::string *fallbackReason) {
  M3IDX_RETURN_IF_ERROR(validateBatch(b));
  CpDecision decision = decideDecodeCp(b.params, worldSize, /*dualBatchOverlap=*/false);
  if (!decision.useCp) {
    if (fallbackReason)
      *fallbackReason = decision.fallbackReason;
    return runReference(b, /*keepScores=*/true);
  }
  const RowPlan plan = planRows(b);
  IndexerOutput out = makeOutput(b, plan);
  const int world = worldSize;
  const int64_t D = b.params.numDecodes;
  const int64_t decodeRows = b.queryStartLoc[D];
  const int64_t W = plan.scoreWidth;
  const size_t qBytes = spec::kIndexHeadDim;

  // Each rank holds only its own head's decode queries; the all-gather rebuilds [rows, world, 128]
  // on every rank from the per-rank slices.
  std::vector<std::vector<uint8_t>> rankQuery(world);
  for (int r = 0; r < world; ++r)
    for (int64_t row = 0; row < decodeRows; ++row) {
      const uint8_t *src = b.q + (row * world + r) * qBytes;
      rankQuery[r].insert(rankQuery[r].end(), src, src + qBytes);
    }
  std::vector<uint8_t> gathered(static_cast<size_t>(decodeRows) * world * qBytes);
  for (int r = 0; r < world; ++r)
    for (int64_t row = 0; row < decodeRows; ++row)
      std::copy_n(&rankQuery[r][row * qBytes], qBytes, &gathered[(row * world + r) * qBytes]);

  // Rank r scores blocks b % world == r for all heads into its send buffer [world, rows, W].
  std::vector<std::vector<float>> send(world);
  QueryFn query = [&](int64_t row, int head) { return &gathered[(row * world + head) * qBytes]; };
  for (int r = 0; r < world; ++r) {
    send[r].assign(static_cast<size_t>(world) * decodeRows * W, kUnwritten);
    ScoreSink sink = [&](int h, int64_t row, int32_t blk, float s) {
      send[r][(h * decodeRows + row) * W + blk] = s;
    };
    for (int64_t i = 0; i < D; ++i)
      for (int32_t blk = r; blk < requestBlocks(b, i); blk += world)
        scoreRequestBlock(b, plan, i, blk, world, query, sink);
  }
  // All-to-all: head h's columns go to rank h, whose receive buffer is [rows, W].
  std::vector<std::vector<float>> recv(world);
  for (int h = 0; h < world; ++h) {
    recv[h].assign(static_cast<size_t>(decodeRows) * W, kUnwritten);
    for (int64_t row = 0; row < decodeRows; ++row)
      for (int32_t blk = 0; blk < plan.rows[row].nblk; ++blk)
        recv[h][row * W + blk] = send[blk % world][(h * decodeRows + row) * W + blk];
  }
  // Rank h: the ordinary top-k over its receive buffer.
  for (int h = 0; h < world; ++h)
    for (int64_t row = 0; row < decodeRows; ++row) {
      std::copy_n(&recv[h][row * W], W, &out.scores[(h * b.numRows + row) * W]);
      topkRow(std::span<const float>(&recv[h][row * W], W), plan.rows[row].nblk,
              std::span<int32_t>(&out.topk[(h * b.numRows + row) * spec::kTopkBlocks],
                                 spec::kTopkBlocks));
    }
  // Prefill rows are always scored locally.
  scoreRequests(b, plan, D, b.numRequests, out.scores);
  selectRows(plan, out.numHeads, decodeRows, b.numRows, out.scores, out.topk);
  return out;
}

} // namespace m3idx::reference
