// A sorting network for 16 keys: 60 comparators in 10 layers, the fewest comparators known for 16
// inputs (M. W. Green's size, Knuth TAOCP vol. 3 §5.3.4; this layering as B. Dobbelaere's list of
// smallest sorting networks gives it). A bitonic sort of 16 takes 80 in the same 10 layers. Where a
// row's 16 keys are one thread's registers (topk_prefill), every comparator is instructions of
// the ALU pipe the kernel is bound by, so the smaller network is a quarter fewer of them.
// tests/kernels_src/SortNetwork16Test checks it sorts every 0-1 input (the 0-1 principle).
#pragma once

#include <utility>
#include <vector>

namespace m3idx::kernels {

// Each layer's pairs (i, j), i < j, are disjoint; after the comparator lane i holds the smaller key.
inline const std::vector<std::vector<std::pair<int, int>>> &sortNetwork16() {
  static const std::vector<std::vector<std::pair<int, int>>> layers = {
      {{0, 13}, {1, 12}, {2, 15}, {3, 14}, {4, 8}, {5, 6}, {7, 11}, {9, 10}},
      {{0, 5}, {1, 7}, {2, 9}, {3, 4}, {6, 13}, {8, 14}, {10, 15}, {11, 12}},
      {{0, 1}, {2, 3}, {4, 5}, {6, 8}, {7, 9}, {10, 11}, {12, 13}, {14, 15}},
      {{0, 2}, {1, 3}, {4, 10}, {5, 11}, {6, 7}, {8, 9}, {12, 14}, {13, 15}},
      {{1, 2}, {3, 12}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {13, 14}},
      {{1, 4}, {2, 6}, {5, 8}, {7, 10}, {9, 13}, {11, 14}},
      {{2, 4}, {3, 6}, {9, 12}, {11, 13}},
      {{3, 5}, {6, 8}, {7, 9}, {10, 12}},
      {{3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}},
      {{6, 7}, {8, 9}},
  };
  return layers;
}

} // namespace m3idx::kernels
