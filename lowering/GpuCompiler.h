// DSL kernel -> GPU code object text through a GPU target's pipeline (sm_90: PTX), and the named
// stages `m3idx inspect --target sm_90|gfx950` prints: mlir (the GPU form), lowered (NVVM/ROCDL and
// LLVM dialects before serialization), llvm (the device module as LLVM IR), and the binary.
#pragma once

#include <string>

#include "core/Status.h"
#include "dsl/Ir.h"
#include "lowering/Target.h"

namespace m3idx::lowering {

// Layouts: the DSL text with each value's spread over the threads and each dot.tiles' unit.
enum class GpuStage { Layouts, Mlir, Lowered, Llvm, Binary };

// The kernel at `stage` for `target` (a GPU target). Binary is the serialized object (PTX text for
// sm_90). With `irAfterEachPass`, also the IR after every pipeline pass.
StatusOr<std::string> gpuStage(const dsl::Kernel &kernel, const Target &target, GpuStage stage,
                               std::string *irAfterEachPass = nullptr);

} // namespace m3idx::lowering
