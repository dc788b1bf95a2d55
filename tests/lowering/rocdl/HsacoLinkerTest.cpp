// gfx950 code objects made in process: a kernel's ISA assembled and linked by lld's library into
// an ELF the disassembler reads back; bad ISA or bytes are errors that say which step failed.
#include <gtest/gtest.h>

#include "kernels_src/KernelCatalog.h"
#include "tuning/TargetTuning.h"
#include "lowering/Target.h"
#include "lowering/GpuCompiler.h"
#include "lowering/rocdl/HsacoLinker.h"

using namespace m3idx;

TEST(HsacoLinker, LinksAKernelThatDisassemblesBack) {
  // gfx950's own form (a trip of 64 rows, one a thread: load.rows has no GPU form for others).
  auto gfx950 = tuning::tuningFor("gfx950");
  ASSERT_TRUE(gfx950.ok());
  auto k = kernels::buildKernel(kernels::KernelKind::TopkPrefill,
                                (*gfx950)->configFor(kernels::KernelKind::TopkPrefill, 1, 64));
  ASSERT_TRUE(k.ok());
  auto target = lowering::makeGfx950Target();
  auto hsaco = lowering::gpuStage(*k, *target, lowering::GpuStage::Binary);
  ASSERT_TRUE(hsaco.ok()) << hsaco.status().message();
  ASSERT_GE(hsaco->size(), 4u);
  EXPECT_EQ(hsaco->substr(0, 4), std::string("\x7f" "ELF"));
  auto text = lowering::disassembleGfx950(*hsaco);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_NE(text->find("<topk_prefill>:"), std::string::npos);
  EXPECT_NE(text->find("s_endpgm"), std::string::npos);
  EXPECT_EQ(text->find("<unknown>"), std::string::npos);
}

TEST(HsacoLinker, BadAssemblyIsAnErrorNamingTheStep) {
  auto r = lowering::linkGfx950Hsaco("\tv_not_an_instruction v0, v1\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gfx950: assembling the ISA failed"), std::string::npos)
      << r.status().message();
}

TEST(HsacoLinker, NonElfBytesAreNotDisassembled) {
  auto r = lowering::disassembleGfx950("not a code object");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not an ELF code object"), std::string::npos) << r.status().message();
}
