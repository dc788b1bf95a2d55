// PTX -> cubin through NVIDIA's ptxas when it is installed (M3IDX_PTXAS, else `ptxas` on PATH, else
// /usr/local/cuda/bin/ptxas); without it the driver JIT-compiles the PTX. The cubin skips the
// driver's JIT at module load and is what ptxas -O3 makes of the same PTX.
#pragma once

#include <optional>
#include <string>

#include "core/Status.h"

namespace m3idx::lowering {

// The ptxas to use: M3IDX_PTXAS when set ("none" turns cubins off), else the first one found.
// An M3IDX_PTXAS naming a missing file is an error, not a silent fallback to PTX.
StatusOr<std::optional<std::string>> findPtxas();

// Assembles `ptx` for `arch` (e.g. "sm_90") into a cubin (an ELF image the driver loads).
StatusOr<std::string> assemblePtx(const std::string &ptxas, const std::string &ptx,
                                  const std::string &arch);

} // namespace m3idx::lowering
