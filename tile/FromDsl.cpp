#include "tile/FromDsl.h"

#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "tile/TileDialect.h"

namespace m3idx::tile {

using dsl::Elem;
using dsl::OpKind;
namespace arith = mlir::arith;

void loadTileDialects(mlir::MLIRContext &ctx) {
  mlir::DialectRegistry registry;
  registerTileDialects(registry);
  ctx.appendDialectRegistry(registry);
  ctx.loadAllAvailableDialects();
}

mlir::Type elemType(mlir::MLIRContext *ctx, Elem e) {
  mlir::Builder b(ctx);
  switch (e) {
  case Elem::I1: return b.getI1Type();
  case Elem::I8: return b.getI8Type();
  case Elem::I32: return b.getI32Type();
  case Elem::I64: return b.getI64Type();
  case Elem::F32: return b.getF32Type();
  case Elem::F8E4M3FN: return b.getType<mlir::Float8E4M3FNType>();
  case Elem::F4E2M1FN: return b.getType<mlir::Float4E2M1FNType>();
  }
  return {};
}

namespace {

class Translator {
public:
  Translator(const dsl::Kernel &k, mlir::MLIRContext &ctx) : k_(k), b_(&ctx), values_(k.valueTypes.size()) {}

  StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> run() {
    mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(b_.getUnknownLoc());
    b_.setInsertionPointToEnd(module->getBody());
    llvm::SmallVector<mlir::Type> args;
    for (const dsl::BufferArg &buf : k_.buffers)
      args.push_back(mlir::MemRefType::get({mlir::ShapedType::kDynamic}, elem(buf.elem)));
    for (const dsl::ScalarArgDecl &s : k_.scalars)
      args.push_back(elem(s.elem));
    auto fn = mlir::func::FuncOp::create(b_, b_.getUnknownLoc(), k_.name, b_.getFunctionType(args, {}));
    for (size_t i = 0; i < k_.buffers.size(); ++i) {
      const dsl::Access a = k_.buffers[i].access;
      fn.setArgAttr(i, "m3idx.access",
                    b_.getStringAttr(a == dsl::Access::Read ? "read" : a == dsl::Access::Write ? "write" : "read_write"));
      fn.setArgAttr(i, "m3idx.name", b_.getStringAttr(k_.buffers[i].name));
    }
    for (size_t i = 0; i < k_.scalars.size(); ++i)
      fn.setArgAttr(k_.buffers.size() + i, "m3idx.name", b_.getStringAttr(k_.scalars[i].name));
    if (k_.warps > 1)
      fn->setAttr("m3idx.warps", b_.getI64IntegerAttr(k_.warps));
    fn_ = fn;
    b_.setInsertionPointToStart(fn.addEntryBlock());
    M3IDX_RETURN_IF_ERROR(region(k_.body));
    mlir::func::ReturnOp::create(b_, b_.getUnknownLoc());
    if (mlir::failed(mlir::verify(*module))) // diagnostics go to the context's handler
      return Status::error(fmt::format("kernel @{}: the tile dialect's verifier refused it", k_.name));
    return module;
  }

  const std::vector<mlir::Value> &values() const { return values_; }

private:
  mlir::Type elem(Elem e) { return elemType(b_.getContext(), e); }
  mlir::Type type(dsl::Type t) {
    return t.isTile() ? mlir::Type(mlir::RankedTensorType::get({t.lanes}, elem(t.elem))) : elem(t.elem);
  }
  mlir::Location loc(const dsl::Op &op) {
    return op.loc.known() ? mlir::Location(mlir::FileLineColLoc::get(b_.getStringAttr(op.loc.file), op.loc.line,
                                                                     op.loc.column))
                          : b_.getUnknownLoc();
  }

  Status region(const dsl::Region &r) {
    for (int32_t i : r.ops)
      M3IDX_RETURN_IF_ERROR(emit(k_.ops[i]));
    return Status();
  }

