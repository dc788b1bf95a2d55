// sm_90's layout assignment as union-find over a tile kernel's values: ops whose operands and
// results must share a layout (elementwise ops, a decode's bytes / scales / keys, loop-carried and
// branch values, a stage's values and results) join one group; every op narrows the layouts its
// group may take; a group that holds a tensor-core operand or result takes that layout when it is
// still allowed, any other group stays blocked.
#include "lowering/nvvm/Sm90Layouts.h"

#include <mutex>
#include <numeric>
#include <set>
#include <vector>

#include "llvm/ADT/DenseMap.h"
#include <fmt/format.h>

#include "llvm/ADT/TypeSwitch.h"
#include "lowering/nvvm/WgmmaShape.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "tile/FromDsl.h"
#include "tile/TileDialect.h"

namespace m3idx::lowering {

using namespace mlir;
using tile::Layout;

namespace {

constexpr uint8_t kBlocked = 1, kRows = 2, kAcc = 4, kWacc = 8, kFold = 16,
                  kAny = kBlocked | kRows | kAcc | kWacc | kFold;
uint8_t bit(Layout l) { return static_cast<uint8_t>(1u << static_cast<int>(l)); }

class Groups {
public:
  explicit Groups(size_t n) : parent_(n), allowed_(n, kAny), wanted_(n, 0) {
    std::iota(parent_.begin(), parent_.end(), 0);
  }
  int32_t find(int32_t v) {
    while (parent_[v] != v)
      v = parent_[v] = parent_[parent_[v]];
    return v;
  }
  void unite(int32_t a, int32_t b) {
    a = find(a), b = find(b);
    if (a == b)
      return;
    parent_[b] = a;
    allowed_[a] &= allowed_[b];
    wanted_[a] |= wanted_[b];
  }
  void allow(int32_t v, uint8_t mask) { allowed_[find(v)] &= mask; }
  void want(int32_t v, uint8_t mask) { wanted_[find(v)] |= mask; }
  Layout choose(int32_t v) {
    v = find(v);
    for (Layout l : {Layout::MmaRows, Layout::MmaAcc, Layout::WgmmaAcc, Layout::WgmmaAccFolded})
      if (wanted_[v] == bit(l) && (allowed_[v] & bit(l)))
        return l;
    return Layout::Blocked;
  }

private:
  std::vector<int32_t> parent_;
  std::vector<uint8_t> allowed_, wanted_;
};

bool isTile(Value v) { return isa<RankedTensorType>(v.getType()); }
int64_t lanesOf(Value v) { return cast<RankedTensorType>(v.getType()).getDimSize(0); }

class Sm90Layouts {
public:
  Sm90Layouts(func::FuncOp fn, int threads) : fn_(fn), threads_(threads) {
    // Layouts are assigned afresh: the converts of an earlier run go first.
    fn_.walk([](tile::ConvertLayoutOp c) {
      c.getResult().replaceAllUsesWith(c.getTile());
      c.erase();
    });
    fn_.walk([&](Operation *op) {
      for (Region &r : op->getRegions())
        for (Block &b : r)
          for (BlockArgument a : b.getArguments())
            add(a);
      for (Value v : op->getResults())
        add(v);
    });
  }

  LogicalResult run() {
    // A dot whose keys cannot be in fragment order runs on FFMA, whose results are blocked, and a
    // fold_max of a tile not in wgmma accumulators folds in blocked order: solve again with those
    // pinned (their groups may have wanted accumulators) until nothing more is pinned.
    std::vector<Layout> layouts = solve();
    for (bool again = true; again;) {
      again = false;
      fn_.walk([&](Operation *op) {
        if (auto dot = dyn_cast<tile::DotTilesOp>(op);
            dot && !ffma_.count(op) && (mmaSyncTakes(shape(dot)) || wgmmaTakes(shape(dot))) &&
            layouts[id(dot.getLhs())] != Layout::MmaRows)
          again = ffma_.insert(op).second;
        if (auto fold = dyn_cast<tile::FoldMaxOp>(op);
            fold && !blockedFold_.count(op) && layouts[id(fold.getTile())] != Layout::WgmmaAcc &&
            layouts[id(fold.getResult())] != Layout::Blocked)
          again = blockedFold_.insert(op).second;
      });
      if (again)
        layouts = solve();
    }
    for (size_t i = 0; i < values_.size(); ++i)
      values_[i].setType(tile::withLayout(values_[i].getType(), layouts[i]));
    convertDemotedDots();
    return success();
  }

private:
  void add(Value v) {
    if (isTile(v) && index_.try_emplace(v, static_cast<int32_t>(values_.size())).second)
      values_.push_back(v);
  }
  int32_t id(Value v) const { return index_.lookup(v); }

