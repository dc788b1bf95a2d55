// ptxas as an optional step after PTX: a configured but missing ptxas is an error naming it,
// "none" turns it off, bad PTX reports ptxas's own message, and where ptxas is installed every
// kernel's PTX assembles into an sm_90 cubin (skipped with the reason elsewhere).
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels_src/KernelCatalog.h"
#include "tuning/TargetTuning.h"
#include "lowering/Target.h"
#include "lowering/GpuCompiler.h"
#include "lowering/nvvm/PtxAssembler.h"

using namespace m3idx;

namespace {
StatusOr<std::optional<std::string>> findWith(const char *value) {
  ::setenv("M3IDX_PTXAS", value, 1);
  auto r = lowering::findPtxas();
  ::unsetenv("M3IDX_PTXAS");
  return r;
}
} // namespace

TEST(PtxAssembler, ConfiguredButMissingIsAnError) {
  auto r = findWith("/nonexistent/ptxas");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("M3IDX_PTXAS"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("/nonexistent/ptxas"), std::string::npos);
}

TEST(PtxAssembler, NoneMeansPtxForTheDriver) {
  auto r = findWith("none");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(PtxAssembler, KernelsAssembleIntoSm90Cubins) {
  auto ptxas = lowering::findPtxas();
  ASSERT_TRUE(ptxas.ok()) << ptxas.status().message();
  if (!*ptxas)
    GTEST_SKIP() << "no ptxas installed here; the driver JIT-compiles the PTX instead";
  const std::string arch = lowering::makeSm90Target()->desc().arch; // sm_90a: wgmma
  EXPECT_EQ(arch, "sm_90a");
  EXPECT_FALSE(lowering::assemblePtx(**ptxas, "not ptx", arch).ok());
  for (kernels::KernelKind kind : kernels::allKernels()) {
    auto k = kernels::buildKernel(kind, (*tuning::tuningFor("sm_90"))->configFor(kind, 1, 4));
    ASSERT_TRUE(k.ok());
    auto ptx = lowering::gpuStage(*k, *lowering::makeSm90Target(), lowering::GpuStage::Binary);
    ASSERT_TRUE(ptx.ok()) << ptx.status().message();
    auto cubin = lowering::assemblePtx(**ptxas, *ptx, arch);
    ASSERT_TRUE(cubin.ok()) << cubin.status().message();
    ASSERT_GT(cubin->size(), 20u);
    EXPECT_EQ(cubin->substr(0, 4), std::string("\x7f" "ELF", 4));
    // e_machine (offset 18, little-endian) is EM_CUDA = 190.
    EXPECT_EQ(static_cast<unsigned char>((*cubin)[18]) | static_cast<unsigned char>((*cubin)[19]) << 8, 190);
  }
}
