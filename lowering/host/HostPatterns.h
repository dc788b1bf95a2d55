// The host form as conversion patterns over the tile dialect (tile/TileOps.td), one per op: a
// kernel's func.func becomes a function over a range of program ids, tiles of at most
// HostTiles::kPiece lanes become vectors and wider ones stack buffers worked on in pieces
// (HostTypeConverter, HostTiles.h), and every tile op, tile-typed arith op, splat, loop and branch
// its host form in upstream dialects (func, arith, scf, vector, memref, llvm fences). Patterns of
// ops: host/HostOpPatterns.cpp; of the function, loops and branches: host/HostRegionPatterns.cpp;
// the driver: host/HostConversion.cpp. Internal to lowering/.
#pragma once

#include "core/Status.h"
#include "dsl/Ir.h"
#include "lowering/host/HostKernelState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/DialectConversion.h"

namespace m3idx::lowering {

// A host pattern of one op kind, with the kernel's state.
template <typename SourceOp>
class HostStatePattern : public mlir::OpConversionPattern<SourceOp> {
public:
  HostStatePattern(const mlir::TypeConverter &converter, mlir::MLIRContext *ctx, HostKernelState &kernel)
      : mlir::OpConversionPattern<SourceOp>(converter, ctx), kernel_(kernel) {}

protected:
  HostKernelState &kernel_;
};

// A pattern whose lower() emits the host form of `op` (before it) and returns the values of its
// results; the base replaces `op` by them and widens a dot_tiles b operand where it is defined.
template <typename SourceOp>
class HostPattern : public HostStatePattern<SourceOp> {
public:
  using Adaptor = typename SourceOp::Adaptor;
  using HostStatePattern<SourceOp>::HostStatePattern;

  mlir::LogicalResult matchAndRewrite(SourceOp op, Adaptor adaptor,
                                      mlir::ConversionPatternRewriter &rewriter) const final {
    mlir::ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    mlir::FailureOr<llvm::SmallVector<mlir::Value>> results = lower(op, adaptor, b);
    if (mlir::failed(results))
      return mlir::failure();
    this->kernel_.defined(b, op, *results);
    rewriter.replaceOp(op, *results);
    return mlir::success();
  }

protected:
  virtual mlir::FailureOr<llvm::SmallVector<mlir::Value>> lower(SourceOp op, Adaptor adaptor,
                                                                mlir::ImplicitLocOpBuilder &b) const = 0;
};

void populateHostOpPatterns(const HostTypeConverter &converter, mlir::RewritePatternSet &patterns, HostKernelState &kernel);
void populateHostRegionPatterns(const HostTypeConverter &converter, mlir::RewritePatternSet &patterns,
                                HostKernelState &kernel);
// Both of the above.
void populateHostPatterns(const HostTypeConverter &converter, mlir::RewritePatternSet &patterns, HostKernelState &kernel);
// Which ops the host form has: no tile op, no op on a tensor, funcs over program ids.
void configureHostTarget(mlir::ConversionTarget &target);

// The tile-form kernel in `module` converted to the host form in place. Where an op has no host
// form: failure, the conversion's diagnostics, and where a pattern said why, `error` (naming the
// kernel line of the op) and `failedOp` (the op, while `module` lives).
mlir::LogicalResult convertToHost(mlir::ModuleOp module, std::string &error, mlir::Operation **failedOp = nullptr);

// A DSL kernel's host module: its tile form (tile/FromDsl.h) converted; what GpuModule.h's
// emitGpuModule is to the GPU targets.
StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> emitHostModule(mlir::MLIRContext &ctx, const dsl::Kernel &kernel);

// --m3idx-to-host in m3idx-opt: convertToHost on every kernel of a module. Idempotent.
void registerHostConversionPass();

} // namespace m3idx::lowering
