// Top-k kernels (SPEC §5): one program per (head, row) streams the row's scores once, keeping the
// 16 largest packed keys in a sorted 16-lane tile (a compare-shift-select insertion network); the
// scores come 32 at a time, and only a tile that may hold a key above the 16th is inserted key by key.
#include "kernels_src/ScoreKernels.h"

#include <limits>

#include "core/Spec.h"

namespace m3idx::kernels {

using namespace dsl;

namespace {

constexpr int K = spec::kTopkBlocks;

// Inserts `key` into `state`, a tile sorted descending; the smallest key falls off the end.
Value topkInsert(KernelBuilder &b, Value state, Value key) {
  Value keys = b.splat(key, K);
  Value above = b.cmp(OpKind::CmpGtU, keys, state); // a suffix of lanes, as state is sorted
  std::vector<int32_t> shiftRight = {0};           // lane 0 of the first operand, then state
  for (int i = 0; i < K - 1; ++i)
    shiftRight.push_back(K + i);
  Value shifted = b.shuffle(keys, state, shiftRight);
  Value noneAbove = b.cmp(OpKind::CmpNe, keys, keys); // all false
  Value aboveBefore = b.shuffle(noneAbove, above, shiftRight);
  return b.select(above, b.select(aboveBefore, shifted, keys), state);
}

// Scores looked at per step: a step whose best possible key cannot enter the top 16 (the common
// case once the top 16 has filled) costs one tile load and one reduction instead of a serial pass.
constexpr int kScanTile = 32;

// Selects the top 16 of scores[base, base + nblk) into out[outBase, outBase + 16).
void topkRow(KernelBuilder &b, Buffer scores, Value base, Value nblk, Buffer out, Value outBase) {
  const int S = kScanTile;
  // Key 0 is below every real key (the ordered bits of -inf are 0x007FFFFF), so it marks empty.
  Value empty = b.splat(b.constInt(0), K);
  Value lanes = b.iota(S);
  Value negInf = b.splat(b.constF32(-std::numeric_limits<double>::infinity()), S);
  Value steps = (nblk + (S - 1)) / S;
  // The next step's scores are loaded before this step is looked at (a masked load: nothing past
  // nblk is touched), so one load is always in flight behind the comparisons.
  auto loadStep = [&](Value i) { return b.loadTile(scores, base + i * S, S, nblk - i * S); };
  Values top = b.forLoop(b.constInt(0), steps, b.constInt(1), {empty, loadStep(b.constInt(0))},
                         [&](Value i, const Values &s) {
    Value first = i * S, left = nblk - first;
    Value next = loadStep(i + 1);
    Value best = b.reduceMax(b.select(lanes < b.splat(left, S), s[1], negInf)); // NaN dropped
    // No key of this step exceeds (best's ordered bits, the step's last block id).
    Value bound = b.packScoreKey(best, first + (S - 1));
    Value smallest = b.extract(s[0], K - 1);
    Values kept = b.ifElse(
        b.cmp(OpKind::CmpGtU, bound, smallest),
        [&] {
          return b.forLoop(first, b.minS(first + S, nblk), b.constInt(1), {s[0]},
                           [&](Value blk, const Values &t) {
            Value key = b.packScoreKey(b.load(scores, base + blk), blk);
            Value low = b.extract(t[0], K - 1);
            return b.ifElse(
                b.cmp(OpKind::CmpGtU, key, low), [&] { return Values{topkInsert(b, t[0], key)}; },
                [&] { return t; });
          });
        },
        [&] { return Values{s[0]}; });
    return Values{kept[0], next};
  });
  Value ids = b.convert(OpKind::Trunc, top[0] & b.splat(b.constInt(0xFFFFFFFF), K), Elem::I32);
  Value filled = b.iota(K) < b.splat(nblk, K);
  b.storeTile(out, outBase, b.select(filled, ids, b.splat(b.constInt(-1, Elem::I32), K)));
}

Value blocksFor(Value tokens) { return (tokens + (spec::kSparseBlockSize - 1)) / spec::kSparseBlockSize; }

} // namespace

StatusOr<Kernel> buildTopkDecode(const KernelConfig &c) {
  KernelBuilder b("topk_decode");
  Buffer scores = b.buffer("scores", Elem::F32, Access::Read);
  Buffer seqLens = b.buffer("seq_lens", Elem::I32, Access::Read);
  Buffer out = b.buffer("topk", Elem::I32, Access::Write);
  Value numRows = b.scalarArg("num_rows", Elem::I64);
  Value width = b.scalarArg("width", Elem::I64);
  Value decodeRows = b.scalarArg("decode_rows", Elem::I64);
  Value pid = b.programId();
  Value head = pid / decodeRows, row = pid % decodeRows;
  Value seqLen = b.convert(OpKind::ExtS, b.load(seqLens, row / c.queryRows), Elem::I64);
  Value causal = b.maxS(seqLen - c.queryRows + row % c.queryRows + 1, b.constInt(0));
  Value headRow = head * numRows + row;
  topkRow(b, scores, headRow * width, blocksFor(causal), out, headRow * K);
  return b.finish();
}

StatusOr<Kernel> buildTopkPrefill(const KernelConfig &) {
  KernelBuilder b("topk_prefill");
  Buffer scores = b.buffer("scores", Elem::F32, Access::Read);
  Buffer rowBlocks = b.buffer("row_nblk", Elem::I32, Access::Read);
  Buffer out = b.buffer("topk", Elem::I32, Access::Write);
  Value numRows = b.scalarArg("num_rows", Elem::I64);
  Value width = b.scalarArg("width", Elem::I64);
  Value rowBegin = b.scalarArg("row_begin", Elem::I64);
  Value prefillRows = b.scalarArg("prefill_rows", Elem::I64);
  Value pid = b.programId();
  Value head = pid / prefillRows, row = rowBegin + pid % prefillRows;
  Value nblk = b.convert(OpKind::ExtS, b.load(rowBlocks, row), Elem::I64);
  Value headRow = head * numRows + row;
  topkRow(b, scores, headRow * width, nblk, out, headRow * K);
  return b.finish();
}

} // namespace m3idx::kernels
