// The CUDA backend: without a driver it fails with a message naming the library (checked on every
// machine); with one (the H200 through bench/gpu.sh runs the same checks at scale) every case family
// matches the reference -- skipped here with the reason when no driver can be loaded.
#include <gtest/gtest.h>

#include "casefile/CaseGenerator.h"
#include "reference/ReferenceIndexer.h"
#include "runtime/Backend.h"
#include "runtime/cuda/CudaDriver.h"

using namespace m3idx;

TEST(CudaBackend, MissingDriverIsAClearError) {
  ::setenv("M3IDX_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  auto api = cuda::loadDriver();
  ::unsetenv("M3IDX_CUDA_LIBRARY");
  ASSERT_FALSE(api.ok());
  EXPECT_NE(api.status().message().find("cannot load the driver library /nonexistent/libcuda.so.1"),
            std::string::npos)
      << api.status().message();
}

TEST(CudaBackend, FamiliesMatchTheReferenceOnAGpu) {
  auto backend = runtime::makeBackend("cuda");
  if (!backend.ok())
    GTEST_SKIP() << "no usable CUDA driver here (" << backend.status().message()
                 << "); bench/gpu.sh runs these checks on the H200";
  for (auto [seed, heads, decodes, prefills] :
       {std::tuple{1, 4, 6, 0}, std::tuple{2, 1, 0, 3}, std::tuple{3, 2, 4, 2}}) {
    GenOptions o;
    o.seed = seed;
    o.mode = ValueMode::Exact;
    o.numHeads = heads;
    o.numDecodes = decodes;
    o.numPrefills = prefills;
    o.decodeContext = {0, 3000};
    StatusOr<Case> c = generateCase(o);
    ASSERT_TRUE(c.ok());
    auto got = (*backend)->run(c->view(), {});
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(got->topk, reference::runReference(c->view(), false)->topk) << "seed " << seed;
  }
}
