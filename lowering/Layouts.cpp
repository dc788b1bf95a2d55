#include "lowering/Layouts.h"

#include <fmt/format.h>

#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "tile/FromDsl.h"

namespace m3idx::lowering {

StatusOr<std::unique_ptr<KernelLayouts>> KernelLayouts::assign(const dsl::Kernel &k, const TargetLowering &target,
                                                               int threads) {
  std::unique_ptr<KernelLayouts> l(new KernelLayouts());
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&l->ctx_, [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  tile::loadTileDialects(l->ctx_);
  auto module = tile::fromDsl(k, l->ctx_, &l->values_);
  if (!module.ok())
    return Status::error(module.status().message() + (diagnostics.empty() ? "" : ": " + diagnostics));
  l->module_ = std::move(*module);
  auto fn = *l->module_->getOps<mlir::func::FuncOp>().begin();
  if (mlir::failed(target.assignLayouts(fn, threads)) || mlir::failed(mlir::verify(*l->module_)))
    return Status::error(fmt::format("kernel @{}: {}'s layout pass failed{}", k.name, target.name(),
                                     diagnostics.empty() ? "" : ": " + diagnostics));
  // The emitter converts a DSL value once, right after its definition, for all its uses.
  std::string unlowered;
  fn.walk([&](tile::ConvertLayoutOp c) {
    if (unlowered.empty() && !c.getTile().hasOneUse())
      unlowered = fmt::format("kernel @{}: {}'s layout pass converts a tile that is also read unconverted",
                              k.name, target.name());
  });
  if (!unlowered.empty())
    return Status::error(unlowered);
  return l;
}

std::vector<Spread> KernelLayouts::spreads() const {
  std::vector<Spread> out(values_.size(), Spread::Blocked);
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i])
      out[i] = tile::layoutOf(values_[i].getType());
  return out;
}

std::map<int32_t, Spread> KernelLayouts::converts() const {
  std::map<int32_t, Spread> out;
  for (size_t i = 0; i < values_.size(); ++i)
    if (mlir::Value v = values_[i]; v && v.hasOneUse())
      if (auto convert = mlir::dyn_cast<tile::ConvertLayoutOp>(*v.getUsers().begin()))
        out[static_cast<int32_t>(i)] = tile::layoutOf(convert.getType());
  return out;
}

void KernelLayouts::noteDotUnit(dsl::ValueId result, const char *unit) {
  if (mlir::Operation *dot = values_[result.id].getDefiningOp())
    dot->setAttr("m3idx.unit", mlir::StringAttr::get(&ctx_, unit));
}

std::string KernelLayouts::print() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  mlir::ModuleOp module = module_.get();
  module.print(os);
  return text;
}

} // namespace m3idx::lowering
