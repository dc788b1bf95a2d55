// Spread assignment as union-find: ops whose operands and results must share a spread (elementwise
// ops, a decode's bytes/scales/keys, loop-carried and branch values) join one group; every op
// narrows the spreads its group may take; a group that holds a tensor-core operand or result takes
// that spread when it is still allowed, any other group stays Blocked.
#include "lowering/nvvm/MmaSpread.h"

#include <numeric>

namespace m3idx::lowering {


using dsl::OpKind;

namespace {

constexpr uint8_t kBlocked = 1, kRows = 2, kAcc = 4, kWacc = 8, kFold = 16,
                  kAny = kBlocked | kRows | kAcc | kWacc | kFold;

uint8_t bit(Spread s) { return static_cast<uint8_t>(1u << static_cast<int>(s)); }

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
  Spread choose(int32_t v) {
    v = find(v);
    for (Spread s : {Spread::MmaRows, Spread::MmaAcc, Spread::WgmmaAcc, Spread::WgmmaAccFolded})
      if (wanted_[v] == bit(s) && (allowed_[v] & bit(s)))
        return s;
    return Spread::Blocked;
  }

private:
  std::vector<int32_t> parent_;
  std::vector<uint8_t> allowed_, wanted_;
};

bool elementwise(OpKind k) {
  return (k >= OpKind::Add && k <= OpKind::Select) || (k >= OpKind::ExtS && k <= OpKind::ClampF);
}

const dsl::Op &yieldOf(const dsl::Kernel &k, const dsl::Region &r) { return k.ops[r.ops.back()]; }

} // namespace

