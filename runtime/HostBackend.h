// The host backend (`--backend host`): the DSL kernels JIT-compiled for this CPU on first use of a
// config, kept in memory, and launched over all cores. Besides run(), it exposes one launch per
// kernel on caller-provided buffers, which the Indexer API and decode CP compose.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kernels_src/KernelCatalog.h"
#include "lowering/host/HostCompiler.h"
#include "runtime/Backend.h"
#include "runtime/GrowBuffer.h"

namespace m3idx::runtime {

struct CompileRecord {
  std::string kernel;
  std::string config;
  lowering::HostCompileStats stats;
};

class HostBackend final : public Backend {
public:
  std::string name() const override { return "host"; }
  StatusOr<IndexerOutput> run(const BatchView &batch, const RunOptions &options) override;

  // Compiles (or finds) the kernel for a config; later calls are a map lookup.
  StatusOr<const lowering::HostKernel *> kernel(kernels::KernelKind kind,
                                                const kernels::KernelConfig &config);
  const std::vector<CompileRecord> &compiles() const { return compiles_; }

  // Launches on a validated batch. `scores` is [H, T, width]; `topk` is [H, T, 16].
  // scoreDecode scores blocks blockBegin, blockBegin + blockStep, ... of the decode requests.
  Status scoreDecode(const BatchView &b, int64_t width, float *scores, int64_t blockBegin = 0,
                     int64_t blockStep = 1);
  Status scorePrefill(const BatchView &b, int64_t width, float *scores);
  Status topkDecode(const BatchView &b, int64_t width, const float *scores, int32_t *topk);
  Status topkPrefill(const BatchView &b, int64_t width, const float *scores, int32_t *topk);
  // All four, in order (decode rows first).
  Status execute(const BatchView &b, int64_t width, float *scores, int32_t *topk);

private:
  std::mutex mutex_;
  std::map<std::pair<int, std::string>, std::unique_ptr<lowering::HostKernel>> kernels_;
  std::vector<CompileRecord> compiles_;
  GrowBuffer<int32_t> tileRequest_, tileRowBegin_, rowBlocks_;
};

} // namespace m3idx::runtime
