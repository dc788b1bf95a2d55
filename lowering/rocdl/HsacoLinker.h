// gfx950 code objects made in process: the ISA that gpu-module-to-binary{format=isa} emits is
// assembled by LLVM's MC layer and linked into an HSACO by lld's ELF driver (a library, not the
// ld.lld program), and an HSACO's code disassembled by LLVM's MC disassembler. No LLVM tool or ROCm
// install is needed at run time.
#pragma once

#include <string>

#include "core/Status.h"

namespace m3idx::lowering {

// AMDGPU assembly text (with its metadata directives) -> a linked gfx950 HSACO.
StatusOr<std::string> linkGfx950Hsaco(const std::string &isa);

// The code of an HSACO's .text section, one instruction a line under each function's label
// ("ADDRESS <name>:", as llvm-objdump prints it).
StatusOr<std::string> disassembleGfx950(const std::string &hsaco);

} // namespace m3idx::lowering
