// The target registry (tuning/TargetRegistry.h) and the MLIR targets (lowering/Target.h) agree
// on every target: each name makes a lowering target of that kind, whose GPU form has the
// registry's threads and whose binary is the registry's object format; each has its tuning table;
// an unknown name is refused by both, the registry listing the known ones.
#include <gtest/gtest.h>

#include "lowering/Target.h"
#include "tuning/TargetRegistry.h"

using namespace m3idx;

TEST(TargetRegistry, EveryTargetAgreesWithItsLoweringTarget) {
  ASSERT_EQ(tuning::targets().size(), 3u);
  for (const tuning::TargetInfo &t : tuning::targets()) {
    SCOPED_TRACE(std::string(t.name));
    auto made = lowering::makeTarget(t.name);
    ASSERT_TRUE(made.ok()) << made.status().message();
    const lowering::Target &target = **made;
    EXPECT_EQ(target.desc().kind, t.name);
    EXPECT_EQ(t.tuning().target, t.name);
    const lowering::BinaryKind kind = target.binaryKind();
    if (t.gpu()) {
      EXPECT_EQ(target.gpuForm().threads, t.programThreads);
      EXPECT_EQ(t.objectFormat, kind == lowering::BinaryKind::Ptx ? "ptx" : kind == lowering::BinaryKind::Hsaco ? "hsaco" : "?");
    } else {
      EXPECT_EQ(kind, lowering::BinaryKind::HostJit);
      EXPECT_EQ(t.objectFormat, "jit");
    }
  }
  EXPECT_EQ((*tuning::targetNamed("sm_90"))->deviceArch, "sm_90");
}

TEST(TargetRegistry, AnUnknownNameIsRefusedNamingTheKnownOnes) {
  auto t = tuning::targetNamed("sm_100");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "target: expected host, sm_90 or gfx950, got sm_100");
  EXPECT_FALSE(lowering::makeTarget("sm_100").ok());
}