  Status emit(const dsl::Op &op) {
    const mlir::Location at = loc(op);
    auto in = [&](size_t i) { return values_[op.operands[i].id]; };
    auto rt = [&]() { return type(k_.typeOf(op.results[0])); };
    auto set = [&](mlir::Value v) { values_[op.results[0].id] = v; };
    auto buf = [&]() { return fn_.getArgument(static_cast<unsigned>(op.intAttr)); };
    auto cmpi = [&](arith::CmpIPredicate p) { set(arith::CmpIOp::create(b_, at, p, in(0), in(1))); };
    const bool isF = op.operands.empty() ? false : dsl::isFloat(k_.typeOf(op.operands[0]).elem);
    switch (op.kind) {
    case OpKind::ConstInt: {
      mlir::Type t = rt();
      set(arith::ConstantOp::create(b_, at, t, b_.getIntegerAttr(t, op.intAttr)));
      return Status();
    }
    case OpKind::ConstFloat: set(arith::ConstantOp::create(b_, at, b_.getF32Type(), b_.getF32FloatAttr(static_cast<float>(op.floatAttr)))); return Status();
    case OpKind::ScalarArg: set(fn_.getArgument(static_cast<unsigned>(k_.buffers.size() + op.intAttr))); return Status();
    case OpKind::ProgramId: set(ProgramIdOp::create(b_, at, b_.getI64Type())); return Status();
    case OpKind::Iota: set(IotaOp::create(b_, at, rt())); return Status();
    case OpKind::Add: set(isF ? arith::AddFOp::create(b_, at, in(0), in(1)).getResult() : arith::AddIOp::create(b_, at, in(0), in(1)).getResult()); return Status();
    case OpKind::Sub: set(isF ? arith::SubFOp::create(b_, at, in(0), in(1)).getResult() : arith::SubIOp::create(b_, at, in(0), in(1)).getResult()); return Status();
    case OpKind::Mul: set(isF ? arith::MulFOp::create(b_, at, in(0), in(1)).getResult() : arith::MulIOp::create(b_, at, in(0), in(1)).getResult()); return Status();
    case OpKind::DivS: set(arith::DivSIOp::create(b_, at, in(0), in(1))); return Status();
    case OpKind::RemS: set(arith::RemSIOp::create(b_, at, in(0), in(1))); return Status();
    case OpKind::MinS: set(arith::MinSIOp::create(b_, at, in(0), in(1))); return Status();
    case OpKind::MaxS: set(arith::MaxSIOp::create(b_, at, in(0), in(1))); return Status();
    case OpKind::MaxNumF: set(arith::MaxNumFOp::create(b_, at, in(0), in(1))); return Status();
    case OpKind::And: set(arith::AndIOp::create(b_, at, in(0), in(1))); return Status();
    case OpKind::Or: set(arith::OrIOp::create(b_, at, in(0), in(1))); return Status();
    case OpKind::Xor: set(arith::XOrIOp::create(b_, at, in(0), in(1))); return Status();
    case OpKind::Shl: set(arith::ShLIOp::create(b_, at, in(0), in(1))); return Status();
    case OpKind::ShrU: set(arith::ShRUIOp::create(b_, at, in(0), in(1))); return Status();
    case OpKind::CmpEq: cmpi(arith::CmpIPredicate::eq); return Status();
    case OpKind::CmpNe: cmpi(arith::CmpIPredicate::ne); return Status();
    case OpKind::CmpLtS: cmpi(arith::CmpIPredicate::slt); return Status();
    case OpKind::CmpLeS: cmpi(arith::CmpIPredicate::sle); return Status();
    case OpKind::CmpGtS: cmpi(arith::CmpIPredicate::sgt); return Status();
    case OpKind::CmpGeS: cmpi(arith::CmpIPredicate::sge); return Status();
    case OpKind::CmpGtU: cmpi(arith::CmpIPredicate::ugt); return Status();
    case OpKind::CmpUnordF: set(arith::CmpFOp::create(b_, at, arith::CmpFPredicate::UNO, in(0), in(1))); return Status();
    case OpKind::CmpEqF: set(arith::CmpFOp::create(b_, at, arith::CmpFPredicate::OEQ, in(0), in(1))); return Status();
    case OpKind::Select: set(arith::SelectOp::create(b_, at, in(0), in(1), in(2))); return Status();
    case OpKind::ExtS: set(arith::ExtSIOp::create(b_, at, rt(), in(0))); return Status();
    case OpKind::ExtU: set(arith::ExtUIOp::create(b_, at, rt(), in(0))); return Status();
    case OpKind::Trunc: set(arith::TruncIOp::create(b_, at, rt(), in(0))); return Status();
    case OpKind::SIToFP: set(arith::SIToFPOp::create(b_, at, rt(), in(0))); return Status();
    case OpKind::ExtF: set(arith::ExtFOp::create(b_, at, rt(), in(0))); return Status();
    case OpKind::TruncF: set(arith::TruncFOp::create(b_, at, rt(), in(0))); return Status();
    case OpKind::Bitcast: set(arith::BitcastOp::create(b_, at, rt(), in(0))); return Status();
    case OpKind::ClampF: set(ClampFOp::create(b_, at, rt(), in(0), b_.getF64FloatAttr(op.floatAttr))); return Status();
    case OpKind::Splat: set(mlir::tensor::SplatOp::create(b_, at, in(0), rt())); return Status();
    case OpKind::Extract: set(ExtractOp::create(b_, at, rt(), in(0), b_.getI64IntegerAttr(op.intAttr))); return Status();
    case OpKind::ExtractAt: set(ExtractAtOp::create(b_, at, rt(), in(0), in(1))); return Status();
    case OpKind::Shuffle: set(ShuffleOp::create(b_, at, rt(), in(0), in(1), b_.getDenseI32ArrayAttr(op.lanesAttr))); return Status();
    case OpKind::ReduceAdd: set(ReduceAddOp::create(b_, at, rt(), in(0))); return Status();
    case OpKind::ReduceMax: set(ReduceMaxOp::create(b_, at, rt(), in(0))); return Status();
    case OpKind::ReduceMaxGroups: set(ReduceMaxGroupsOp::create(b_, at, rt(), in(0), b_.getI64IntegerAttr(op.intAttr))); return Status();
    case OpKind::FoldMax: set(FoldMaxOp::create(b_, at, rt(), in(0), b_.getI64IntegerAttr(op.intAttr))); return Status();
    case OpKind::Load: set(LoadOp::create(b_, at, rt(), buf(), in(0))); return Status();
    case OpKind::LoadTile: set(LoadTileOp::create(b_, at, rt(), buf(), in(0), b_.getI32IntegerAttr(op.alignAttr))); return Status();
    case OpKind::LoadGather: set(LoadGatherOp::create(b_, at, rt(), buf(), in(0), in(1))); return Status();
    case OpKind::LoadRows: set(LoadRowsOp::create(b_, at, rt(), buf(), in(0), in(1), b_.getI32IntegerAttr(op.alignAttr))); return Status();
    case OpKind::LoadTileMasked: set(LoadTileMaskedOp::create(b_, at, rt(), buf(), in(0), in(1), b_.getI32IntegerAttr(op.alignAttr))); return Status();
    case OpKind::Store: StoreOp::create(b_, at, in(1), buf(), in(0)); return Status();
    case OpKind::StoreTile: StoreTileOp::create(b_, at, in(1), buf(), in(0), b_.getI32IntegerAttr(op.alignAttr)); return Status();
    case OpKind::StoreScatter: StoreScatterOp::create(b_, at, in(1), buf(), in(0), in(2)); return Status();
    case OpKind::AtomicAdd: set(AtomicAddOp::create(b_, at, rt(), buf(), in(0), in(1))); return Status();
    case OpKind::GridAwait: GridAwaitOp::create(b_, at); return Status();
    case OpKind::GridRelease: GridReleaseOp::create(b_, at); return Status();
    case OpKind::ProgramSync: ProgramSyncOp::create(b_, at); return Status();
    case OpKind::DecodeNvfp4: set(DecodeNvfp4Op::create(b_, at, rt(), in(0), in(1))); return Status();
    case OpKind::Dot: set(DotOp::create(b_, at, b_.getF32Type(), in(0), in(1))); return Status();
    case OpKind::DotTiles: set(DotTilesOp::create(b_, at, rt(), in(0), in(1), b_.getI64IntegerAttr(op.intAttr))); return Status();
    case OpKind::PackScoreKey: set(PackScoreKeyOp::create(b_, at, rt(), in(0), in(1))); return Status();
    case OpKind::Stage: {
      llvm::SmallVector<mlir::Value> vs;
      llvm::SmallVector<mlir::Type> types;
      for (size_t i = 0; i < op.operands.size(); ++i)
        vs.push_back(in(i)), types.push_back(in(i).getType());
      auto stage = StageOp::create(b_, at, types, vs, b_.getI64IntegerAttr(op.intAttr));
      for (size_t i = 0; i < op.results.size(); ++i)
        values_[op.results[i].id] = stage.getResult(static_cast<unsigned>(i));
      return Status();
    }
    case OpKind::Yield: {
      llvm::SmallVector<mlir::Value> vs;
      for (size_t i = 0; i < op.operands.size(); ++i)
        vs.push_back(in(i));
      mlir::scf::YieldOp::create(b_, at, vs);
      return Status();
    }
    case OpKind::For: {
      llvm::SmallVector<mlir::Value> inits;
      for (size_t i = 3; i < op.operands.size(); ++i)
        inits.push_back(in(i));
      auto forOp = mlir::scf::ForOp::create(b_, at, in(0), in(1), in(2), inits);
      if (op.intAttr > 1)
        forOp->setAttr("m3idx.unroll", b_.getI64IntegerAttr(op.intAttr));
      mlir::Block *body = forOp.getBody();
      const dsl::Region &r = op.regions[0];
      for (size_t i = 0; i < r.args.size(); ++i)
        values_[r.args[i].id] = body->getArgument(static_cast<unsigned>(i));
      mlir::OpBuilder::InsertionGuard guard(b_);
      if (!body->empty()) // the builder's implicit yield when there are no iter args
        body->back().erase();
      b_.setInsertionPointToEnd(body);
      M3IDX_RETURN_IF_ERROR(region(r));
      for (size_t i = 0; i < op.results.size(); ++i)
        values_[op.results[i].id] = forOp.getResult(static_cast<unsigned>(i));
      return Status();
    }
    case OpKind::If: {
      llvm::SmallVector<mlir::Type> types;
      for (dsl::ValueId r : op.results)
        types.push_back(type(k_.typeOf(r)));
      auto ifOp = mlir::scf::IfOp::create(b_, at, types, in(0), /*withElseRegion=*/true);
      for (int r = 0; r < 2; ++r) {
        mlir::Block *block = r == 0 ? ifOp.thenBlock() : ifOp.elseBlock();
        mlir::OpBuilder::InsertionGuard guard(b_);
        if (!block->empty())
          block->back().erase();
        b_.setInsertionPointToEnd(block);
        M3IDX_RETURN_IF_ERROR(region(op.regions[r]));
      }
      for (size_t i = 0; i < op.results.size(); ++i)
        values_[op.results[i].id] = ifOp.getResult(static_cast<unsigned>(i));
      return Status();
    }
    }
    return Status::error(fmt::format("kernel @{}: no tile op for {}", k_.name, dsl::opName(op.kind)));
  }

