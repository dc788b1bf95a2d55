// DSL kernel -> host machine code through the MLIR pipeline and LLVM's ORC JIT (via
// mlir::ExecutionEngine), plus the named stages `m3idx inspect` prints: dsl, mlir, llvm, asm.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/Status.h"
#include "dsl/Ir.h"

namespace mlir {
class ExecutionEngine;
}
namespace llvm {
class TargetMachine;
}

namespace m3idx::lowering {

// A compiled host kernel. Arguments (ciface convention): for each buffer a pointer to a rank-1
// memref descriptor, then each scalar, then pid_begin and pid_end; `args[i]` points at argument i.
class HostKernel {
public:
  HostKernel(std::unique_ptr<mlir::ExecutionEngine> engine, void (*fn)(void **));
  ~HostKernel();
  void call(void **args) const { fn_(args); }

private:
  std::unique_ptr<mlir::ExecutionEngine> engine_;
  void (*fn_)(void **);
};

struct HostCompileStats {
  double emitMs = 0, pipelineMs = 0, jitMs = 0;
  double totalMs() const { return emitMs + pipelineMs + jitMs; }
};

StatusOr<std::unique_ptr<HostKernel>> compileHostKernel(const dsl::Kernel &kernel,
                                                        HostCompileStats *stats = nullptr);

enum class Stage { Dsl, Mlir, Lowered, Llvm, Asm };
// Stage text for inspection. With `irAfterEachPass`, also the IR after every pipeline pass.
StatusOr<std::string> hostStage(const dsl::Kernel &kernel, Stage stage,
                                std::string *irAfterEachPass = nullptr);

} // namespace m3idx::lowering
