#include "runtime/GpuCodeCache.h"

#include <cstdlib>
#include <ctime>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cache/CacheKey.h"
#include "cache/DiskCache.h"
#include "core/EnvTable.h"
#include "kernels_src/KernelCatalog.h"
#include "lowering/Target.h"
#include "lowering/host/HostCompiler.h"
#include "lowering/nvvm/GpuCompiler.h"
#include "lowering/nvvm/PtxAssembler.h"
#include "llvm/Support/FileSystem.h"

namespace m3idx::runtime {

CodeSource cachedGpuCode(std::unique_ptr<lowering::Target> (*makeTarget)(),
                         std::optional<std::string> ptxas) {
  return [makeTarget, ptxas](kernels::KernelKind kind,
                             const kernels::KernelConfig &config) -> StatusOr<std::string> {
    std::unique_ptr<lowering::Target> target = makeTarget();
    StatusOr<dsl::Kernel> k = kernels::buildKernel(kind, config);
    if (!k.ok())
      return k.status();
    cache::KeyInputs in;
    in.toolchain = lowering::hostToolchainFingerprint(); // m3idx version, build id, LLVM version
    in.kernel = k->name;
    in.dsl = k->print();
    in.config = config.str();
    in.target = target->fingerprint();
    in.options = "ptxas=" + ptxas.value_or("none");
    llvm::sys::fs::file_status st; // a replaced ptxas at the same path makes other cubins
    if (ptxas && !llvm::sys::fs::status(*ptxas, st))
      in.options += fmt::format(" size={} mtime={}", st.getSize(),
                                st.getLastModificationTime().time_since_epoch().count());
    in.environment = env::codeChangingFingerprint();
    const std::string key = cache::cacheKey(in);
    cache::DiskCache disk(cache::defaultCacheDirectory());
    const bool read = !env::flag("M3IDX_ALWAYS_COMPILE");
    if (read)
      if (std::optional<cache::Entry> e = disk.read(key))
        return std::string(e->binary.begin(), e->binary.end());
    if (env::flag("M3IDX_RUN_ONLY"))
      return Status::error(fmt::format("kernel {} ({}) for target {} is not in the cache {}, and "
                                       "M3IDX_RUN_ONLY=1 forbids compiling it (key {})",
                                       k->name, config.str(), target->desc().kind, disk.dir(), key));
    if (env::flag("M3IDX_DISABLE_COMPILER"))
      return Status::error(fmt::format("kernel {} ({}) for target {}: compiler disabled "
                                       "(M3IDX_DISABLE_COMPILER=1)",
                                       k->name, config.str(), target->desc().kind));
    // One compile per key across processes, as for host kernels.
    std::unique_ptr<cache::DiskCache::KeyLock> keyLock;
    if (disk.usable()) {
      auto l = disk.lock(key, std::atof(env::get("M3IDX_CACHE_LOCK_TIMEOUT_S").c_str()));
      if (l.ok())
        keyLock = std::move(l).value();
      else
        std::cerr << "m3idx: warning: " << l.status().message() << "; compiling without it\n";
      if (keyLock && read)
        if (std::optional<cache::Entry> e = disk.read(key))
          return std::string(e->binary.begin(), e->binary.end());
    }
    StatusOr<std::string> code = lowering::gpuStage(*k, *target, lowering::GpuStage::Binary);
    if (!code.ok())
      return code.status();
    if (ptxas) {
      code = lowering::assemblePtx(*ptxas, *code, target->desc().arch);
      if (!code.ok())
        return code.status();
    }
    cache::Entry entry;
    entry.producer = lowering::hostToolchainFingerprint();
    entry.target = target->desc().kind;
    entry.kernel = k->name;
    entry.config = config.str();
    entry.key = key;
    entry.symbol = k->name;
    entry.binary.assign(code->begin(), code->end());
    entry.metadata = nlohmann::json{{"format", ptxas ? "cubin" : (entry.target == "sm_90" ? "ptx" : "hsaco")},
                                    {"bytes", code->size()},
                                    {"target", target->fingerprint()},
                                    {"created_unix", static_cast<int64_t>(std::time(nullptr))}}
                         .dump();
    (void)disk.write(entry); // a failed write is warned about; the kernel still runs
    return code;
  };
}

} // namespace m3idx::runtime
