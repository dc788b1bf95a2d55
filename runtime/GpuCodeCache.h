// GPU code objects (sm_90 PTX or cubin, gfx950 HSACO) from the DSL kernels through the same disk
// cache as host kernels: keyed by toolchain, DSL text, config, target fingerprint, the assembler
// used and code-changing variables; a hit needs no compiler. M3IDX_ALWAYS_COMPILE, M3IDX_RUN_ONLY
// and M3IDX_DISABLE_COMPILER act as for host kernels (runtime/CacheOrCompile).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "runtime/gpu/GpuBackend.h"

namespace m3idx::lowering {
class Target;
}

namespace m3idx::runtime {

// `ptxas`: assemble sm_90 PTX into a cubin with it (nullopt: keep PTX). The cache folder is
// cache::defaultCacheDirectory(), read when the source is called.
CodeSource cachedGpuCode(std::unique_ptr<lowering::Target> (*makeTarget)(),
                         std::optional<std::string> ptxas = std::nullopt);

} // namespace m3idx::runtime
