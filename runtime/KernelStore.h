// Where a host kernel comes from, in order: this process's memory (a lookup by config, well under
// a microsecond), read-only AOT bundles (M3IDX_AOT_PATH), the user's disk cache, and only then the
// compiler -- under a per-key inter-process lock, so N processes asking for one new kernel compile
// it once. M3IDX_RUN_ONLY turns a miss into an error; M3IDX_ALWAYS_COMPILE skips reads;
// M3IDX_DUMP writes the stages of every kernel used, hit or miss.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/CacheKey.h"
#include "cache/DiskCache.h"
#include "kernels_src/KernelCatalog.h"
#include "kernels_src/LaunchPlan.h"
#include "lowering/host/HostCompiler.h"

namespace m3idx::runtime {

enum class KernelSource { Compiled, DiskCache, AotBundle };
const char *sourceName(KernelSource s);

struct KernelRecord {
  std::string kernel, config, key;
  KernelSource source = KernelSource::Compiled;
  lowering::HostCompileStats compile; // zero unless compiled
  double loadMs = 0;                  // read + verify + link
};

// Everything that identifies a host kernel's code (the cache key's inputs).
cache::KeyInputs hostKeyInputs(const dsl::Kernel &kernel, const kernels::KernelConfig &config);

// A kernel in memory: its code and its arguments' names, both from the one DSL build that keyed it.
struct StoredKernel {
  const lowering::HostKernel *code = nullptr;
  const kernels::KernelSignature *signature = nullptr;
};

class KernelStore {
public:
  KernelStore();
  StatusOr<StoredKernel> get(kernels::KernelKind kind, const kernels::KernelConfig &config);
  const std::vector<KernelRecord> &records() const { return records_; }
  const cache::DiskCache &diskCache() const { return disk_; }

private:
  // Every field of the config (KernelConfig's own order): two configs that differ in any field
  // are two kernels.
  struct MemoryKey {
    int kind;
    kernels::KernelConfig config;
    bool operator<(const MemoryKey &o) const { return kind != o.kind ? kind < o.kind : config < o.config; }
  };
  struct Stored {
    std::unique_ptr<lowering::HostKernel> code;
    kernels::KernelSignature signature;
  };
  StatusOr<std::unique_ptr<lowering::HostKernel>> obtain(kernels::KernelKind kind,
                                                          const kernels::KernelConfig &config,
                                                          KernelRecord &record, kernels::KernelSignature &signature);

  std::mutex mutex_;
  std::map<MemoryKey, Stored> memory_;
  std::vector<KernelRecord> records_;
  cache::DiskCache disk_;
};

} // namespace m3idx::runtime
