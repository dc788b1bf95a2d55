// The check every GPU backend runs where its device exists: exact-valued generated families
// (decode at 4 heads, prefill at 1, mixed at 2) with top-k equal to the reference bit for bit.
#pragma once

#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "casefile/CaseGenerator.h"
#include "reference/ReferenceIndexer.h"
#include "runtime/Backend.h"

namespace m3idx::testing {

inline std::vector<GenOptions> gpuFamilies() {
  std::vector<GenOptions> families;
  for (auto [seed, heads, decodes, prefills] :
       {std::tuple{1, 4, 6, 0}, std::tuple{2, 1, 0, 3}, std::tuple{3, 2, 4, 2}}) {
    GenOptions o;
    o.seed = seed;
    o.mode = ValueMode::Exact;
    o.numHeads = heads;
    o.numDecodes = decodes;
    o.numPrefills = prefills;
    o.decodeContext = {0, 3000};
    families.push_back(o);
  }
  return families;
}

inline void expectFamiliesMatchReference(runtime::Backend &backend) {
  for (const GenOptions &o : gpuFamilies()) {
    StatusOr<Case> c = generateCase(o);
    ASSERT_TRUE(c.ok());
    auto got = backend.run(c->view(), {});
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(got->topk, reference::runReference(c->view(), false)->topk) << "seed " << o.seed;
  }
}

} // namespace m3idx::testing
