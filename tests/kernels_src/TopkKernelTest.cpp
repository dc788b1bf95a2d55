// The top-k kernels compiled for the host on crafted score rows that stress their shortcuts: each
// lane keeps only its 3 largest keys (rows where one lane sees 3, 4 or all of the top 16 must
// still come out whole), and a 32-score step is skipped when its best key cannot beat the 16th
// (rows where every step enters, none does), ties (a later block with an equal score ranks
// higher), NaN, -inf and signed zeros, and rows shorter than a step or than 16, must all give
// SPEC §5's order -- whole, and cut into segments whose top 16s the row's last segment program to
// finish merges, whichever segment that is, leaving the arrival counts at zero; a row uses only
// the segments its own length fills, whatever the grid was sized for.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <random>

#include <gtest/gtest.h>

#include "core/Spec.h"
#include "core/TopkKey.h"
#include "dsl/Divisor.h"
#include "kernels_src/KernelCatalog.h"
#include "kernels_src/LaunchPlan.h"
#include "tuning/TargetTuning.h"
#include "lowering/host/HostCompiler.h"
#include "runtime/KernelArgs.h"

using namespace m3idx;

namespace {

std::vector<int32_t> expectedTopk(const std::vector<float> &row) {
  std::vector<uint64_t> keys;
  for (size_t b = 0; b < row.size(); ++b)
    keys.push_back(packScoreKey(row[b], static_cast<int32_t>(b)));
  std::sort(keys.rbegin(), keys.rend());
  std::vector<int32_t> ids(spec::kTopkBlocks, -1);
  for (size_t s = 0; s < ids.size() && s < keys.size(); ++s)
    ids[s] = static_cast<int32_t>(keys[s] & 0xFFFFFFFF);
  return ids;
}

// A top-k kernel of the host's table, compiled for this machine (null, with a failure, if not).
std::unique_ptr<lowering::HostKernel> compileTopk(kernels::KernelKind kind, int heads, int rows) {
  auto k = kernels::buildKernel(kind, tuning::hostTuning().configFor(kind, heads, rows));
  EXPECT_TRUE(k.ok()) << k.status().message();
  if (!k.ok())
    return nullptr;
  auto compiled = lowering::compileHostKernel(*k);
  EXPECT_TRUE(compiled.ok()) << compiled.status().message();
  return compiled.ok() ? std::move(*compiled) : nullptr;
}

} // namespace

