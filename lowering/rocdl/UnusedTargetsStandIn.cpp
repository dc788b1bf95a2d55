// Linked only into the static archive (M3IDX_STATIC_LLVM). lld's ELF driver, which links gfx950
// code objects in process, initializes every target LLVM was built with (InitializeAllTargets and
// friends), and each initializer pulls its whole back end out of the static libraries: about
// 48 MB of AArch64, RISCV, Hexagon, PowerPC... code that m3idx never runs. Defining the
// initializers of the targets m3idx does not use here (empty: those targets stay unregistered)
// keeps their back ends out; X86 (host JIT), NVPTX (sm_90) and AMDGPU (gfx950) keep LLVM's own.
// The list is Debian's LLVM 22 targets (llvm/Config/Targets.def) less those three: a target
// Debian adds later is simply linked, one it drops leaves an unused function here.
#define M3IDX_UNUSED_TARGET(T)                                                                     \
  extern "C" void LLVMInitialize##T##TargetInfo() {}                                               \
  extern "C" void LLVMInitialize##T##Target() {}                                                   \
  extern "C" void LLVMInitialize##T##TargetMC() {}                                                 \
  extern "C" void LLVMInitialize##T##AsmPrinter() {}                                               \
  extern "C" void LLVMInitialize##T##AsmParser() {}                                                \
  extern "C" void LLVMInitialize##T##Disassembler() {}

M3IDX_UNUSED_TARGET(AArch64)
M3IDX_UNUSED_TARGET(ARM)
M3IDX_UNUSED_TARGET(AVR)
M3IDX_UNUSED_TARGET(BPF)
M3IDX_UNUSED_TARGET(Hexagon)
M3IDX_UNUSED_TARGET(Lanai)
M3IDX_UNUSED_TARGET(LoongArch)
M3IDX_UNUSED_TARGET(Mips)
M3IDX_UNUSED_TARGET(MSP430)
M3IDX_UNUSED_TARGET(PowerPC)
M3IDX_UNUSED_TARGET(RISCV)
M3IDX_UNUSED_TARGET(Sparc)
M3IDX_UNUSED_TARGET(SPIRV)
M3IDX_UNUSED_TARGET(SystemZ)
M3IDX_UNUSED_TARGET(VE)
M3IDX_UNUSED_TARGET(WebAssembly)
M3IDX_UNUSED_TARGET(XCore)
M3IDX_UNUSED_TARGET(M68k)
M3IDX_UNUSED_TARGET(Xtensa)

extern "C" void LLVMInitializeRISCVTargetMCA() {}
