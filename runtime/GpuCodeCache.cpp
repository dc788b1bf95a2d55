#include "runtime/GpuCodeCache.h"

#include "runtime/CacheOrCompile.h"

#include <ctime>

#include <nlohmann/json.hpp>

#include "cache/CacheKey.h"
#include "cache/DiskCache.h"
#include "core/EnvTable.h"
#include "kernels_src/KernelCatalog.h"
#include "tuning/TargetRegistry.h"
#include "lowering/Target.h"
#include "lowering/host/HostCompiler.h"
#include "lowering/GpuCompiler.h"
#include "lowering/nvvm/PtxAssembler.h"
#include "llvm/Support/FileSystem.h"

namespace m3idx::runtime {

std::string gpuCodeKey(const dsl::Kernel &k, const kernels::KernelConfig &config,
                       const lowering::Target &target, const std::optional<std::string> &ptxas) {
  cache::KeyInputs in;
  in.toolchain = lowering::hostToolchainFingerprint(); // m3idx version, build id, LLVM version
  in.kernel = k.name;
  in.dsl = k.print();
  in.config = config.str();
  in.target = target.fingerprint();
  in.options = "ptxas=" + ptxas.value_or("none");
  llvm::sys::fs::file_status st; // a replaced ptxas at the same path makes other cubins
  if (ptxas && !llvm::sys::fs::status(*ptxas, st))
    in.options += fmt::format(" size={} mtime={}", st.getSize(),
                              st.getLastModificationTime().time_since_epoch().count());
  in.environment = env::codeChangingFingerprint();
  return cache::cacheKey(in);
}

StatusOr<cache::Entry> compileGpuEntry(const dsl::Kernel &k, const kernels::KernelConfig &config,
                                       const lowering::Target &target,
                                       const std::optional<std::string> &ptxas, const std::string &key) {
  StatusOr<std::string> code = lowering::gpuStage(k, target, lowering::GpuStage::Binary);
  if (code.ok() && ptxas)
    code = lowering::assemblePtx(*ptxas, *code, target.desc().arch);
  if (!code.ok())
    return code.status();
  cache::Entry entry;
  entry.producer = lowering::hostToolchainFingerprint();
  entry.target = target.desc().kind;
  entry.kernel = k.name;
  entry.config = config.str();
  entry.key = key;
  entry.symbol = k.name;
  entry.binary.assign(code->begin(), code->end());
  entry.metadata =
      nlohmann::json{{"format", ptxas ? std::string("cubin") : std::string((*tuning::targetNamed(entry.target))->objectFormat)},
                     {"bytes", code->size()},
                     {"target", target.fingerprint()},
                     {"created_unix", static_cast<int64_t>(std::time(nullptr))}}
          .dump();
  return entry;
}

CodeSource cachedGpuCode(std::unique_ptr<lowering::Target> (*makeTarget)(),
                         std::optional<std::string> ptxas) {
  return [makeTarget, ptxas](const dsl::Kernel &kernel,
                             const kernels::KernelConfig &config) -> StatusOr<std::string> {
    std::unique_ptr<lowering::Target> target = makeTarget();
    auto bytes = [](const cache::Entry &e) { return std::string(e.binary.begin(), e.binary.end()); };
    std::string unusable;
    if (!env::flag("M3IDX_ALWAYS_COMPILE")) {
      const std::string portable = gpuCodeKey(kernel, config, *target, std::nullopt);
      StatusOr<std::optional<cache::Entry>> e = cache::findInBundles("gpucache-" + portable, portable, unusable);
      if (!e.ok())
        return e.status();
      if (*e)
        return bytes(**e);
    }
    const std::string key = gpuCodeKey(kernel, config, *target, ptxas);
    cache::DiskCache disk(cache::defaultCacheDirectory());
    const std::string what =
        fmt::format("kernel {} ({}) for target {}", kernel.name, config.str(), target->desc().kind);
    const std::string searched = fmt::format("any AOT bundle or the cache {}", disk.dir());
    StatusOr<CachedEntry> found =
        cacheOrCompile(disk, key, what, searched, [&]() -> StatusOr<cache::Entry> {
          StatusOr<cache::Entry> e = compileGpuEntry(kernel, config, *target, ptxas, key);
          if (!e.ok() && env::flag("M3IDX_DISABLE_COMPILER")) // say where it was looked for
            return Status::error(fmt::format("{} is not in {}: {}", what, searched, e.status().message()));
          return e;
        },
        unusable);
    if (!found.ok())
      return found.status();
    return bytes(found->entry);
  };
}

} // namespace m3idx::runtime