TEST(TopkKernel, CraftedRowsMatchSpecOrder) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uni(-100, 100);
  std::vector<std::vector<float>> rows;
  auto make = [&](int n, auto fn) {
    std::vector<float> r(n);
    for (int i = 0; i < n; ++i)
      r[i] = fn(i);
    rows.push_back(r);
  };
  make(1000, [](int i) { return static_cast<float>(i); });          // every step enters
  make(1000, [](int i) { return static_cast<float>(1000 - i); });   // none after the first
  make(700, [](int) { return 3.0f; });                              // ties: the last 16 blocks
  make(300, [&](int i) { return i % 3 ? nan : -inf; });             // NaN counts as -inf
  make(300, [&](int) { return nan; });
  make(200, [](int i) { return i % 2 ? -0.0f : 0.0f; });            // -0 as +0: ties again
  // Denormals keep their order (none is 0), next to signed zeros and the smallest normals.
  make(40, [](int i) {
    const float tiny = std::numeric_limits<float>::denorm_min();
    return i % 4 == 0 ? tiny * (i + 1) : i % 4 == 1 ? -tiny * i : i % 4 == 2 ? (i % 8 ? -0.0f : 0.0f)
                                                                             : std::numeric_limits<float>::min();
  });
  make(5, [](int i) { return static_cast<float>(i * 7 % 5); });     // fewer than 16
  make(33, [&](int) { return uni(rng); });                          // one score past a step
  // At most one step (a lane's one key, sorted alone): its boundary, ties, NaN and sentinels.
  make(32, [&](int) { return uni(rng); });
  make(32, [](int) { return 2.0f; });
  make(31, [&](int i) { return i % 4 ? uni(rng) : std::nanf(""); });
  make(17, [](int i) { return i == 16 ? 1e30f : (i == 0 ? 1e29f : -0.0f); });
  make(1, [](int) { return -std::numeric_limits<float>::infinity(); });
  make(0, [](int) { return 0.0f; });
  make(8192, [&](int) { return uni(rng); });
  make(640, [](int i) { return i == 639 ? 1e30f : (i == 0 ? 1e29f : 1.0f); }); // sentinels
  // Lane 5 of the one pass (blocks 5, 37, 69, ...) sees 3, 4 or all of the top 16.
  for (int inLane5 : {3, 4, 16})
    make(1000, [&](int i) { return i % 32 == 5 && i / 32 < inLane5 ? 500.0f + i : uni(rng); });
  make(1000, [](int i) { return i % 32 == 5 ? 1000.0f - i : 0.0f; }); // lane 5 leads, ascending ids
  // Rows of at most 16 blocks, which programs of several rows sort two a tile (with 3 rows a
  // program: rows 21 and 22, 24 and 25 share a tile; 20 and 23 are sorted alone).
  make(16, [&](int) { return uni(rng); });
  make(12, [&](int i) { return i % 3 == 0 ? nan : (i % 3 == 1 ? -inf : uni(rng)); });
  make(16, [](int) { return 2.0f; });
  make(3, [](int i) { return i == 1 ? -0.0f : 0.0f; });
  make(16, [](int i) { return i == 15 ? 1e30f : (i == 0 ? 1e29f : -1.0f); });
  make(15, [&](int) { return uni(rng); });

  auto topk = compileTopk(kernels::KernelKind::TopkPrefill, 1, 4);
  ASSERT_TRUE(topk);

  const int64_t T = static_cast<int64_t>(rows.size()), W = 8192;
  std::vector<float> scores(T * W, nan); // never read past a row's nblk
  std::vector<int32_t> nblk(T);
  for (int64_t r = 0; r < T; ++r) {
    std::copy(rows[r].begin(), rows[r].end(), scores.begin() + r * W);
    nblk[r] = static_cast<int32_t>(rows[r].size());
  }
  // Whole rows, and rows cut into segments (each row's own length over the count: runs of 32 for
  // 256 segments, empty trailing segments where a row is short), the programs run first to last
  // and last to first: the merge is the last arriving segment's, whichever it is.
  // Unsplit rows also run several a program (3: programs whose rows are long and short, and a
  // last program of fewer rows; 8: two whole trips of 4 consecutive rows, whose ids are stored
  // as one tile, and a last program's partial trip, scattered).
  struct Grid {
    int64_t segments, rowsPerProgram;
  };
  for (Grid g : {Grid{1, 1}, Grid{1, 3}, Grid{1, 8}, Grid{3, 1}, Grid{37, 1}, Grid{256, 1}})
    for (bool reversed : {false, true}) {
      const int64_t segments = g.segments;
      std::vector<int32_t> out(T * spec::kTopkBlocks, 12345), arrivals(T, 0);
      std::vector<int64_t> partial(segments > 1 ? T * segments * spec::kTopkBlocks : 1, 777);
      runtime::KernelArgs args;
      args.buffer(scores.data(), T * W).buffer(nblk.data(), T).buffer(out.data(), T * spec::kTopkBlocks)
          .buffer(partial.data(), static_cast<int64_t>(partial.size())).buffer(arrivals.data(), T);
      // num_rows, width, row_begin, prefill_rows (a divisor: its word after it), rows_per_program,
      // head_rows, segments
      args.scalar(T).scalar(W).scalar(0).scalar(T).scalar(*dsl::divisorWord(T)).scalar(g.rowsPerProgram).scalar(T)
          .scalar(segments);
      const int64_t programs = (T + g.rowsPerProgram - 1) / g.rowsPerProgram * segments;
      for (int64_t i = 0; i < programs; ++i) {
        const int64_t p = reversed ? programs - 1 - i : i;
        args.call(*topk, p, p + 1);
      }
      for (int64_t r = 0; r < T; ++r) {
        std::vector<int32_t> got(out.begin() + r * spec::kTopkBlocks,
                                 out.begin() + (r + 1) * spec::kTopkBlocks);
        EXPECT_EQ(got, expectedTopk(rows[r])) << "row " << r << ", " << segments << " segments, "
                                              << g.rowsPerProgram << " rows a program"
                                              << (reversed ? ", last to first" : "");
      }
      EXPECT_EQ(arrivals, std::vector<int32_t>(T, 0)) << segments << " segments";
      // A row uses one segment per 128 of its blocks, at most the grid's: the programs past those
      // leave its partial keys alone, and a row under 256 blocks writes its ids without any.
      for (int64_t r = 0; r < T && segments > 1; ++r) {
        const int64_t used = std::clamp<int64_t>(nblk[r] / kernels::kMinSegmentBlocks, 1, segments);
        const int64_t region = r * segments * spec::kTopkBlocks;
        const auto untouched = std::count(partial.begin() + region + (used > 1 ? used * spec::kTopkBlocks : 0),
                                          partial.begin() + region + segments * spec::kTopkBlocks, 777);
        EXPECT_EQ(untouched, (segments - (used > 1 ? used : 0)) * spec::kTopkBlocks)
            << "row " << r << " (" << nblk[r] << " blocks), " << segments << " segments";
      }
    }
}

