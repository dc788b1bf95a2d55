// The CUDA backend: without a driver it fails with a message naming the library (checked on every
// machine); with one (the test bundle on the H200; bench/gpu.sh runs the same checks at scale) every case family
// matches the reference -- skipped here with the reason when no driver can be loaded.
#include <gtest/gtest.h>

#include "runtime/Backend.h"
#include "tests/runtime/GpuFamilies.h"
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
                 << "); the test bundle of scripts/package --tests runs them on a GPU machine";
  m3idx::testing::expectFamiliesMatchReference(**backend);
}
