// The host backend (`--backend host`): the DSL kernels JIT-compiled for this CPU on first use of a
// config, kept in memory, and launched over all cores. Besides run(), it exposes one launch per
// kernel on caller-provided buffers, which the Indexer API and decode CP compose.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kernels_src/KernelCatalog.h"
#include "kernels_src/LaunchPlan.h"
#include "lowering/host/HostCompiler.h"
#include "runtime/Backend.h"
#include "runtime/GrowBuffer.h"
#include "runtime/KernelStore.h"

namespace m3idx::runtime {

class HostBackend final : public Backend {
public:
  // `prefill`: how score_prefill programs run (kernels::PrefillForm); another target's form runs
  // that target's kernel source here (tests check sm_90's against the reference on the CPU).
  explicit HostBackend(kernels::PrefillForm prefill = kernels::kPrefillForm) : prefill_(prefill) {}
  std::string name() const override { return "host"; }
  StatusOr<IndexerOutput> run(const BatchView &batch, const RunOptions &options) override;

  // Finds (memory, AOT bundle, disk cache) or compiles the kernel for a config.
  StatusOr<const lowering::HostKernel *> kernel(kernels::KernelKind kind,
                                                const kernels::KernelConfig &config) {
    return store_.get(kind, config);
  }
  // Kernels this backend obtained (once each), with where each came from and what it cost.
  const std::vector<KernelRecord> &kernelRecords() const { return store_.records(); }
  int64_t compileCount() const;

  // Launches on a validated batch. `scores` is [H, T, width]; `topk` is [H, T, 16].
  // scoreDecode scores blocks blockBegin, blockBegin + blockStep, ... of the decode requests.
  Status scoreDecode(const BatchView &b, int64_t width, float *scores, int64_t blockBegin = 0,
                     int64_t blockStep = 1);
  Status scorePrefill(const BatchView &b, int64_t width, float *scores);
  Status topkDecode(const BatchView &b, int64_t width, const float *scores, int32_t *topk);
  Status topkPrefill(const BatchView &b, int64_t width, const float *scores, int32_t *topk);
  // All of them, in order (decode rows first).
  Status execute(const BatchView &b, int64_t width, float *scores, int32_t *topk);

private:
  Status mergeTopk(const BatchView &b, const kernels::TopkSplit &split, int64_t rowBegin, int64_t rows,
                   int32_t *topk);

  kernels::PrefillForm prefill_;
  KernelStore store_;
  GrowBuffer<int32_t> tileRequest_, tileRowBegin_, rowBlocks_;
  GrowBuffer<int64_t> partial_; // top-k segments' keys (kernels_src/LaunchPlan.h's TopkSplit)
};

} // namespace m3idx::runtime