  Sm90DotShape shape(tile::DotTilesOp dot) const {
    auto e4m3 = [](Value v) { return isa<Float8E4M3FNType>(cast<RankedTensorType>(v.getType()).getElementType()); };
    return {threads_, e4m3(dot.getLhs()), e4m3(dot.getRhs()), static_cast<int64_t>(dot.getK()),
            lanesOf(dot.getLhs()), lanesOf(dot.getRhs())};
  }

  std::vector<Layout> solve() {
    Groups g(values_.size());
    auto allow = [&](Value v, uint8_t mask) {
      if (isTile(v))
        g.allow(id(v), mask);
    };
    auto allowAll = [&](auto values, uint8_t mask) {
      for (Value v : values)
        allow(v, mask);
    };
    auto unite = [&](Value a, Value b) {
      if (isTile(a) && isTile(b))
        g.unite(id(a), id(b));
    };
    fn_.walk([&](Operation *op) {
      TypeSwitch<Operation *>(op)
          .Case<func::FuncOp, func::ReturnOp, arith::ConstantOp, tile::ProgramIdOp, tile::LoadOp, tile::StoreOp,
                tile::AtomicAddOp, tile::GridAwaitOp, tile::GridReleaseOp, tile::ProgramSyncOp, scf::YieldOp>(
              [](Operation *) {})
          .Case([&](tile::IotaOp o) { allow(o.getResult(), kBlocked | kAcc | kWacc); })
          .Case([&](tensor::SplatOp o) { allow(o.getResult(), kBlocked | kAcc | kWacc | kFold); })
          .Case([&](tile::FoldMaxOp o) { // in-thread on wgmma accumulators (pairs of tokens g, g + 8)
            allow(o.getTile(), kBlocked | (o.getPairs() == 8 ? kWacc : 0));
            allow(o.getResult(), blockedFold_.count(op) ? kBlocked : kBlocked | kFold);
            g.want(id(o.getResult()), kFold);
          })
          .Case([&](tile::LoadTileOp o) {
            allow(o.getResult(), lanesOf(o.getResult()) % 64 == 0 ? kBlocked | kRows : kBlocked);
          })
          .Case([&](tile::DecodeNvfp4Op o) {
            unite(o.getResult(), o.getPacked());
            unite(o.getResult(), o.getScales());
            allow(o.getResult(), kBlocked | kRows);
          })
          .Case([&](tile::DotTilesOp o) {
            allow(o.getRhs(), kBlocked);
            const bool pinned = ffma_.count(op) > 0;
            if (wgmmaTakes(shape(o)) && !pinned) { // keys: each warp's 16 rows as A
              allow(o.getLhs(), kBlocked | kRows);
              g.want(id(o.getLhs()), kRows);
              allow(o.getResult(), kBlocked | kWacc);
              g.want(id(o.getResult()), kWacc);
            } else if (!mmaSyncTakes(shape(o)) || pinned) {
              allow(o.getLhs(), kBlocked);
              allow(o.getResult(), kBlocked);
            } else {
              allow(o.getLhs(), kBlocked | kRows);
              g.want(id(o.getLhs()), kRows);
              allow(o.getResult(), kBlocked | kAcc);
              g.want(id(o.getResult()), kAcc);
            }
          })
          .Case([&](tile::ReduceMaxGroupsOp o) {
            // accumulators: 16 tokens per column (mma), N = 8..128 columns (wgmma)
            const int64_t groups = static_cast<int64_t>(o.getGroups());
            allow(o.getTile(), kBlocked | (lanesOf(o.getTile()) == 16 * groups ? kAcc : 0) |
                                   (groups % 8 == 0 && groups <= 128 ? kWacc | kFold : 0));
            allow(o.getResult(), kBlocked);
          })
          .Case([&](scf::ForOp o) {
            auto yield = cast<scf::YieldOp>(o.getBody()->getTerminator());
            for (unsigned j = 0; j < o.getNumResults(); ++j) {
              unite(o.getResult(j), o.getInitArgs()[j]);
              unite(o.getResult(j), o.getRegionIterArgs()[j]);
              unite(o.getResult(j), yield.getOperand(j));
            }
          })
          .Case([&](tile::StageOp o) { // a staged value keeps its layout across the hand-over
            for (auto [v, r] : llvm::zip(o.getValues(), o.getResults()))
              unite(r, v);
          })
          .Case([&](scf::IfOp o) {
            for (Region *r : {&o.getThenRegion(), &o.getElseRegion()})
              for (unsigned j = 0; j < o.getNumResults(); ++j)
                unite(o.getResult(j), r->front().getTerminator()->getOperand(j));
          })
          .Case([&](arith::BitcastOp o) { // bytes as e4m3 keys: any order, the bits kept in place
            unite(o.getResult(), o.getIn());
            allow(o.getResult(), kBlocked | kRows | kAcc | kWacc | kFold);
          })
          .Default([&](Operation *) {
            const bool elementwise = isa<arith::ArithDialect>(op->getDialect()) || isa<tile::ClampFOp>(op);
            if (elementwise && op->getNumResults() == 1 && isTile(op->getResult(0))) {
              for (Value v : op->getOperands())
                unite(op->getResult(0), v);
              allowAll(op->getResults(), kBlocked | kAcc | kWacc | kFold);
              allowAll(op->getOperands(), kBlocked | kAcc | kWacc | kFold);
            } else { // extract, shuffle, reductions, stores, dot, ...: blocked order only
              allowAll(op->getOperands(), kBlocked);
              allowAll(op->getResults(), kBlocked);
            }
          });
    });
    std::vector<Layout> out(values_.size());
    for (size_t i = 0; i < values_.size(); ++i)
      out[i] = g.choose(static_cast<int32_t>(i));
    return out;
  }

