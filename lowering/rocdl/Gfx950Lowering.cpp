// gfx950's side of the DSL -> MLIR step (lowering/TargetLowering.h): a program is one wave of 64
// lanes (shuffles reach the whole program, barriers are the workgroup's); its kernels' dots and
// decodes are Gfx950Program's.
#include "lowering/rocdl/Gfx950Program.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <fmt/format.h>

namespace m3idx::lowering {

namespace {

class Gfx950Lowering final : public TargetLowering {
public:
  const char *name() const override { return "gfx950"; }
  std::unique_ptr<TargetProgram> program(GpuKernelState &e) const override { return std::make_unique<Gfx950Program>(e); }
  const char *deviceSyncScope() const override { return "agent"; }
  Status checkProgram(llvm::StringRef name, int64_t warps) const override {
    if (warps == 1)
      return Status();
    return Status::error(
        fmt::format("kernel @{}: {} warps per program: gfx950 programs are one wave", name.str(), warps));
  }
};

} // namespace

const TargetLowering &gfx950Lowering() {
  static const Gfx950Lowering lowering;
  return lowering;
}

} // namespace m3idx::lowering
