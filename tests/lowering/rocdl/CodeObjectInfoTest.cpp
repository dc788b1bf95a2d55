// Reading gfx950 code objects in-process: a real one from the DSL kernels, and rejection of bytes
// that are not one.
#include <gtest/gtest.h>

#include "kernels_src/KernelCatalog.h"
#include "lowering/Target.h"
#include "lowering/GpuCompiler.h"
#include "lowering/rocdl/CodeObjectInfo.h"

using namespace m3idx;

TEST(CodeObjectInfo, ReadsTheKernelsResources) {
  auto k = kernels::buildKernel(kernels::KernelKind::ScoreDecode, {1, 4});
  ASSERT_TRUE(k.ok());
  auto hsaco = lowering::gpuStage(*k, *lowering::makeGfx950Target(), lowering::GpuStage::Binary);
  ASSERT_TRUE(hsaco.ok()) << hsaco.status().message();
  auto info = lowering::readCodeObject(*hsaco);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->target, "amdgcn-amd-amdhsa--gfx950");
  ASSERT_EQ(info->kernels.size(), 1u);
  const auto &r = info->kernels[0];
  EXPECT_EQ(r.name, "score_decode");
  EXPECT_EQ(r.wavefrontSize, 64);
  EXPECT_EQ(r.scratchBytes, 0);
  // 7 buffers as 5-field descriptors (40 bytes each), 13 i64 scalars and 4 divisors' words.
  EXPECT_EQ(r.kernargBytes, 7 * 40 + (13 + 4) * 8);
  EXPECT_GT(r.vgprs, 0);
  EXPECT_GE(r.wavesPerSimd, 1);
}

TEST(CodeObjectInfo, RejectsWhatIsNotACodeObject) {
  EXPECT_FALSE(lowering::readCodeObject("not an elf").ok());
  EXPECT_FALSE(lowering::readCodeObject(std::string("\x7f" "ELF", 4)).ok());
}
