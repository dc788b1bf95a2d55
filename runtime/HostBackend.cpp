#include "runtime/HostBackend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "core/Spec.h"
#include "runtime/KernelArgs.h"
#include "runtime/ThreadPool.h"

namespace m3idx::runtime {

using kernels::KernelKind;

namespace {

// Programs per chunk taken by a thread: small enough to balance, large enough that the counter
// is not contended.
constexpr int64_t kChunk = 8;

int64_t maxRequestBlocks(const BatchView &b, int64_t first, int64_t last) {
  int64_t m = 0;
  for (int64_t i = first; i < last; ++i)
    m = std::max<int64_t>(m, spec::blocksFor(b.seqLens[i]));
  return m;
}

} // namespace

StatusOr<const lowering::HostKernel *> HostBackend::kernel(KernelKind kind,
                                                            const kernels::KernelConfig &config) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto key = std::make_pair(static_cast<int>(kind), config.str());
  auto it = kernels_.find(key);
  if (it != kernels_.end())
    return it->second.get();
  StatusOr<dsl::Kernel> k = kernels::buildKernel(kind, config);
  if (!k.ok())
    return k.status();
  CompileRecord record{kernels::kernelName(kind), config.str(), {}};
  auto compiled = lowering::compileHostKernel(*k, &record.stats);
  if (!compiled.ok())
    return compiled.status();
  compiles_.push_back(record);
  const lowering::HostKernel *raw = compiled->get();
  kernels_.emplace(key, std::move(compiled).value());
  return raw;
}

StatusOr<IndexerOutput> HostBackend::run(const BatchView &b, const RunOptions &options) {
  M3IDX_RETURN_IF_ERROR(validateBatch(b));
  const RowPlan plan = planRows(b);
  const int H = b.params.numHeads;
  const int64_t T = b.numRows, W = plan.scoreWidth, R = b.numRequests;
  const int64_t D = b.params.numDecodes;
  const int64_t decodeRows = b.queryStartLoc[D];
  const int Q = b.params.decodeQueryLen;

  IndexerOutput out;
  out.numHeads = H;
  out.numRows = T;
  out.scoreWidth = W;
  out.topk.assign(static_cast<size_t>(H) * T * spec::kTopkBlocks, -1);
  // Scratch is never initialised: kernels write every entry b < nblk and read nothing else.
  const int64_t scoreCount = H * T * W;
  std::unique_ptr<float[]> scores(new float[std::max<int64_t>(scoreCount, 1)]);

  const int64_t pages = b.numPages * spec::kPageBytes;
  const int64_t btSize = R * b.maxBlocks;
  auto scoreArgs = [&](KernelArgs &a) {
    a.buffer(b.q, T * H * spec::kIndexHeadDim).buffer(b.kv, pages).buffer(b.blockTable, btSize)
        .buffer(b.seqLens, R).buffer(b.queryStartLoc, R + 1);
  };

  if (D > 0) {
    auto k = kernel(KernelKind::ScoreDecode, kernels::configFor(KernelKind::ScoreDecode, H, Q));
    if (!k.ok())
      return k.status();
    const int64_t gridBlocks = std::max<int64_t>(1, maxRequestBlocks(b, 0, D));
    KernelArgs a;
    scoreArgs(a);
    a.buffer(scores.get(), scoreCount).scalar(T).scalar(b.maxBlocks).scalar(W).scalar(gridBlocks)
        .scalar(b.params.initBlocks).scalar(b.params.localBlocks);
    parallelFor(D * gridBlocks, kChunk, [&](int64_t s, int64_t e) { a.call(**k, s, e); });
  }

  std::vector<int32_t> tileRequest, tileRowBegin;
  for (int64_t i = D; i < R; ++i)
    for (int32_t row = b.queryStartLoc[i]; row < b.queryStartLoc[i + 1];
         row += kernels::kPrefillRowTile) {
      tileRequest.push_back(static_cast<int32_t>(i));
      tileRowBegin.push_back(row);
    }
  if (!tileRequest.empty()) {
    auto k = kernel(KernelKind::ScorePrefill, kernels::configFor(KernelKind::ScorePrefill, H, Q));
    if (!k.ok())
      return k.status();
    const int64_t gridBlocks = std::max<int64_t>(1, maxRequestBlocks(b, D, R));
    const int64_t tiles = static_cast<int64_t>(tileRequest.size());
    KernelArgs a;
    scoreArgs(a);
    a.buffer(tileRequest.data(), tiles).buffer(tileRowBegin.data(), tiles)
        .buffer(scores.get(), scoreCount).scalar(T).scalar(b.maxBlocks).scalar(W)
        .scalar(gridBlocks).scalar(b.params.initBlocks).scalar(b.params.localBlocks);
    parallelFor(tiles * gridBlocks, kChunk, [&](int64_t s, int64_t e) { a.call(**k, s, e); });
  }

  if (decodeRows > 0) {
    auto k = kernel(KernelKind::TopkDecode, kernels::configFor(KernelKind::TopkDecode, H, Q));
    if (!k.ok())
      return k.status();
    KernelArgs a;
    a.buffer(scores.get(), scoreCount).buffer(b.seqLens, R).buffer(out.topk.data(), H * T * 16)
        .scalar(T).scalar(W).scalar(decodeRows);
    parallelFor(H * decodeRows, kChunk, [&](int64_t s, int64_t e) { a.call(**k, s, e); });
  }
  const int64_t prefillRows = T - decodeRows;
  if (prefillRows > 0) {
    auto k = kernel(KernelKind::TopkPrefill, kernels::configFor(KernelKind::TopkPrefill, H, Q));
    if (!k.ok())
      return k.status();
    std::vector<int32_t> rowBlocks(T);
    for (int64_t r = 0; r < T; ++r)
      rowBlocks[r] = plan.rows[r].nblk;
    KernelArgs a;
    a.buffer(scores.get(), scoreCount).buffer(rowBlocks.data(), T)
        .buffer(out.topk.data(), H * T * 16).scalar(T).scalar(W).scalar(decodeRows)
        .scalar(prefillRows);
    parallelFor(H * prefillRows, kChunk, [&](int64_t s, int64_t e) { a.call(**k, s, e); });
  }

  if (options.keepScores) {
    out.scores.assign(scores.get(), scores.get() + scoreCount);
    for (int h = 0; h < H; ++h) // SPEC §8: entries b >= nblk are NaN in the file
      for (int64_t r = 0; r < T; ++r)
        std::fill(out.scores.begin() + (h * T + r) * W + plan.rows[r].nblk,
                  out.scores.begin() + (h * T + r + 1) * W, std::numeric_limits<float>::quiet_NaN());
  }
  return out;
}

} // namespace m3idx::runtime