  // A dot on a matrix unit makes accumulators; where its results are needed blocked, say so with
  // a convert_layout to blocked, which every use then reads.
  void convertDemotedDots() {
    OpBuilder b(fn_.getContext());
    fn_.walk([&](tile::DotTilesOp dot) {
      if (tile::layoutOf(dot.getLhs().getType()) != Layout::MmaRows ||
          tile::layoutOf(dot.getType()) != Layout::Blocked)
        return;
      Value result = dot.getResult();
      const Type blocked = result.getType();
      result.setType(tile::withLayout(blocked, wgmmaTakes(shape(dot)) ? Layout::WgmmaAcc : Layout::MmaAcc));
      b.setInsertionPointAfter(dot);
      auto convert = tile::ConvertLayoutOp::create(b, dot.getLoc(), blocked, result);
      result.replaceAllUsesExcept(convert.getResult(), convert);
    });
  }

  func::FuncOp fn_;
  int threads_;
  llvm::DenseMap<Value, int32_t> index_;
  std::vector<Value> values_;
  std::set<Operation *> ffma_, blockedFold_; // dots pinned to FFMA, folds pinned blocked
};

struct AssignSm90LayoutsPass : PassWrapper<AssignSm90LayoutsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(AssignSm90LayoutsPass)
  StringRef getArgument() const override { return "m3idx-assign-sm90-layouts"; }
  StringRef getDescription() const override {
    return "Give every tile of an m3idx tile kernel its sm_90 layout (mma.sync / wgmma fragment orders or blocked)";
  }
  void getDependentDialects(DialectRegistry &registry) const override { registry.insert<tile::TileDialect>(); }
  void runOnOperation() override {
    for (func::FuncOp fn : getOperation().getOps<func::FuncOp>()) {
      FailureOr<int64_t> warps = tile::warpsOf(fn);
      if (failed(warps) || failed(assignSm90Layouts(fn, 32 * static_cast<int>(*warps))))
        return signalPassFailure();
    }
  }
};

} // namespace

LogicalResult assignSm90Layouts(func::FuncOp fn, int threads) { return Sm90Layouts(fn, threads).run(); }

std::unique_ptr<Pass> createAssignSm90LayoutsPass() { return std::make_unique<AssignSm90LayoutsPass>(); }

StatusOr<std::string> assignSm90LayoutsToText(const std::string &text) {
  return tile::transformTileText(text, [](ModuleOp module, const std::string &diagnostics) -> Status {
    for (func::FuncOp fn : module.getOps<func::FuncOp>()) {
      FailureOr<int64_t> warps = tile::warpsOf(fn);
      if (failed(warps))
        return Status::error("tile text: " + diagnostics);
      if (failed(assignSm90Layouts(fn, 32 * static_cast<int>(*warps))))
        return Status::error("sm_90 layouts: " + diagnostics);
    }
    return Status();
  });
}

void registerAssignSm90LayoutsPass() {
  static std::once_flag once;
  std::call_once(once, [] { PassRegistration<AssignSm90LayoutsPass>(); });
}

} // namespace m3idx::lowering
