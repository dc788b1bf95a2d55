// The AMD MI355X target: the DSL's GPU form lowered through ROCDL to gfx950 assembly, which
// lowering/rocdl/HsacoLinker assembles and links into a code object (HSACO) in process. A program
// is one wave64.
#include "lowering/Target.h"
#include "lowering/TargetLowering.h"
#include "lowering/rocdl/HsacoLinker.h"

namespace m3idx::lowering {

namespace {

class Gfx950Target final : public Target {
public:
  Gfx950Target() {
    desc_.kind = "gfx950";
    desc_.arch = "gfx950";
    desc_.features = "wave64";
    desc_.waveSize = 64;
  }
  const TargetDesc &desc() const override { return desc_; }
  BinaryKind binaryKind() const override { return BinaryKind::Hsaco; }
  GpuForm gpuForm() const override { return {64, &gfx950Lowering()}; }
  StatusOr<std::string> finishObject(std::string isa) const override { return linkGfx950Hsaco(isa); }
  std::vector<std::string> pipeline() const override {
    return {"m3idx-expand-small-floats{keep-small-float-data=true}",
            "canonicalize",
            "cse",
            "gpu.module(convert-vector-to-scf,convert-scf-to-cf)",
            "rocdl-attach-target{chip=gfx950 O=3}",
            "gpu.module(convert-amdgpu-to-rocdl{chipset=gfx950},convert-gpu-to-rocdl{chipset=gfx950},"
            "convert-vector-to-llvm,convert-arith-to-llvm,canonicalize,"
            "cse,convert-ub-to-llvm,reconcile-unrealized-casts)",
            "gpu-module-to-binary{format=isa}"};
  }

private:
  TargetDesc desc_;
};

} // namespace

std::unique_ptr<Target> makeGfx950Target() { return std::make_unique<Gfx950Target>(); }

} // namespace m3idx::lowering
