// Top-k kernels (SPEC §5): one program per (head, row) -- or per segment of a long row, the last
// segment program of the row to finish merging the segments' top 16s. Such a row or segment is
// read once, 32 scores a step, each lane keeping its 3 largest keys; the row's top 16 are taken
// from those 96 by bitonic merges, and only a row where one lane held more of them than it kept is
// streamed again through the running top (rare: see kLaneDepth). A topk_prefill program takes a
// run of unsplit rows, a trip of them at a time, each row in 16 lanes of its own (a GPU thread's
// registers).
#include "kernels_src/ScoreKernels.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <limits>

#include "core/Spec.h"
#include "kernels_src/LaunchPlan.h"
#include "kernels_src/SortNetwork16.h"

namespace m3idx::kernels {

using namespace dsl;

namespace {

constexpr int K = spec::kTopkBlocks;

// Scores looked at per step: a step whose best possible key cannot enter the top 16 (the common
// case once the top 16 has filled) costs one tile load and one reduction; one that may is merged
// into the running top keys by a bitonic network, all lanes at once (a warp's width on GPUs).
constexpr int kScanTile = 32;

// Lanes i of a `lanes`-lane tile for which (i & bit) != 0.
Value laneBitSet(KernelBuilder &b, int bit, int lanes = kScanTile) { return (b.iota(lanes) & bit) != 0; }

// One layer of comparators: lane i meets lane partnerOf[i] (itself where it has none) and keeps
// the smaller key where keepMin holds, the larger elsewhere. Keys are distinct (each carries its
// block id) except the empty key 0, so "take the partner when it is above on a keep-max lane and
// below on a keep-min lane" is exactly partnerAbove != keepMin. `upper` (null across threads)
// marks the higher lane of each pair, both of whose lanes are in one thread (topk_prefill's rows,
// 16 lanes a thread): the pair is compared once, at its lower lane, and the upper lane takes the
// negation (for two equal keys either choice is the same key). The comparison of two i64 keys is
// two instructions of the ALU pipe the network is bound by (ncu, 4 x 32K: 77% busy). Across threads
// (decode's 32-lane tiles) that would be a predicate shuffle more, so each lane compares.
Value compareLayer(KernelBuilder &b, Value keys, const std::vector<int32_t> &partnerOf, Value keepMin,
                   Value upper = Value()) {
  Value partner = b.shuffle(keys, keys, partnerOf);
  Value above = gtU(partner, keys);
  if (upper.id().valid()) {
    std::vector<int32_t> lowerOf;
    for (size_t i = 0; i < partnerOf.size(); ++i)
      lowerOf.push_back(std::min<int32_t>(static_cast<int32_t>(i), partnerOf[i]));
    above = b.shuffle(above, above, lowerOf) ^ upper;
  }
  return b.select(above ^ keepMin, partner, keys);
}

// A bitonic network's stage: lane i meets lane i ^ j.
Value compareExchange(KernelBuilder &b, Value keys, int j, Value keepMin, bool pairInThread) {
  const int lanes = keys.type().lanes;
  std::vector<int32_t> partnerOf;
  for (int i = 0; i < lanes; ++i)
    partnerOf.push_back(i ^ j);
  return compareLayer(b, keys, partnerOf, keepMin, pairInThread ? laneBitSet(b, j, lanes) : Value());
}

// Each group of 16 lanes, each group one thread's, sorted by sortNetwork16 (a quarter fewer
// comparators than bitonicSort's). A layer's lane masks are constants of the lane's slot in its
// group (iota & 15, whose high bits the lowering knows are the thread's), so they fold away.
Value networkSort16(KernelBuilder &b, Value keys, bool descending) {
  const int lanes = keys.type().lanes, W = 16;
  Value slot = b.iota(lanes) & (W - 1);
  for (const auto &layer : sortNetwork16()) {
    std::vector<int32_t> inGroup(W);
    for (int i = 0; i < W; ++i)
      inGroup[i] = i;
    for (auto [lo, hi] : layer) {
      inGroup[lo] = hi;
      inGroup[hi] = lo;
    }
    std::vector<int32_t> partnerOf;
    for (int i = 0; i < lanes; ++i)
      partnerOf.push_back(i - i % W + inGroup[i % W]);
    Value partnerSlot = b.shuffle(slot, slot, partnerOf);
    Value lower = partnerSlot > slot, upper = partnerSlot < slot;
    // The network leaves the smaller key at a pair's lower lane; descending, the larger.
    keys = compareLayer(b, keys, partnerOf, descending ? upper : lower, upper);
  }
  return keys;
}

// `keys` sorted by a bitonic network, descending or ascending: each group of `width` lanes (a
// power of two dividing the tile's lanes) sorted on its own. Groups of 16 in one thread take
// networkSort16 instead.
Value bitonicSort(KernelBuilder &b, Value keys, bool descending, int width = kScanTile, bool pairInThread = false) {
  if (pairInThread && width == 16)
    return networkSort16(b, keys, descending);
  const int lanes = keys.type().lanes;
  for (int k = 2; k <= width; k *= 2)
    for (int j = k / 2; j >= 1; j /= 2) {
      // Ascending, lane i is the lower of its pair when bit j is clear and keeps the smaller key
      // when its block of k lanes ascends (bit k clear; all lanes at k == width): bit j == bit k.
      Value bitJ = laneBitSet(b, j, lanes);
      Value bitK = k == width ? b.splat(b.constInt(0, Elem::I1), lanes) : laneBitSet(b, k, lanes);
      keys = compareExchange(b, keys, j, descending ? bitJ != bitK : bitJ == bitK, pairInThread);
    }
  return keys;
}

// The `width` largest keys of each group of `width` lanes of `top` (sorted descending) and `step`
// (any order), sorted descending: the step sorted ascending, the lane-wise larger of the two is
// the union's `width` largest as a bitonic sequence, and a bitonic merge sorts it.
Value mergeStep(KernelBuilder &b, Value top, Value step, int width = kScanTile, bool pairInThread = false) {
  step = bitonicSort(b, step, /*descending=*/false, width, pairInThread);
  Value merged = b.select(gtU(top, step), top, step);
  for (int j = width / 2; j >= 1; j /= 2) // descending: the lower lane of a pair keeps the larger key
    merged = compareExchange(b, merged, j, laneBitSet(b, j, top.type().lanes), pairInThread);
  return merged;
}

// A stream of candidate keys [0, count): a step's tile (masked past `count`), a bound no key of a
// step exceeds, and the step's keys (a kScanTile tile, key 0 past `count`).
struct KeyStream {
  std::function<Value(Value from, Value left)> loadStep;
  std::function<Value(Value tile, Value from, Value left)> bound;
  std::function<Value(Value tile, Value from, Value left)> keys;
};

// The first 16 lanes of a running top: the answer.
Value firstK(KernelBuilder &b, Value top) {
  std::vector<int32_t> first(K);
  for (int i = 0; i < K; ++i)
    first[i] = i;
  return b.shuffle(top, top, first);
}

// `top` with `step` merged in, unless `bound` (no key of the step exceeds it) cannot pass the 16th.
Value mergeIfAbove(KernelBuilder &b, Value top, Value bound, const std::function<Value()> &step) {
  Value sixteenth = b.extract(top, K - 1);
  return b.ifElse(gtU(bound, sixteenth),
                  [&] { return Values{mergeStep(b, top, step())}; }, [&] { return Values{top}; })[0];
}

// The top 16 keys of a stream, as a descending tile (key 0, below every real key, where there are
// fewer than 16). The running top keeps kScanTile keys sorted (its first 16 are the answer); a step
// whose bound cannot pass the 16th is skipped. The next step's tile is loaded before this one is
// looked at, so one load is always in flight behind the comparisons.
Value topkOf(KernelBuilder &b, const KeyStream &ks, Value count) {
  const int S = kScanTile;
  // Key 0 is below every real key (the ordered bits of -inf are 0x007FFFFF), so it marks empty.
  Value empty = b.splat(b.constInt(0), S);
  Value steps = (count + (S - 1)) / S;
  auto load = [&](Value i) { return Values{ks.loadStep(i * S, count - i * S)}; };
  Values top = b.pipelinedFor(b.constInt(0), steps, b.constInt(1), {empty}, load,
                              [&](Value i, const Values &tile, const Values &s) {
    Value from = i * S, left = count - from;
    return Values{mergeIfAbove(b, s[0], ks.bound(tile[0], from, left),
                               [&] { return ks.keys(tile[0], from, left); })};
  });
  return firstK(b, top[0]);
}

// A bound no key of a key tile exceeds: its largest high half (the ordered score, compared as
// signed after flipping the top bit) with every low bit set. Key 0 lanes never raise it.
Value keyTileBound(KernelBuilder &b, Value keys) {
  Value high = shrU(keys, 32).to(Elem::I32);
  Value best = b.reduceMax(high ^ INT32_MIN) ^ INT32_MIN;
  return best.zext(Elem::I64) << 32 | 0xFFFFFFFF;
}

// Keys each lane keeps in the one pass over a stream (lane i sees keys i, i + 32, ...). The top 16
// are among the 32 x kLaneDepth kept keys unless one lane saw more than kLaneDepth of them: for
// uniformly placed top blocks that is 0.5% of 128-block rows, 2% of 256 and 3.5% of 1024
// (hypergeometric; with 2 kept keys 18-32%). 3 is the fastest of 2, 3 and 4 (bench/RESULTS.md).
constexpr int kLaneDepth = 3;

// The top 16 keys of a stream of `count` keys. One pass keeps each lane's kLaneDepth largest keys
// (in levels, largest first) and the largest key it dropped; the levels are merged into a running
// top, each only when its best key can enter. If some lane dropped a key above the 16th kept, the
// answer may miss it, and the stream is read again through topkOf, every key looked at.
Value onePassTopk(KernelBuilder &b, const KeyStream &ks, Value count) {
  const int S = kScanTile;
  Value empty = b.splat(b.constInt(0), S);
  Value steps = (count + (S - 1)) / S;
  auto load = [&](Value i) { return Values{ks.loadStep(i * S, count - i * S)}; };
  // Loop state: kLaneDepth levels and the dropped maximum; each step's scores loaded a step ahead.
  Values init(kLaneDepth + 1, empty);
  Values kept = b.pipelinedFor(b.constInt(0), steps, b.constInt(1), init, load,
                               [&](Value i, const Values &tile, const Values &s) {
    Value from = i * S;
    Value key = ks.keys(tile[0], from, count - from);
    Values levels;
    for (int d = 0; d <= kLaneDepth; ++d) { // an insertion; the last level keeps the maximum
      Value above = gtU(key, s[d]);
      levels.push_back(b.select(above, key, s[d]));
      if (d < kLaneDepth)
        key = b.select(above, s[d], key);
    }
    return levels;
  });
  Value top = bitonicSort(b, kept[0], /*descending=*/true);
  // A stream of at most kScanTile keys gave each lane one at most: the deeper levels are empty and
  // nothing was dropped, so the sorted first level is the answer. Such rows (up to 4K tokens) skip
  // the levels' bounds and the drop check, 15 shuffles in sequence after the sort.
  return b.ifElse(count > b.constInt(S), [&] {
    Value merged = top;
    for (int d = 1; d < kLaneDepth; ++d)
      merged = mergeIfAbove(b, merged, keyTileBound(b, kept[d]), [&] { return kept[d]; });
    Value lost = gtU(kept[kLaneDepth], b.extract(merged, K - 1));
    Value one = b.constInt(1, Elem::I32), zero = b.constInt(0, Elem::I32);
    return Values{b.ifElse(b.reduceMax(b.select(lost, one, zero)) != 0,
                           [&] { return Values{topkOf(b, ks, count)}; },
                           [&] { return Values{firstK(b, merged)}; })[0]};
  }, [&] { return Values{firstK(b, top)}; })[0];
}

// The top 16 keys of blocks [first, last) of the score row at `base`.
Value topkKeys(KernelBuilder &b, Buffer scores, Value base, Value first, Value last) {
  const int S = kScanTile;
  Value lanes = b.iota(S);
  Value negInf = b.splat(b.constF32(-std::numeric_limits<double>::infinity()), S);
  KeyStream ks;
  ks.loadStep = [&](Value from, Value left) { return b.loadTile(scores, base + first + from, S, left); };
  ks.bound = [&](Value tile, Value from, Value left) {
    Value best = b.reduceMax(b.select(lanes < left, tile, negInf)); // NaN dropped
    // No key of this step exceeds (best's ordered bits, the step's last block id).
    return b.packScoreKey(best, first + from + (S - 1));
  };
  ks.keys = [&](Value tile, Value from, Value left) {
    Value keys = b.packScoreKey(tile, lanes + (first + from));
    return b.select(lanes < left, keys, b.constInt(0));
  };
  return onePassTopk(b, ks, last - first);
}

// Block ids of a key tile, -1 for empty slots.
Value blockIds(KernelBuilder &b, Value keys) {
  Value ids = (keys & 0xFFFFFFFF).to(Elem::I32);
  return b.select(keys != 0, ids, b.constInt(-1, Elem::I32));
}

// Scalar arguments shared by the two top-k kernels: a long row is cut into at most `segments`
// pieces (the grid's, sized from shapes: the width a plan or a graph was made for), in fact into
// usedSegments(nblk) of ceil(nblk / used) blocks rounded up to the 32-score step -- the row's own
// length, read on the device, so a grid sized for capacity splits every row by its length and a
// short row costs what it would on a grid sized for it (programs past a row's used segments leave
// at once). Each segment program writes its 16 keys into `partial`; with one used segment the
// program writes the row's block ids itself. A row's partial keys sit in its region of segments x
// 16 keys, rank-major over the used segments -- key s of segment g at row * segments * 16 + s *
// used + g -- so that the merge's first steps hold every segment's best keys (mergedKeys).
// `arrivals` counts a row's segment programs that have written theirs: 0 between steps (the
// runtime zeroes it once; the row's last program puts it back), so the step needs no merge launch.
struct Segments {
  Buffer partial, arrivals;
  Value segments;
};

// ceil(n / d) for n >= 0 and d >= 1, with no division where d is 1: a row's used segments are one
// unless it is long, and a GPU's 64-bit division is about 25 dependent instructions.
Value ceilDivUnlessOne(KernelBuilder &b, Value n, Value d) {
  return b.ifElse(d == 1, [&] { return Values{n}; }, [&] { return Values{(n + (d - 1)) / d}; })[0];
}

// Segments a row of nblk blocks uses: one per kMinSegmentBlocks (topkSplit's rule, on the row's
// own length), at least 1 and at most the grid's.
Value usedSegments(KernelBuilder &b, Value nblk, Value segments) {
  return b.minS(b.maxS(nblk / kMinSegmentBlocks, b.constInt(1)), segments);
}

// The row's segments' top 16s merged into its top 16: the segments x 16 keys are one stream through
// the running top, a step merged only when its bound (its largest key: keyTileBound) can pass the
// 16th. Rank-major, the first steps hold every segment's best keys, so the later ones are mostly
// skipped (segment-major, every step would hold some segment's best and enter); the one-pass form (topkSegment's) would emit its merge networks a second time, which
// doubled the kernel's compile time for AVX2 CPUs (bench/README.md).
Value mergedKeys(KernelBuilder &b, Buffer partial, Value base, Value used) {
  const int S = kScanTile;
  KeyStream ks;
  ks.loadStep = [&](Value from, Value left) { return b.loadTile(partial, base + from, S, left); };
  ks.bound = [&](Value tile, Value, Value) { return keyTileBound(b, tile); }; // masked lanes: key 0
  ks.keys = [&](Value tile, Value, Value) { return tile; }; // masked lanes read key 0
  return topkOf(b, ks, used * K);
}

// Arrival counts hold a row's arrived segment programs in the low bits and, from this bit up,
// those that found their request flagged (a row has at most 8192 / kMinSegmentBlocks = 64).
constexpr int kFlaggedArrivalShift = 16;

// The program's part of row headRow (nblk blocks): its segment's top 16, written as ids, or as
// keys that the row's last segment program to arrive merges into the ids. `flagged(used)` (an i1
// scalar, built inside the program's segment) says whether this program's share of its request's
// checks failed; the row gets no blocks if any of its used segments' did.
void topkSegment(KernelBuilder &b, Buffer scores, Value base, Value nblk, Buffer out, const Segments &sg,
                 Value headRow, Value segment, const std::function<Value(Value used)> &flagged,
                 bool awaitGrids = true) {
  Value used = usedSegments(b, nblk, sg.segments);
  b.ifThen(segment < used, [&] {
    // The scores, flags and arrivals are this step's: the work above (metadata reads, a row's
    // length) overlaps the score kernel's end where the target starts this kernel early. A program
    // of several rows awaits once, before its first (awaitGrids false: grid.await is once a program).
    if (awaitGrids)
      b.awaitEarlierGrids();
    Value segmentBlocks = (ceilDivUnlessOne(b, nblk, used) + (kScanTile - 1)) / kScanTile * kScanTile;
    Value first = segment * segmentBlocks;
    Value keys = topkKeys(b, scores, base, b.minS(first, nblk), b.minS(first + segmentBlocks, nblk));
    Value bad = flagged(used);
    Value none = b.splat(b.constInt(0), K); // no blocks: every id -1
    b.ifThen(used == b.constInt(1), [&] { b.storeTile(out, headRow * K, blockIds(b, b.select(b.splat(bad, K), none, keys))); });
    b.ifThen(used > b.constInt(1), [&] {
      Value region = headRow * sg.segments * K;
      Value at = region + b.iota(K) * used + segment;
      b.storeScatter(sg.partial, at, keys, b.splat(b.constInt(1, Elem::I1), K));
      Value count = b.select(bad, b.constInt((1 << kFlaggedArrivalShift) + 1, Elem::I32), b.constInt(1, Elem::I32));
      Value arrived = b.atomicAdd(sg.arrivals, headRow, count).to(Elem::I64);
      b.ifThen((arrived & ((1 << kFlaggedArrivalShift) - 1)) == used - 1, [&] {
        b.store(sg.arrivals, headRow, b.constInt(0, Elem::I32));
        Value anyBad = b.select(bad, bad, shrU(arrived, kFlaggedArrivalShift) != 0);
        Value merged = mergedKeys(b, sg.partial, region, used);
        b.storeTile(out, headRow * K, blockIds(b, b.select(b.splat(anyBad, K), none, merged)));
      });
    });
  });
}

} // namespace

// The rows' top-16 ids, R rows a trip as one tile of R x 16 lanes: row r in lanes [16r, 16r + 16),
// so that on a GPU of R threads each holds one row and every exchange of the sorting networks
// (lane i ^ j, j < 16) stays in its registers -- no shuffles, no barriers. Per-row values are
// R-lane tiles (a thread's one lane), spread to the row's 16 lanes by a shuffle that stays in the
// thread. A row's running top 16 starts as its first 16 keys sorted; each further 16 scores are
// merged in (mergeStep), the next 16 loaded while these are merged. A trip's lengths are taken a
// trip ahead (firstLengths: the first trip's, which a caller may load before it waits).
void topkTrips(KernelBuilder &b, Buffer scores, Buffer out, int R, Value first, Value last, Value firstLengths,
               const TripRows &tr) {
  const int L = R * K;
  Value rows = b.iota(R), slot = b.iota(L) & (K - 1);
  std::vector<int32_t> spread;
  for (int l = 0; l < L; ++l)
    spread.push_back(l / K);
  auto perLane = [&](Value perRow) { return b.shuffle(perRow, perRow, spread); };
  b.forLoop(first, last, b.constInt(R), Values{firstLengths}, [&](Value trip, const Values &it) {
    Value i = trip + rows, at = b.minS(i, last - 1), headRow = tr.headRow(at);
    Value rowBlocks = it[0].to(Elem::I64), nblk = perLane(rowBlocks), rowStart = headRow * tr.width;
    Value ahead = tr.lengths(trip + R);
    // Scores of blocks [from, from + 16) of each row (0 past its nblk: nothing read there), a
    // thread's row as 4 wide loads where it is whole (load.rows): as 16 gathered lanes, each
    // warp load had touched 32 rows' lines. Rows start at multiples of 4 floats (LaunchPlan
    // checks the width; SPEC's are multiples of 64) and `from` at multiples of 16: 16-byte aligned.
    auto load = [&](Value from) { return b.loadRows(scores, rowStart + from, rowBlocks - from, K, 16); };
    auto keys = [&](Value tile, Value from) {
      Value blk = slot + from;
      return b.select(blk < nblk, b.packScoreKey(tile, blk), b.constInt(0));
    };
    Value top = bitonicSort(b, keys(load(b.constInt(0)), b.constInt(0)), /*descending=*/true, K, /*pairInThread=*/true);
    Value longest = tr.longest.id().valid() ? tr.longest : b.reduceMax(it[0]).to(Elem::I64);
    Values merged = b.pipelinedFor(b.constInt(K), longest, b.constInt(K), {top},
                                   [&](Value from) { return Values{load(from)}; },
                                   [&](Value from, const Values &tile, const Values &s) {
      return Values{mergeStep(b, s[0], keys(tile[0], from), K, /*pairInThread=*/true)};
    });
    // The trip's ids: where its R rows are consecutive rows of one head (all but a launch's last
    // trip and those across a head's end), one tile of R x 16 consecutive ids, each thread's 64
    // bytes as 4 wide stores; elsewhere each row's 16 lanes scattered where the row is real.
    Value ids = blockIds(b, merged[0]);
    Value firstRow = tr.headRow(trip);
    Value together = (trip + R <= last) & (tr.headRow(trip + (R - 1)) == firstRow + (R - 1));
    b.ifElse(together, [&] {
      b.storeTile(out, firstRow * K, ids, 16);
      return Values{};
    }, [&] {
      b.storeScatter(out, perLane(headRow * K) + slot, ids, perLane(i < last));
      return Values{};
    });
    return Values{ahead};
  });
}

StatusOr<Kernel> buildTopkDecode(const KernelConfig &c) {
  KernelBuilder b("topk_decode");
  Buffer scores = b.buffer("scores", Elem::F32, Access::Read);
  Buffer seqLens = b.buffer("seq_lens", Elem::I32, Access::Read);
  // score_decode's per-program flags: flag_programs a request, request-major, flag_chunks a row
  // tile, chunk fastest (a bad page id: kernels_src/Nvfp4Score.cpp); flag_programs 0: none to
  // read (host-validated steps).
  Buffer programFlags = b.buffer("program_flags", Elem::I32, Access::Read);
  Buffer out = b.buffer("topk", Elem::I32, Access::Write);
  Segments sg;
  sg.partial = b.buffer("partial", Elem::I64, Access::ReadWrite);
  sg.arrivals = b.buffer("arrivals", Elem::I32, Access::ReadWrite);
  Value numRows = b.scalarArg("num_rows", Elem::I64);
  Value width = b.scalarArg("width", Elem::I64);
  Divisor decodeRows = b.divisorArg("decode_rows");
  sg.segments = b.scalarArg("segments", Elem::I64);
  Value maxSeqLen = b.scalarArg("max_seq_len", Elem::I64);
  Value flagPrograms = b.scalarArg("flag_programs", Elem::I64);
  Divisor flagChunks = b.divisorArg("flag_chunks");
  Value runUnits = b.scalarArg("run_units", Elem::I64); // score_decode's decodeRun
  Divisor activePrograms = b.divisorArg("active_programs");
  Value maxRun = b.scalarArg("max_run", Elem::I64);
  // Decode CP (SPEC §6): the rows' blocks were scored by flag_ranks ranks, rank k's blocks k,
  // k + flag_ranks, ... on grids like one rank's, each rank's flags flag_rank_stride elements after
  // the one before (1 and 0 when this device scored them all).
  Divisor flagRanks = b.divisorArg("flag_ranks");
  Value flagRankStride = b.scalarArg("flag_rank_stride", Elem::I64);
  // Programs are (segment, head row), head rows fastest: a row uses the segments its own length
  // fills (usedSegments), so a grid sized for capacity has its working programs first and the
  // programs that leave at once after them. Interleaved (segments fastest), those had been
  // dispatched between the working ones, which waited for them: 32 x 8K requests, 4 heads x 8 rows,
  // 1024 rows x 4 segments on a 1M grid, top-k 5.3 -> 8.8 us (bench/RESULTS.md, 2026-12-05).
  Divisor gridRows = b.divisorArg("grid_rows"); // heads x decode_rows
  Value pid = b.programId();
  const QuotientRemainder bySegment = divideWithRemainder(pid, gridRows);
  Value segment = bySegment.quotient, rowId = bySegment.remainder;
  const QuotientRemainder byHead = divideWithRemainder(rowId, decodeRows);
  Value head = byHead.quotient, row = byHead.remainder;
  Value req = row / c.queryRows;
  // A request whose seq_len is outside [0, max_seq_len] or one of whose score programs met a bad
  // page id gets no blocks (score_decode reported it). Only programs that had blocks can have met
  // one: score_decode splits a request's blocks over its flag_chunks programs a row tile in runs of
  // decodeRun, so the first ceil(blocks / run) of each tile -- the request's own
  // length, not the grid's, which a graph sizes for capacity. Each of a row's used segments reads
  // its share of those flags (a long request's thousands, one 32-flag step after another, had cost
  // one program tens of microseconds) and the row's last to arrive learns of the others' through
  // the arrival count (topkSegment).
  const int S = kScanTile;
  Value given = b.load(seqLens, req).to(Elem::I64);
  Value badLen = ltU(maxSeqLen, given);
  Value seqLen = b.select(badLen, b.constInt(0), given);
  Value causal = b.maxS(seqLen - c.queryRows + row % c.queryRows + 1, b.constInt(0));
  Value headRow = head * numRows + row;
  auto flagged = [&](Value used) {
    // Built after the segment's score loads were issued: a GPU program issues in order, and these
    // divisions had stood between its seq_len and its first scores.
    Value blocks = spec::blocksFor(seqLen);
    Value one = b.constInt(1), none = b.constInt(0, Elem::I32);
    Value anyFlag = b.forLoop(b.constInt(0), flagRanks.value, one, Values{none}, [&](Value rank, const Values &rankAcc) {
      // rank's blocks of the request (score_decode's slotsBefore), run and programs that had some
      Value slots = divide(b.maxS(blocks - rank + (flagRanks.value - 1), b.constInt(0)), flagRanks);
      Value run = decodeRun(b, slots, flagChunks, runUnits, activePrograms, maxRun);
      Value active = ceilDivUnlessOne(b, slots, run);
      // flags [lo, hi) of each row tile's active ones: this segment's share, 32 a step
      Value share = ceilDivUnlessOne(b, active, used);
      Value lo = b.minS(segment * share, active), hi = b.minS(lo + share, active);
      Value flagBase = rank * flagRankStride + req * flagPrograms + lo;
      return b.forLoop(b.constInt(0), divide(flagPrograms, flagChunks), one, rankAcc,
                       [&](Value tile, const Values &tileAcc) {
        Value tileBase = flagBase + tile * flagChunks.value;
        return b.forLoop(lo, hi, b.constInt(S), tileAcc, [&](Value from, const Values &acc) {
          Value flags = b.loadTile(programFlags, tileBase + (from - lo), S, hi - from);
          return Values{b.maxS(acc[0], b.reduceMax(flags))};
        });
      });
    })[0];
    return b.select(badLen, b.constInt(1, Elem::I32), anyFlag) != 0;
  };
  topkSegment(b, scores, headRow * width, spec::blocksFor(causal), out, sg, headRow, segment, flagged);
  return b.finish();
}

StatusOr<Kernel> buildTopkPrefill(const KernelConfig &c) {
  KernelBuilder b("topk_prefill");
  Buffer scores = b.buffer("scores", Elem::F32, Access::Read);
  Buffer rowBlocks = b.buffer("row_nblk", Elem::I32, Access::Read);
  Buffer out = b.buffer("topk", Elem::I32, Access::Write);
  Segments sg;
  sg.partial = b.buffer("partial", Elem::I64, Access::ReadWrite);
  sg.arrivals = b.buffer("arrivals", Elem::I32, Access::ReadWrite);
  Value numRows = b.scalarArg("num_rows", Elem::I64);
  Value width = b.scalarArg("width", Elem::I64);
  Value rowBegin = b.scalarArg("row_begin", Elem::I64);
  Divisor prefillRows = b.divisorArg("prefill_rows");
  // Head rows a program takes (1 where rows are cut into segments; LaunchPlan's topkPrefillRows
  // and topkPrefillLongRows).
  Value rowsPerProgram = b.scalarArg("rows_per_program", Elem::I64);
  Value headRows = b.scalarArg("head_rows", Elem::I64); // heads x prefill_rows
  sg.segments = b.scalarArg("segments", Elem::I64);
  // Programs take head rows last first: a request's later rows are longer, so the grid ends on
  // the first rows (the shortest of a fresh prompt) rather than on the longest, which had held a
  // few SMs while the others idled (the score grid's order, LaunchPlan's fillPrefillTiles).
  Value pid = b.programId();
  Value programs = (headRows + (rowsPerProgram - 1)) / rowsPerProgram;
  Value segment = pid % sg.segments, first = (programs - 1 - pid / sg.segments) * rowsPerProgram;
  Value last = b.minS(first + rowsPerProgram, headRows);
  // Head row i of the launch (head-major): its row of the batch and its row of the score buffer.
  auto rowOf = [&](Value i) { return rowBegin + divideWithRemainder(i, prefillRows).remainder; };
  auto headRowOf = [&](Value i) {
    const QuotientRemainder hr = divideWithRemainder(i, prefillRows);
    return hr.quotient * numRows + rowBegin + hr.remainder;
  };
  Value rows = b.iota(c.queryRows);
  auto lengths = [&](Value trip) { // i32, 0 past `last`
    Value i = trip + rows;
    return b.loadGather(rowBlocks, rowOf(b.minS(i, last - 1)), i < last);
  };
  Value firstLengths = lengths(first);
  b.awaitEarlierGrids(); // the scores are this step's (once a program: topkSegment's comment)
  b.ifElse(sg.segments == 1, [&] {
    TripRows rows;
    rows.lengths = lengths;
    rows.headRow = headRowOf;
    rows.width = width;
    topkTrips(b, scores, out, c.queryRows, first, last, firstLengths, rows);
    return Values{};
  }, [&] {
    // A row cut into segments (one row a program): its segment streamed by topkSegment.
    Value headRow = headRowOf(first);
    topkSegment(b, scores, headRow * width, b.extract(firstLengths, 0).to(Elem::I64), out, sg, headRow, segment,
                [&](Value) { return b.constInt(0, Elem::I1); }, // validated on the host
                /*awaitGrids=*/false);
    return Values{};
  });
  return b.finish();
}

} // namespace m3idx::kernels
