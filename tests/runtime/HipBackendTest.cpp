// The HIP backend's loader: a missing runtime library or symbol is a clear error naming it (checked
// on every machine). No AMD GPU is available to this project, so the run on one is skipped here
// with that reason, never passed silently.
#include <gtest/gtest.h>

#include "runtime/Backend.h"
#include "tests/runtime/GpuFamilies.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/hip/HipRuntime.h"

using namespace m3idx;

namespace {
std::string loadWith(const char *var, const char *library, bool hip) {
  ::setenv(var, library, 1);
  auto api = hip ? hip::loadHipRuntime() : cuda::loadDriver();
  ::unsetenv(var);
  return api.ok() ? "" : api.status().message();
}
} // namespace

TEST(HipRuntime, MissingLibraryIsAClearError) {
  const std::string m = loadWith("M3IDX_HIP_LIBRARY", "/nonexistent/libamdhip64.so", true);
  EXPECT_NE(m.find("cannot load the HIP runtime library (tried /nonexistent/libamdhip64.so)"),
            std::string::npos)
      << m;
}

TEST(HipRuntime, MissingSymbolNamesIt) {
  // libm is on every machine and has none of HIP's entry points.
  const std::string m = loadWith("M3IDX_HIP_LIBRARY", "libm.so.6", true);
  EXPECT_EQ(m, "hip: libm.so.6: missing symbol hipGetErrorString");
}

TEST(HipRuntime, TriesTheVersionedNamesInOrder) {
  ASSERT_GE(hip::hipLibraryNames().size(), 2u);
  EXPECT_EQ(hip::hipLibraryNames()[0], "libamdhip64.so");
  if (hip::loadHipRuntime().ok())
    GTEST_SKIP() << "a HIP runtime is installed here";
  const std::string m = hip::loadHipRuntime().status().message();
  // A machine may have the library but no AMD device (the H200 has one): then it loaded, and what
  // failed was its initialization, not the search this test is about.
  if (m.find("cannot load") == std::string::npos)
    GTEST_SKIP() << "a HIP runtime library is installed here (" << m << ")";
  for (const std::string &name : hip::hipLibraryNames())
    EXPECT_NE(m.find(name), std::string::npos) << m;
}

TEST(CudaDriver, MissingSymbolNamesIt) {
  const std::string m = loadWith("M3IDX_CUDA_LIBRARY", "libm.so.6", false);
  EXPECT_EQ(m, "cuda: libm.so.6: missing symbol cuGetErrorString");
}

TEST(DeviceApi, ErrorsNameThePlatformCallAndText) {
  runtime::DeviceApi api;
  api.platform = "HIP";
  api.errorString = [](int) { return "hipErrorInvalidImage"; };
  EXPECT_TRUE(api.check(0, "module load").ok());
  EXPECT_EQ(api.check(200, "module load").message(),
            "HIP module load failed: hipErrorInvalidImage (code 200)");
}

TEST(HipBackend, FamiliesMatchTheReferenceOnAnAmdGpu) {
  auto backend = runtime::makeBackend("hip");
  if (!backend.ok())
    GTEST_SKIP() << "no HIP runtime / AMD GPU here (" << backend.status().message()
                 << "); the gfx950 code objects are only built and inspected (tests/lit)";
  m3idx::testing::expectFamiliesMatchReference(**backend);
}
