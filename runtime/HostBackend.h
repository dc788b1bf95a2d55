// The host backend (`--backend host`): the DSL kernels JIT-compiled for this CPU on first use of a
// config, kept in memory, and launched over all cores.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kernels_src/KernelCatalog.h"
#include "lowering/host/HostCompiler.h"
#include "runtime/Backend.h"

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

private:
  std::mutex mutex_;
  std::map<std::pair<int, std::string>, std::unique_ptr<lowering::HostKernel>> kernels_;
  std::vector<CompileRecord> compiles_;
};

} // namespace m3idx::runtime