  const dsl::Kernel &k_;
  mlir::OpBuilder b_;
  mlir::func::FuncOp fn_;
  std::vector<mlir::Value> values_;
};

} // namespace

StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> fromDsl(const dsl::Kernel &k, mlir::MLIRContext &ctx,
                                                    std::vector<mlir::Value> *values) {
  Translator t(k, ctx);
  auto module = t.run();
  if (module.ok() && values)
    *values = t.values();
  return module;
}

namespace {

// A context with the tile dialects that collects its diagnostics as text.
struct TextContext {
  mlir::MLIRContext ctx{mlir::MLIRContext::Threading::DISABLED};
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler{&ctx, [this](mlir::Diagnostic &d) {
                                          diagnostics += d.str() + "\n";
                                          return mlir::success();
                                        }};
  TextContext() { loadTileDialects(ctx); }
};

std::string print(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  return text;
}

} // namespace

StatusOr<std::string> tileText(const dsl::Kernel &k) {
  TextContext t;
  auto module = fromDsl(k, t.ctx);
  if (!module.ok())
    return Status::error(module.status().message() + (t.diagnostics.empty() ? "" : ": " + t.diagnostics));
  return print(**module);
}

StatusOr<std::string> transformTileText(
    const std::string &text, const std::function<Status(mlir::ModuleOp, const std::string &diagnostics)> &transform) {
  TextContext t;
  mlir::ParserConfig config(&t.ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, config);
  if (!module)
    return Status::error("tile text: " + (t.diagnostics.empty() ? std::string("does not parse") : t.diagnostics));
  if (transform) { // parseSourceString verified the text; the transform's result is verified here
    M3IDX_RETURN_IF_ERROR(transform(*module, t.diagnostics));
    if (mlir::failed(mlir::verify(*module)))
      return Status::error("tile text: the transformed module does not verify: " + t.diagnostics);
  }
  return print(*module);
}

StatusOr<std::string> reprintTileText(const std::string &text) { return transformTileText(text, {}); }

} // namespace m3idx::tile
