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

namespace {

// Programs per chunk taken by a thread: small enough to balance, large enough that the counter
// is not contended.
constexpr int64_t kChunk = 8;

} // namespace

int64_t HostBackend::compileCount() const {
  int64_t n = 0;
  for (const KernelRecord &r : kernelRecords())
    n += r.source == KernelSource::Compiled;
  return n;
}

StatusOr<kernels::StepPlan> HostBackend::plan(const BatchView &b, int64_t width, unsigned parts,
                                              kernels::DecodeBlocks blocks) const {
  return kernels::planStep(b, width, tuning_.forStep(b.params.numHeads, b.params.decodeQueryLen, b.params.numDecodes),
                           parts, blocks);
}

Status HostBackend::execute(const BatchView &b, int64_t width, float *scores, int32_t *topk, unsigned parts,
                            kernels::DecodeBlocks blocks) {
  StatusOr<kernels::StepPlan> plan = this->plan(b, width, parts, blocks);
  if (!plan.ok())
    return plan.status();
  return executePlan(*plan, b, scores, topk);
}

Status HostBackend::executeDeviceDecode(const BatchView &b, int64_t width, int64_t maxSeqLen,
                                        const kernels::DecodeWorkspaceLayout &layout, uint8_t *workspace,
                                        int32_t *topk) {
  StatusOr<kernels::StepPlan> plan = kernels::planDeviceDecode(
      b, width, maxSeqLen, tuning_.forStep(b.params.numHeads, b.params.decodeQueryLen, b.params.numDecodes));
  if (!plan.ok())
    return plan.status();
  M3IDX_RETURN_IF_ERROR(kernels::fitsWorkspace(kernels::workspaceNeeds(*plan), layout, topk == nullptr));
  const StepScratch scratch{reinterpret_cast<int64_t *>(workspace + layout.partial),
                            reinterpret_cast<int32_t *>(workspace + layout.arrivals),
                            reinterpret_cast<int32_t *>(workspace + layout.flags)};
  return executePlan(*plan, b, reinterpret_cast<float *>(workspace + layout.scores),
                     topk ? topk : reinterpret_cast<int32_t *>(workspace + layout.topk), &scratch);
}

Status HostBackend::executeDeviceDecodeShare(const BatchView &b, int64_t width, int64_t maxSeqLen,
                                             const kernels::DecodeShare &share, uint8_t *array, size_t partBytes,
                                             size_t flagsOffset, unsigned parts, int32_t *topk) {
  const IndexerParams &p = b.params;
  StatusOr<kernels::SharePlans> plans = kernels::planDeviceDecodeShare(
      b, width, maxSeqLen, tuning_.forStep(share.ranks, p.decodeQueryLen, p.numDecodes),
      tuning_.forStep(p.numHeads, p.decodeQueryLen, p.numDecodes), share);
  if (!plans.ok())
    return plans.status();
  const bool score = parts == kernels::kScoreDecode;
  if (!score && parts != kernels::kTopkDecode)
    return invalidArgument("decode CP part", "kScoreDecode or kTopkDecode", parts);
  const kernels::StepPlan &plan = score ? plans->score : plans->topk;
  uint8_t *own = array + share.rank * partBytes;
  StepScratch scratch;
  scratch.partial = partial_.ensure(std::max<int64_t>(1, plan.elementsOf(kernels::StepBuffer::Partial)));
  scratch.arrivals = arrivals_.ensureZeroed(std::max<int64_t>(1, plan.elementsOf(kernels::StepBuffer::Arrivals)));
  // score_decode writes its own flags; topk_decode reads every rank's from part 0's on.
  scratch.flags = reinterpret_cast<int32_t *>((score ? own : array) + flagsOffset);
  return executePlan(plan, b, reinterpret_cast<float *>(score ? array : own), topk, &scratch);
}

Status HostBackend::executePlan(const kernels::StepPlan &planned, const BatchView &b, float *scores,
                                int32_t *topk, const StepScratch *scratch) {
  const kernels::StepPlan *plan = &planned;
  using kernels::StepBuffer;
  const void *memory[kernels::kStepBufferCount] = {};
  auto bind = [&](StepBuffer role, const void *p) { memory[static_cast<int>(role)] = p; };
  bind(StepBuffer::Q, b.q);
  bind(StepBuffer::Kv, b.kv);
  bind(StepBuffer::BlockTable, b.blockTable);
  bind(StepBuffer::SeqLens, b.seqLens);
  bind(StepBuffer::QueryStartLoc, b.queryStartLoc);
  bind(StepBuffer::Scores, scores);
  bind(StepBuffer::Topk, topk);
  bind(StepBuffer::Status, status_);
  if (scratch) {
    bind(StepBuffer::Partial, scratch->partial);
    bind(StepBuffer::Arrivals, scratch->arrivals);
    bind(StepBuffer::ProgramFlags, scratch->flags);
  } else {
    bind(StepBuffer::Partial, partial_.ensure(plan->elementsOf(StepBuffer::Partial)));
    bind(StepBuffer::Arrivals, arrivals_.ensureZeroed(std::max<int64_t>(1, plan->elementsOf(StepBuffer::Arrivals))));
    // Written by every score_decode program before the top-k reads them; kept for a top-k-only
    // plan after a scoring one (decode CP), which reads none.
    bind(StepBuffer::ProgramFlags, programFlags_.ensure(std::max<int64_t>(1, plan->elementsOf(StepBuffer::ProgramFlags))));
  }
  if (const int64_t tiles = plan->prefillTiles; tiles > 0) {
    int32_t *request = tileRequest_.ensure(tiles), *rowBegin = tileRowBegin_.ensure(tiles);
    kernels::fillPrefillTiles(b, plan->rowTile, request, rowBegin);
    bind(StepBuffer::TileRequest, request);
    bind(StepBuffer::TileRowBegin, rowBegin);
  }
  if (const int64_t blocks = plan->imageBlocks; blocks > 0) {
    int32_t *base = imageBase_.ensure(b.numRequests), *pages = imagePages_.ensure(blocks);
    kernels::fillKeyImage(b, base, pages);
    bind(StepBuffer::ImageBase, base);
    bind(StepBuffer::ImagePages, pages);
    bind(StepBuffer::KeyImage, keyImage_.ensure(plan->elementsOf(StepBuffer::KeyImage)));
  }
  if (plan->elementsOf(StepBuffer::RowBlocks) > 0) {
    int32_t *rowBlocks = rowBlocks_.ensure(b.numRows);
    kernels::fillPrefillRowBlocks(b, rowBlocks);
    bind(StepBuffer::RowBlocks, rowBlocks);
  }
  for (const kernels::Launch &launch : plan->launches) {
    auto k = kernel(launch.kind, launch.config);
    if (!k.ok())
      return k.status();
    KernelArgs args;
    M3IDX_RETURN_IF_ERROR(kernels::bindLaunch(
        *k->signature, launch,
        [&](StepBuffer role, int64_t elements) { args.buffer(memory[static_cast<int>(role)], elements); },
        [&](int64_t v) { args.scalar(v); }));
    parallelFor(launch.programs, kChunk, [&](int64_t s, int64_t e) { args.call(*k->code, s, e); });
  }
  return Status();
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
