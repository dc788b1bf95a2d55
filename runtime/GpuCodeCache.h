// GPU code objects (sm_90 PTX or cubin, gfx950 HSACO) from the DSL kernels through AOT bundles and
// the same disk cache as host kernels: keyed by toolchain, DSL text, config, target fingerprint,
// the assembler used and code-changing variables; a hit needs no compiler. M3IDX_ALWAYS_COMPILE,
// M3IDX_RUN_ONLY and M3IDX_DISABLE_COMPILER act as for host kernels (runtime/CacheOrCompile).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cache/EntryFile.h"
#include "dsl/Ir.h"
#include "kernels_src/KernelCatalog.h"
#include "runtime/gpu/GpuBackend.h"

namespace m3idx::lowering {
class Target;
}

namespace m3idx::runtime {

// `ptxas`: assemble sm_90 PTX into a cubin with it (nullopt: keep PTX). The cache folder is
// cache::defaultCacheDirectory(), read when the source is called. AOT bundles hold the portable
// form (PTX, HSACO) and serve every runtime of the same build, with or without ptxas.
CodeSource cachedGpuCode(std::unique_ptr<lowering::Target> (*makeTarget)(),
                         std::optional<std::string> ptxas = std::nullopt);

// The cache key of a kernel's code object for `target` (assembled by `ptxas`, or not).
std::string gpuCodeKey(const dsl::Kernel &kernel, const kernels::KernelConfig &config,
                       const lowering::Target &target, const std::optional<std::string> &ptxas);
// Compiles it into a cache entry under `key`.
StatusOr<cache::Entry> compileGpuEntry(const dsl::Kernel &kernel, const kernels::KernelConfig &config,
                                       const lowering::Target &target,
                                       const std::optional<std::string> &ptxas, const std::string &key);

} // namespace m3idx::runtime
