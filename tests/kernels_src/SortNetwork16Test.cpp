// sortNetwork16 (topk_prefill's in-thread sort) sorts every input: by the 0-1 principle, a
// comparator network sorts all inputs iff it sorts all 2^16 inputs of zeros and ones. Its layers
// must also be disjoint pairs (a layer is one compare-exchange per lane, all at once).
#include <gtest/gtest.h>

#include <set>

#include "kernels_src/SortNetwork16.h"

using m3idx::kernels::sortNetwork16;

TEST(SortNetwork16, LayersAreDisjointPairsOfLowerThenHigherLane) {
  size_t comparators = 0;
  for (const auto &layer : sortNetwork16()) {
    std::set<int> seen;
    for (auto [lo, hi] : layer) {
      EXPECT_LT(lo, hi);
      EXPECT_GE(lo, 0);
      EXPECT_LT(hi, 16);
      EXPECT_TRUE(seen.insert(lo).second) << lo;
      EXPECT_TRUE(seen.insert(hi).second) << hi;
    }
    comparators += layer.size();
  }
  EXPECT_EQ(sortNetwork16().size(), 10u);
  EXPECT_EQ(comparators, 60u);
}

TEST(SortNetwork16, SortsEveryZeroOneInput) {
  int unsorted = 0;
  for (uint32_t bits = 0; bits < (1u << 16); ++bits) {
    int v[16];
    for (int i = 0; i < 16; ++i)
      v[i] = (bits >> i) & 1;
    for (const auto &layer : sortNetwork16())
      for (auto [lo, hi] : layer)
        if (v[lo] > v[hi])
          std::swap(v[lo], v[hi]);
    for (int i = 0; i + 1 < 16; ++i)
      if (v[i] > v[i + 1]) {
        ++unsorted;
        break;
      }
  }
  EXPECT_EQ(unsorted, 0);
}
