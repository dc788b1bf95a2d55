// The AMD MI355X target: the DSL's GPU form lowered through ROCDL to a gfx950 code object (HSACO),
// linked by ld.lld in-process through MLIR's gpu-module-to-binary. A program is one wave64.
#include "lowering/Target.h"

#include <filesystem>
#include <system_error>

#include "core/EnvTable.h"

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
  std::vector<std::string> pipeline() const override {
    return {"m3idx-expand-small-floats{keep-small-float-data=true}",
            "canonicalize",
            "cse",
            "gpu.module(convert-vector-to-scf,convert-scf-to-cf)",
            "rocdl-attach-target{chip=gfx950 O=3}",
            "gpu.module(convert-amdgpu-to-rocdl{chipset=gfx950},convert-gpu-to-rocdl{chipset=gfx950},"
            "convert-vector-to-llvm,convert-arith-to-llvm,canonicalize,"
            "cse,convert-ub-to-llvm,reconcile-unrealized-casts)",
            "gpu-module-to-binary{format=bin toolkit=" + rocmToolkitDir() + "}"};
  }

private:
  TargetDesc desc_;
};

} // namespace

// gpu-module-to-binary looks for TOOLKIT/llvm/bin/ld.lld: make one that links to M3IDX_LLD (found
// at configure time), so no ROCm install is needed.
std::string rocmToolkitDir() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "m3idx-rocm-toolkit";
  const fs::path link = dir / "llvm" / "bin" / "ld.lld";
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  const std::string lld = env::get("M3IDX_LLD");
  if (fs::read_symlink(link, ec) != fs::path(lld)) {
    fs::remove(link, ec);
    fs::create_symlink(lld, link, ec);
  }
  return dir.string();
}

std::unique_ptr<Target> makeGfx950Target() { return std::make_unique<Gfx950Target>(); }

} // namespace m3idx::lowering
