// The host backend (`--backend host`): the DSL kernels JIT-compiled for this CPU on first use of a
// config, kept in memory, and launched over all cores. Besides run(), it executes any parts of a
// step plan on caller-provided buffers, which the Indexer API and decode CP compose.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kernels_src/DecodeWorkspace.h"
#include "kernels_src/KernelCatalog.h"
#include "kernels_src/LaunchPlan.h"
#include "lowering/host/HostCompiler.h"
#include "runtime/Backend.h"
#include "runtime/GrowBuffer.h"
#include "runtime/KernelStore.h"
#include "tuning/TargetTuning.h"

namespace m3idx::runtime {

class HostBackend final : public Backend {
public:
  // `tuning`: the table whose configs and grids it runs; another target's runs that target's
  // kernel source and plan here (tests check sm_90's against the reference on the CPU).
  explicit HostBackend(const tuning::TargetTuning &tuning = tuning::hostTuning()) : tuning_(tuning) {}
  std::string name() const override { return "host"; }
  StatusOr<IndexerOutput> run(const BatchView &batch, const RunOptions &options) override;
  const tuning::TargetTuning &tuning() const { return tuning_; }

  // Finds (memory, AOT bundle, disk cache) or compiles the kernel for a config.
  StatusOr<StoredKernel> kernel(kernels::KernelKind kind, const kernels::KernelConfig &config) {
    return store_.get(kind, config);
  }
  // Kernels this backend obtained (once each), with where each came from and what it cost.
  const std::vector<KernelRecord> &kernelRecords() const { return store_.records(); }
  int64_t compileCount() const;

  // Runs `parts` of a validated batch's step plan (kernels::planStep). `scores` is [H, T, width],
  // `topk` [H, T, 16] (unused without top-k parts); decode scoring covers `blocks` only.
  Status execute(const BatchView &b, int64_t width, float *scores, int32_t *topk,
                 unsigned parts = kernels::kAllParts, kernels::DecodeBlocks blocks = {});
  // execute() in two halves, for a plan that runs many times (Indexer::plan): the step plan of
  // `parts` of a validated batch with this backend's tuning, then running it on a batch of the
  // same metadata (its q and kv may differ). `scores` holds plan.elementsOf(Scores) floats.
  StatusOr<kernels::StepPlan> plan(const BatchView &b, int64_t width, unsigned parts = kernels::kAllParts,
                                   kernels::DecodeBlocks blocks = {}) const;
  Status executePlanned(const kernels::StepPlan &plan, const BatchView &b, float *scores, int32_t *topk) {
    return executePlan(plan, b, scores, topk);
  }
  // A decode step over unvalidated seq_lens and block table (kernels::planDeviceDecode) in
  // `workspace` laid out as `layout` (its top-k region when `topk` is null): the kernels check
  // their values, recording bad ones in status().
  Status executeDeviceDecode(const BatchView &b, int64_t width, int64_t maxSeqLen,
                             const kernels::DecodeWorkspaceLayout &layout, uint8_t *workspace, int32_t *topk);
  // One part of a rank's decode-CP step (kernels::planDeviceDecodeShare), over `array`: the
  // group's memory as one array of parts `partBytes` apart, part k holding head k's scores
  // [share.scoreHeadRows, width] from its start and rank k's program flags at `flagsOffset`.
  // `parts`: kScoreDecode (b.q holds [T, ranks, 128]: every rank's head) or kTopkDecode, which
  // may run once every rank's score part has; their scratch is this backend's own (the flags are
  // the array's). The host stand-in of what a GPU rank queues (tests of the protocol).
  Status executeDeviceDecodeShare(const BatchView &b, int64_t width, int64_t maxSeqLen,
                                  const kernels::DecodeShare &share, uint8_t *array, size_t partBytes,
                                  size_t flagsOffset, unsigned parts, int32_t *topk);
  // The kernels' sticky status words (kernels::kStatusWords; 0: nothing found since the last clear).
  const int64_t *status() const { return status_; }
  void clearStatus() { std::fill_n(status_, kernels::kStatusWords, 0); }

private:
  // Segment keys, arrival counts and program flags of a step: this backend's own buffers, or a
  // decode workspace's regions.
  struct StepScratch {
    int64_t *partial = nullptr;
    int32_t *arrivals = nullptr, *flags = nullptr;
  };
  Status executePlan(const kernels::StepPlan &plan, const BatchView &b, float *scores, int32_t *topk,
                     const StepScratch *scratch = nullptr);

  tuning::TargetTuning tuning_;
  KernelStore store_;
  GrowBuffer<int32_t> tileRequest_, tileRowBegin_, rowBlocks_, imageBase_, imagePages_;
  GrowBuffer<int8_t> keyImage_; // decode_keys' output, read by score_prefill in the same step
  GrowBuffer<int64_t> partial_; // top-k segments' keys (kernels_src/LaunchPlan.h's TopkSplit)
  GrowBuffer<int32_t> arrivals_; // their rows' arrival counts: zero between steps
  GrowBuffer<int32_t> programFlags_;
  int64_t status_[kernels::kStatusWords] = {};
};

} // namespace m3idx::runtime
