// The HIP runtime as a DeviceApi: libamdhip64 (M3IDX_HIP_LIBRARY, else its versioned names) loaded
// with dlopen and the few hipModule*/hipMemcpy* entry points m3idx uses, so no ROCm install is
// needed to build. Errors name the library tried, the missing symbol, or the failing HIP call.
#pragma once

#include <string>
#include <vector>

#include "core/Status.h"
#include "runtime/gpu/DeviceApi.h"

namespace m3idx::hip {

// The library names tried when M3IDX_HIP_LIBRARY is empty, in order.
const std::vector<std::string> &hipLibraryNames();

// Loads the runtime (once per library) and calls hipInit; failures are retried on the next call.
StatusOr<const runtime::DeviceApi *> loadHipRuntime();

} // namespace m3idx::hip
