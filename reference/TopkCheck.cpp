#include "reference/TopkCheck.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/Nvfp4.h"
#include "core/Nvfp4Writer.h"
#include "core/Spec.h"

namespace m3idx::reference {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kMaxProblems = 10;

// Any summation order of n fp32 terms errs by at most (n-1) u sum|terms| (u = 2^-24) to first
// order; 128 u leaves room for the second-order term.
constexpr double kSumBoundFactor = 128.0 * 0x1.0p-24;

void note(CheckReport &r, std::string what) {
  if (r.problems.size() < kMaxProblems)
    r.problems.push_back(std::move(what));
}

} // namespace

ExactScores exactScores(const BatchView &b, const RowPlan &plan) {
  ExactScores ex;
  ex.numHeads = b.params.numHeads;
  ex.numRows = b.numRows;
  ex.width = plan.scoreWidth;
  const size_t n = static_cast<size_t>(ex.numHeads) * ex.numRows * ex.width;
  ex.score.assign(n, std::nan(""));
  ex.bound.assign(n, 0.0);
  const int H = ex.numHeads;
  std::vector<float> key(spec::kIndexHeadDim);
  std::vector<double> keys;
  for (int64_t i = 0; i < b.numRequests; ++i) {
    const int64_t L = b.seqLens[i];
    for (int64_t blk = 0; blk < spec::blocksFor(L); ++blk) {
      const int64_t t0 = blk * spec::kSparseBlockSize;
      const int count = static_cast<int>(std::min<int64_t>(spec::kSparseBlockSize, L - t0));
      const uint8_t *page = b.page(b.pageOf(i, blk));
      keys.assign(static_cast<size_t>(count) * spec::kIndexHeadDim, 0.0);
      for (int t = 0; t < count; ++t) {
        nvfp4::dequantizeToken(std::span<const uint8_t>(page, spec::kPageBytes), t, key);
        std::copy(key.begin(), key.end(), keys.begin() + t * spec::kIndexHeadDim);
      }
      for (int64_t row = b.queryStartLoc[i]; row < b.queryStartLoc[i + 1]; ++row) {
        const RowInfo &info = plan.rows[row];
        if (blk >= info.nblk)
          continue;
        const int visible = static_cast<int>(std::min<int64_t>(count, info.causalLen - t0));
        for (int h = 0; h < H; ++h) {
          const uint8_t *q = b.q + (row * H + h) * spec::kIndexHeadDim;
          double best = -kInf, bestBound = 0.0;
          for (int t = 0; t < visible; ++t) {
            double dot = 0.0, absSum = 0.0;
            for (int d = 0; d < spec::kIndexHeadDim; ++d) {
              double p = nvfp4::e4m3ToFloat(q[d]) * keys[t * spec::kIndexHeadDim + d];
              dot += p;
              absSum += std::fabs(p);
            }
            if (std::isnan(dot))
              continue;
            bestBound = std::max(bestBound, absSum * kSumBoundFactor);
            best = std::max(best, dot);
          }
          if (blk >= info.nblk - b.params.localBlocks) {
            best = spec::kLocalSentinel;
            bestBound = 0;
          } else if (blk < b.params.initBlocks) {
            best = spec::kInitSentinel;
            bestBound = 0;
          }
          const size_t at = (h * b.numRows + row) * ex.width + blk;
          ex.score[at] = best;
          ex.bound[at] = bestBound;
        }
      }
    }
  }
  return ex;
}

CheckReport checkTopk(const BatchView &b, std::span<const int32_t> topk) {
  const RowPlan plan = planRows(b);
  const ExactScores ex = exactScores(b, plan);
  CheckReport rep;
  const int H = b.params.numHeads;
  const int K = spec::kTopkBlocks;
  for (int h = 0; h < H; ++h) {
    for (int64_t row = 0; row < b.numRows; ++row) {
      ++rep.rowsChecked;
      const int32_t nblk = plan.rows[row].nblk;
      const int n = std::min(K, nblk);
      const int32_t *got = &topk[(h * b.numRows + row) * K];
      const double *score = &ex.score[(h * b.numRows + row) * ex.width];
      const double *bound = &ex.bound[(h * b.numRows + row) * ex.width];
      // Expected order: exact score descending, the higher block first on equal scores.
      std::vector<int32_t> want(nblk);
      for (int32_t i = 0; i < nblk; ++i)
        want[i] = i;
      auto scoreOf = [&](int32_t blk) {
        return score[blk] == 0.0 ? 0.0 : score[blk]; // -0 as +0
      };
      std::sort(want.begin(), want.end(), [&](int32_t x, int32_t y) {
        return scoreOf(x) != scoreOf(y) ? scoreOf(x) > scoreOf(y) : x > y;
      });
      std::vector<bool> seen(nblk, false);
      bool rowBad = false;
      for (int s = 0; s < K && !rowBad; ++s) {
        const int32_t g = got[s];
        if (s >= n) {
          if (g != -1) {
            rowBad = true;
            note(rep, fmt::format("head {} row {} slot {}: expected -1 (row sees {} blocks), got {}",
                                  h, row, s, nblk, g));
          }
          continue;
        }
        if (g < 0 || g >= nblk || seen[g]) {
          rowBad = true;
          note(rep, fmt::format("head {} row {} slot {}: expected a new block id in [0, {}), got {}",
                                h, row, s, nblk, g));
          continue;
        }
        seen[g] = true;
        const int32_t w = want[s];
        if (g == w)
          continue;
        const bool tie = scoreOf(g) == scoreOf(w) ||
                         std::fabs(scoreOf(g) - scoreOf(w)) <= bound[g] + bound[w];
        if (tie) {
          ++rep.nearTieSwaps;
        } else {
          rowBad = true;
          note(rep, fmt::format("head {} row {} slot {}: expected block {} (score {}), got block "
                                "{} (score {})",
                                h, row, s, w, scoreOf(w), g, scoreOf(g)));
        }
      }
      rep.mismatches += rowBad;
    }
  }
  return rep;
}

void checkScores(const BatchView &b, std::span<const float> scores, int64_t width,
                 CheckReport &rep) {
  const RowPlan plan = planRows(b);
  const ExactScores ex = exactScores(b, plan);
  for (int h = 0; h < b.params.numHeads; ++h)
    for (int64_t row = 0; row < b.numRows; ++row)
      for (int32_t blk = 0; blk < plan.rows[row].nblk; ++blk) {
        const double want = ex.score[(h * b.numRows + row) * ex.width + blk];
        const double bnd = ex.bound[(h * b.numRows + row) * ex.width + blk];
        const double got = scores[(h * b.numRows + row) * width + blk];
        const double err = (got == want) ? 0.0 : std::fabs(got - want);
        // fp32 rounding of the exact value adds half an ulp on top of the summation bound.
        const double allowed = bnd + std::fabs(want) * 0x1.0p-24;
        if (!(err <= allowed)) {
          ++rep.mismatches;
          note(rep, fmt::format("score head {} row {} block {}: expected {} (+-{}), got {}", h, row,
                                blk, want, allowed, got));
        } else if (err > rep.maxScoreError) {
          rep.maxScoreError = err;
          rep.maxScoreErrorBound = allowed;
        }
      }
}

} // namespace m3idx::reference
