// The targets' lowerings (lowering/TargetLowering.h) as the common emitter sees them: shuffles
// reach a whole gfx950 wave but stop at an sm_90 warp, and each target's program and dot limits.
#include <gtest/gtest.h>

#include "dsl/Builder.h"
#include "kernels_src/KernelCatalog.h"
#include "tuning/TargetTuning.h"
#include "lowering/GpuCompiler.h"
#include "lowering/Target.h"

using namespace m3idx;
using namespace m3idx::dsl;

namespace {

// out[0] = t[lane] for a tile t of `lanes` lanes and a run-time lane: an indexed shuffle.
Kernel extractAtKernel(int lanes) {
  KernelBuilder b("pick");
  Buffer in = b.buffer("in", Elem::I32, Access::Read);
  Buffer out = b.buffer("out", Elem::I32, Access::Write);
  Value lane = b.scalarArg("lane", Elem::I64);
  b.store(out, b.constInt(0), b.extractAt(b.loadTile(in, b.constInt(0), lanes), lane));
  return *b.finish();
}

} // namespace

// An indexed shuffle in a 64-lane gfx950 program spans the wave (width 64): with width 32, lanes
// 0-31 could not read lanes 32-63 (ROCDL's lowering keeps a lane's source inside its width). On
// sm_90 it spans the 32-lane warp.
TEST(TargetLowering, IndexedShufflesSpanTheTargetsWave) {
  auto gfx = lowering::gpuStage(extractAtKernel(64), *lowering::makeGfx950Target(), lowering::GpuStage::Mlir);
  ASSERT_TRUE(gfx.ok()) << gfx.status().message();
  EXPECT_NE(gfx->find("gpu.shuffle  idx"), std::string::npos) << *gfx;
  EXPECT_NE(gfx->find("arith.constant 64 : i32"), std::string::npos) << *gfx;
  EXPECT_EQ(gfx->find("arith.constant 32 : i32"), std::string::npos) << *gfx;
  auto sm90 = lowering::gpuStage(extractAtKernel(32), *lowering::makeSm90Target(), lowering::GpuStage::Mlir);
  ASSERT_TRUE(sm90.ok()) << sm90.status().message();
  EXPECT_NE(sm90->find("gpu.shuffle  idx"), std::string::npos) << *sm90;
  EXPECT_NE(sm90->find("arith.constant 32 : i32"), std::string::npos) << *sm90;
}

// Layouts print: the kernel as the tile dialect with each tile's layout as its type's encoding
// and each dot_tiles' unit, as each target assigns them (sm_90 decode keys in mma fragment rows
// dotted on mma.sync, its warpgroup prefill on wgmma, gfx950 on MFMA with blocked values).
TEST(TargetLowering, LayoutsArePrinted) {
  using kernels::KernelKind;
  auto layouts = [](KernelKind kind, const char *target, std::unique_ptr<lowering::Target> t) {
    auto k = kernels::buildKernel(kind, (*tuning::tuningFor(target))->configFor(kind, 1, 4));
    EXPECT_TRUE(k.ok());
    auto text = lowering::gpuStage(*k, *t, lowering::GpuStage::Layouts);
    EXPECT_TRUE(text.ok()) << text.status().message();
    return text.ok() ? *text : std::string();
  };
  const std::string decode = layouts(KernelKind::ScoreDecode, "sm_90", lowering::makeSm90Target());
  EXPECT_NE(decode.find("-> tensor<2048xf8E4M3FN, #m3idx.layout<mma_rows>>"), std::string::npos) << decode;
  EXPECT_NE(decode.find("{m3idx.unit = \"mma.sync\"} : tensor<2048xf8E4M3FN, #m3idx.layout<mma_rows>>, "
                        "tensor<512xf8E4M3FN, #m3idx.layout<blocked>> -> tensor<64xf32, #m3idx.layout<mma_acc>>"),
            std::string::npos)
      << decode;
  const std::string prefill = layouts(KernelKind::ScorePrefill, "sm_90", lowering::makeSm90Target());
  EXPECT_NE(prefill.find("{m3idx.unit = \"wgmma\"}"), std::string::npos) << prefill;
  EXPECT_NE(prefill.find("#m3idx.layout<wgmma_acc>> -> tensor<4096xf32, #m3idx.layout<wgmma_acc_folded>>"),
            std::string::npos);
  const std::string gfx = layouts(KernelKind::ScoreDecode, "gfx950", lowering::makeGfx950Target());
  EXPECT_NE(gfx.find("{m3idx.unit = \"mfma\"}"), std::string::npos) << gfx;
  EXPECT_EQ(gfx.find("mma_rows"), std::string::npos);
  EXPECT_EQ(gfx.find("mma_acc"), std::string::npos);
}
