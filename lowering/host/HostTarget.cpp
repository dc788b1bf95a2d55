// The host CPU target: upstream lowering to the LLVM dialect after m3idx's small-float expansion.
#include "lowering/Target.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

namespace m3idx::lowering {

namespace {

class HostTarget final : public Target {
public:
  HostTarget() {
    desc_.kind = "host";
    desc_.arch = llvm::sys::getHostCPUName().str();
    llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
    std::vector<std::string> on;
    for (const auto &f : features)
      if (f.second)
        on.push_back("+" + f.first().str());
    std::sort(on.begin(), on.end()); // StringMap order is not stable: keep fingerprints stable
    for (const std::string &f : on)
      desc_.features += (desc_.features.empty() ? "" : ",") + f;
    desc_.waveSize = 1;
  }
  const TargetDesc &desc() const override { return desc_; }
  BinaryKind binaryKind() const override { return BinaryKind::HostJit; }
  std::vector<std::string> pipeline() const override {
    return {"m3idx-expand-small-floats",
            "canonicalize",
            "cse",
            "convert-vector-to-scf",
            "convert-scf-to-cf",
            "convert-vector-to-llvm",
            "expand-strided-metadata",
            "finalize-memref-to-llvm",
            "convert-arith-to-llvm",
            "convert-cf-to-llvm",
            "convert-func-to-llvm",
            "convert-ub-to-llvm",
            "reconcile-unrealized-casts"};
  }

private:
  TargetDesc desc_;
};

} // namespace

std::unique_ptr<Target> makeHostTarget() { return std::make_unique<HostTarget>(); }

} // namespace m3idx::lowering
