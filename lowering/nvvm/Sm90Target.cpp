// The NVIDIA Hopper target: the DSL's GPU form lowered to NVVM and PTX in-process. The NVFP4
// decode rounds with cvt.rn.satfinite.e4m3x2.f16x2 (nvvm/Sm90KeyTables.cpp); other small-float
// conversions use the exact integer expansion. The driver JIT-compiles the PTX, or ptxas makes a
// cubin when it is installed. The chip is sm_90a, Hopper's arch-specific set: warpgroup programs
// use wgmma (nvvm/Sm90Wgmma.cpp), which sm_90 PTX cannot name; it runs on H100/H200 only.
#include "lowering/Target.h"
#include "lowering/TargetLowering.h"

namespace m3idx::lowering {

namespace {

class Sm90Target final : public Target {
public:
  Sm90Target() {
    desc_.kind = "sm_90";
    desc_.arch = "sm_90a";
    desc_.features = "+ptx84";
    desc_.waveSize = 32;
  }
  const TargetDesc &desc() const override { return desc_; }
  BinaryKind binaryKind() const override { return BinaryKind::Ptx; }
  GpuForm gpuForm() const override { return {32, &sm90Lowering()}; }
  std::vector<std::string> pipeline() const override {
    return {"m3idx-expand-small-floats",
            "canonicalize",
            "cse",
            "gpu.module(convert-vector-to-scf,convert-scf-to-cf)",
            "nvvm-attach-target{chip=sm_90a features=+ptx84 O=3}",
            // convert-nvvm-to-llvm: wgmma.mma_async becomes inline PTX
            "gpu.module(convert-gpu-to-nvvm,convert-nvvm-to-llvm,convert-vector-to-llvm,convert-arith-to-llvm,"
            "canonicalize,cse,"
            "convert-ub-to-llvm,reconcile-unrealized-casts)",
            "gpu-module-to-binary{format=isa}"};
  }

private:
  TargetDesc desc_;
};

} // namespace

std::unique_ptr<Target> makeSm90Target() { return std::make_unique<Sm90Target>(); }

} // namespace m3idx::lowering
