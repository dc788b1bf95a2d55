// DSL kernel -> a relocatable host object through the MLIR pipeline and LLVM (mlir::ExecutionEngine
// compiles; its object is kept), and loading such an object with LLVM's ORC JIT linker, which needs
// no compiler: cache hits and AOT bundles load the same way fresh compiles do. Also the named stages
// `m3idx inspect` prints: dsl, mlir, lowered, llvm, asm.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/Status.h"
#include "dsl/Ir.h"


namespace m3idx::lowering {

// A compiled host kernel. Arguments (ciface convention): for each buffer a pointer to a rank-1
// memref descriptor, then each scalar, then pid_begin and pid_end; `args[i]` points at argument i.
class HostKernel {
public:
  explicit HostKernel(void (*fn)(void **)) : fn_(fn) {}
  void call(void **args) const { fn_(args); }

private:
  void (*fn_)(void **); // code lives in the process-wide JIT until exit
};

// A compiled kernel as bytes: an ELF relocatable object and its packed entry point's symbol.
struct HostObject {
  std::string symbol;
  std::vector<uint8_t> bytes;
};

struct HostCompileStats {
  double emitMs = 0, pipelineMs = 0, jitMs = 0;
  double totalMs() const { return emitMs + pipelineMs + jitMs; }
};

// Honors M3IDX_OPT_LEVEL (a code-changing variable of core/EnvTable). `cpu`: an LLVM CPU name
// (with its default features) to compile for instead of this machine, for measuring the back
// end on other processors (`m3idx cache-bench --host-cpu`); such an object is never cached or
// loaded, since this machine may lack its instructions.
StatusOr<HostObject> compileHostObject(const dsl::Kernel &kernel, HostCompileStats *stats = nullptr,
                                       const std::string &cpu = "");
// Links an object into the process-wide JIT and resolves its entry point.
StatusOr<std::unique_ptr<HostKernel>> loadHostKernel(const HostObject &object);
// compileHostObject then loadHostKernel.
StatusOr<std::unique_ptr<HostKernel>> compileHostKernel(const dsl::Kernel &kernel,
                                                        HostCompileStats *stats = nullptr);

// The toolchain part of cache keys: LLVM version and this build of m3idx.
std::string hostToolchainFingerprint();

enum class Stage { Dsl, Mlir, Lowered, Llvm, Asm };
// Stage text for inspection. With `irAfterEachPass`, also the IR after every pipeline pass.
StatusOr<std::string> hostStage(const dsl::Kernel &kernel, Stage stage,
                                std::string *irAfterEachPass = nullptr);

} // namespace m3idx::lowering
