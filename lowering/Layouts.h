// A kernel's layouts as its target's layout pass assigns them: the DSL kernel as the tile dialect
// (tile/FromDsl.h, one op and value per DSL op and value), the target's pass giving every tile an
// encoding (TargetLowering::assignLayouts), and each DSL value's layout read back for the emitter.
// Internal to lowering/.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/Status.h"
#include "dsl/Ir.h"
#include "lowering/Spread.h"
#include "lowering/TargetLowering.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace m3idx::lowering {

class KernelLayouts {
public:
  // `threads`: the program's (a warp's threads times the kernel's warps).
  static StatusOr<std::unique_ptr<KernelLayouts>> assign(const dsl::Kernel &k, const TargetLowering &target,
                                                         int threads);

  // Per DSL value, the layout its defining op makes it in (its tile's encoding; scalars: Blocked).
  std::vector<Spread> spreads() const;
  // The DSL values the pass converts (their one use a convert_layout, which every use of the DSL
  // value then reads), each to the layout its uses see.
  std::map<int32_t, Spread> converts() const;
  // Marks the dot.tiles making DSL value `result` with the unit that runs it (`m3idx.unit`).
  void noteDotUnit(dsl::ValueId result, const char *unit);
  // The encoded tile kernel's text (`m3idx inspect --emit layouts`).
  std::string print() const;

private:
  KernelLayouts() = default;
  mlir::MLIRContext ctx_{mlir::MLIRContext::Threading::DISABLED};
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  std::vector<mlir::Value> values_; // per ValueId
};

} // namespace m3idx::lowering