std::vector<Spread> assignMmaSpreads(const dsl::Kernel &k,
                                     const std::function<bool(const dsl::Op &)> &mmaFits,
                                     const std::function<bool(const dsl::Op &)> &wgmmaFits) {
  const size_t n = k.valueTypes.size();
  auto isTile = [&](dsl::ValueId v) { return k.typeOf(v).isTile(); };
  // ffmaDot: dots pinned to FFMA; blockedFold: fold.max ops whose input is not in accumulators.
  auto solve = [&](const std::vector<bool> &ffmaDot, const std::vector<bool> &blockedFold) {
    Groups g(n);
    auto allowAll = [&](const std::vector<dsl::ValueId> &vs, uint8_t mask) {
      for (dsl::ValueId v : vs)
        if (isTile(v))
          g.allow(v.id, mask);
    };
    for (size_t i = 0; i < k.ops.size(); ++i) {
      const dsl::Op &op = k.ops[i];
      switch (op.kind) {
      case OpKind::ConstInt: case OpKind::ConstFloat: case OpKind::ScalarArg:
      case OpKind::ProgramId: case OpKind::Load: case OpKind::Store: case OpKind::AtomicAdd: case OpKind::Yield:
        break;
      case OpKind::Iota:
        allowAll(op.results, kBlocked | kAcc | kWacc);
        break;
      case OpKind::Splat:
        allowAll(op.results, kBlocked | kAcc | kWacc | kFold);
        break;
      case OpKind::FoldMax: // in-thread on wgmma accumulators (pairs of tokens g, g + 8)
        g.allow(op.operands[0].id, kBlocked | (op.intAttr == 8 ? kWacc : 0));
        g.allow(op.results[0].id, blockedFold[i] ? kBlocked : kBlocked | kFold);
        g.want(op.results[0].id, kFold);
        break;
      case OpKind::LoadTile:
        g.allow(op.results[0].id, k.typeOf(op.results[0]).lanes % 64 == 0 ? kBlocked | kRows : kBlocked);
        break;
      case OpKind::DecodeNvfp4:
        g.unite(op.results[0].id, op.operands[0].id);
        g.unite(op.results[0].id, op.operands[1].id);
        g.allow(op.results[0].id, kBlocked | kRows);
        break;
      case OpKind::DotTiles:
        g.allow(op.operands[1].id, kBlocked);
        if (wgmmaFits && wgmmaFits(op) && !ffmaDot[i]) { // keys: each warp's 16 rows as A
          g.allow(op.operands[0].id, kBlocked | kRows);
          g.want(op.operands[0].id, kRows);
          g.allow(op.results[0].id, kBlocked | kWacc);
          g.want(op.results[0].id, kWacc);
        } else if (!mmaFits(op) || ffmaDot[i]) {
          g.allow(op.operands[0].id, kBlocked);
          g.allow(op.results[0].id, kBlocked);
        } else {
          g.allow(op.operands[0].id, kBlocked | kRows);
          g.want(op.operands[0].id, kRows);
          g.allow(op.results[0].id, kBlocked | kAcc);
          g.want(op.results[0].id, kAcc);
        }
        break;
      case OpKind::ReduceMaxGroups: // accumulators: 16 tokens per column (mma), N = 8..128 columns (wgmma)
        g.allow(op.operands[0].id, kBlocked | (k.typeOf(op.operands[0]).lanes == 16 * op.intAttr ? kAcc : 0) |
                                       (op.intAttr % 8 == 0 && op.intAttr <= 128 ? kWacc | kFold : 0));
        g.allow(op.results[0].id, kBlocked);
        break;
      case OpKind::For: {
        const dsl::Region &r = op.regions[0];
        const dsl::Op &y = yieldOf(k, r);
        for (size_t j = 0; j < op.results.size(); ++j) {
          g.unite(op.results[j].id, op.operands[3 + j].id);
          g.unite(op.results[j].id, r.args[1 + j].id);
          g.unite(op.results[j].id, y.operands[j].id);
        }
        break;
      }
      case OpKind::If:
        for (const dsl::Region &r : op.regions)
          for (size_t j = 0; j < op.results.size(); ++j)
            g.unite(op.results[j].id, yieldOf(k, r).operands[j].id);
        break;
      default:
        if (elementwise(op.kind)) {
          for (dsl::ValueId v : op.operands)
            if (isTile(v) && isTile(op.results[0]))
              g.unite(op.results[0].id, v.id);
          allowAll(op.results, kBlocked | kAcc | kWacc | kFold);
          allowAll(op.operands, kBlocked | kAcc | kWacc | kFold);
        } else { // extract, shuffle, reductions, stores, dot, ...: blocked order only
          allowAll(op.operands, kBlocked);
          allowAll(op.results, kBlocked);
        }
      }
    }
    std::vector<Spread> out(n, Spread::Blocked);
    for (size_t v = 0; v < n; ++v)
      if (isTile(dsl::ValueId{static_cast<int32_t>(v)}))
        out[v] = g.choose(static_cast<int32_t>(v));
    return out;
  };
  // A dot whose keys cannot be in fragment order runs on FFMA, whose results are blocked, and a
  // fold.max of a tile not in wgmma accumulators folds in blocked order: solve again with those
  // results pinned (their groups may have wanted accumulators) until nothing more is pinned.
  std::vector<bool> ffma(k.ops.size(), false), blockedFold(k.ops.size(), false);
  std::vector<Spread> spreads = solve(ffma, blockedFold);
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < k.ops.size(); ++i) {
      const dsl::Op &op = k.ops[i];
      if (op.kind == OpKind::DotTiles && !ffma[i] && (mmaFits(op) || (wgmmaFits && wgmmaFits(op))) &&
          spreads[op.operands[0].id] != Spread::MmaRows)
        again = ffma[i] = true;
      if (op.kind == OpKind::FoldMax && !blockedFold[i] && spreads[op.operands[0].id] != Spread::WgmmaAcc &&
          spreads[op.results[0].id] != Spread::Blocked)
        again = blockedFold[i] = true;
    }
    if (again)
      spreads = solve(ffma, blockedFold);
  }
  return spreads;
}

} // namespace m3idx::lowering