// topk_decode on a grid sized for capacity (1M tokens: 4 segments a row) with requests short
// enough that each row uses one segment: the first grid_rows programs (heads x decode rows) are
// the working ones, so running only those answers every row; the rest leave without writing.
// Before segments became the slowest grid dimension, the first grid_rows programs were the first
// rows' segments and most rows got nothing.
TEST(TopkKernel, DecodeGridPutsEachRowsFirstSegmentFirst) {
  const int64_t Q = 4, R = 3, H = 2, rows = R * Q, T = rows, W = 8192, segments = 4, gridRows = H * rows;
  const int64_t programs = gridRows * segments;
  auto topk = compileTopk(kernels::KernelKind::TopkDecode, H, Q);
  ASSERT_TRUE(topk);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-100, 100);
  const std::vector<int32_t> seqLens = {1000, 130, 4000}; // 8, 2 and 32 blocks: one segment each
  std::vector<float> scores(H * T * W);
  for (float &s : scores)
    s = uni(rng);
  auto signature = kernels::signatureOf(kernels::KernelKind::TopkDecode,
                                       tuning::hostTuning().configFor(kernels::KernelKind::TopkDecode, H, Q));
  ASSERT_TRUE(signature.ok()) << signature.status().message();
  std::vector<int32_t> firstOnly, whole;
  auto run = [&](int64_t first, int64_t last, std::vector<int32_t> &out) {
    out.assign(H * T * spec::kTopkBlocks, 12345);
    std::vector<int32_t> arrivals(H * T, 0), flags(1, 0);
    std::vector<int64_t> partial(H * T * segments * spec::kTopkBlocks, 777);
    runtime::KernelArgs args;
    args.buffer(scores.data(), H * T * W).buffer(const_cast<int32_t *>(seqLens.data()), R)
        .buffer(flags.data(), 1).buffer(out.data(), H * T * spec::kTopkBlocks)
        .buffer(partial.data(), static_cast<int64_t>(partial.size())).buffer(arrivals.data(), H * T);
    const std::map<std::string, int64_t> named = {
        {"num_rows", T},       {"width", W},         {"decode_rows", rows}, {"segments", segments},
        {"max_seq_len", 1 << 20}, {"flag_programs", 0}, {"flag_chunks", 1},   {"run_units", 1},
        {"active_programs", 1}, {"max_run", 1},      {"grid_rows", gridRows}, {"flag_ranks", 1},
        {"flag_rank_stride", 0}};
    for (const std::string &name : signature->scalars) { // a divisor's word as bindLaunch fills it
      std::optional<std::string> divisor = dsl::divisorOfWordName(name);
      ASSERT_TRUE(named.count(divisor.value_or(name))) << name;
      args.scalar(divisor ? *dsl::divisorWord(named.at(*divisor)) : named.at(name));
    }
    for (int64_t p = first; p < last; ++p)
      args.call(*topk, p, p + 1);
  };
  run(0, gridRows, firstOnly);
  run(0, programs, whole);
  EXPECT_EQ(firstOnly, whole);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t causal = seqLens[r / Q] - (Q - 1) + r % Q, nblk = (causal + 127) / 128;
      const std::vector<float> row(scores.begin() + (h * T + r) * W, scores.begin() + (h * T + r) * W + nblk);
      const std::vector<int32_t> got(firstOnly.begin() + (h * T + r) * spec::kTopkBlocks,
                                     firstOnly.begin() + (h * T + r + 1) * spec::kTopkBlocks);
      EXPECT_EQ(got, expectedTopk(row)) << "head " << h << ", row " << r;
    }
}
