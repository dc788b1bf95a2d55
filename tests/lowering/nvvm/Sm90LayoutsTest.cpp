// Which values sm_90's layout pass (lowering/nvvm/Sm90Layouts.cpp, on the tile dialect) keeps in
// mma fragment order: the score kernels' key chain (loads, loop-carried copies, decode) and their
// dot results up to the group reduction; anything a blocked-only op also reads keeps its whole
// group blocked, and a dot's results so read are converted from its accumulators.
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dsl/Builder.h"
#include "kernels_src/KernelCatalog.h"
#include "tuning/TargetTuning.h"
#include "lowering/GpuCompiler.h"
#include "lowering/Pipeline.h"
#include "lowering/Spread.h"
#include "lowering/Target.h"
#include "lowering/nvvm/Sm90Layouts.h"
#include "tile/FromDsl.h"
#include "tile/TileText.h"

using namespace m3idx;
using dsl::OpKind;
using lowering::Spread;

namespace {

// A kernel's tile form with sm_90's layouts assigned for a program of `threads` threads (a warp,
// or a warpgroup), and the tile value of each DSL value.
struct Encoded {
  std::unique_ptr<mlir::MLIRContext> ctx = lowering::makeContext();
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<mlir::Value> values; // per ValueId

  std::vector<Spread> spreads() const { // per ValueId (scalars: blocked)
    std::vector<Spread> out(values.size(), Spread::Blocked);
    for (size_t i = 0; i < values.size(); ++i)
      if (values[i])
        out[i] = tile::layoutOf(values[i].getType());
    return out;
  }
  // The DSL values whose one use is a convert_layout, each to the layout it converts to.
  std::map<int32_t, Spread> converts() const {
    std::map<int32_t, Spread> out;
    for (size_t i = 0; i < values.size(); ++i)
      if (mlir::Value v = values[i]; v && v.hasOneUse())
        if (auto convert = mlir::dyn_cast<tile::ConvertLayoutOp>(*v.getUsers().begin()))
          out[static_cast<int32_t>(i)] = tile::layoutOf(convert.getType());
    return out;
  }
};

std::unique_ptr<Encoded> encode(const dsl::Kernel &k, int threads) {
  auto e = std::make_unique<Encoded>();
  auto module = tile::fromDsl(k, *e->ctx, &e->values);
  EXPECT_TRUE(module.ok()) << module.status().message();
  if (!module.ok())
    return e;
  e->module = std::move(*module);
  EXPECT_TRUE(mlir::succeeded(lowering::assignSm90Layouts(*e->module->getOps<mlir::func::FuncOp>().begin(), threads)));
  return e;
}

// Each DSL value's layout, as the sm_90 conversion reads them.
std::vector<Spread> layoutsFor(const dsl::Kernel &k, int threads) { return encode(k, threads)->spreads(); }
std::vector<Spread> spreads(const dsl::Kernel &k) { return layoutsFor(k, 32); }
std::vector<Spread> warpgroupSpreads(const dsl::Kernel &k) { return layoutsFor(k, 128); }

std::vector<const dsl::Op *> all(const dsl::Kernel &k, OpKind kind) {
  std::vector<const dsl::Op *> found;
  for (const dsl::Op &op : k.ops)
    if (op.kind == kind)
      found.push_back(&op);
  return found;
}

const dsl::Op &only(const dsl::Kernel &k, OpKind kind) {
  const auto found = all(k, kind);
  EXPECT_EQ(found.size(), 1u) << dsl::opName(kind);
  return *found.at(0);
}

} // namespace

TEST(Sm90Layouts, ScoreKernelsKeepKeysAndAccumulatorsInFragmentOrder) {
  using kernels::KernelKind;
  const int sm90 = 64; // 8 column tiles on one warp, B fragments in shared memory
  for (auto [kind, heads, columns] : {std::tuple{KernelKind::ScoreDecode, 1, 16},
                                      std::tuple{KernelKind::ScoreDecode, 4, 16},
                                      std::tuple{KernelKind::ScorePrefill, 1, 16},
                                      std::tuple{KernelKind::ScorePrefill, 2, 16},
                                      std::tuple{KernelKind::ScorePrefill, 1, sm90},
                                      std::tuple{KernelKind::ScorePrefill, 4, sm90}}) {
    auto k = kernels::buildKernel(kind, tuning::TargetTuning{"sm_90", tuning::PrefillForm{columns, 16, 1}}.configFor(kind, heads, 4));
    ASSERT_TRUE(k.ok()) << k.status().message();
    const std::vector<Spread> s = spreads(*k);
    // The score loop is emitted twice (tiles seen whole, then masked tiles): each copy in order.
    const auto dots = all(*k, OpKind::DotTiles), decodes = all(*k, OpKind::DecodeNvfp4),
               reduces = all(*k, OpKind::ReduceMaxGroups);
    ASSERT_EQ(dots.size(), 2u);
    ASSERT_EQ(decodes.size(), 2u);
    ASSERT_EQ(reduces.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(s[dots[i]->operands[0].id], Spread::MmaRows);
      EXPECT_EQ(s[decodes[i]->operands[0].id], Spread::MmaRows);
      EXPECT_EQ(s[decodes[i]->operands[1].id], Spread::MmaRows);
      EXPECT_EQ(s[dots[i]->operands[1].id], Spread::Blocked); // the queries: staged for B fragments
      EXPECT_EQ(s[dots[i]->results[0].id], Spread::MmaAcc);
      EXPECT_EQ(s[reduces[i]->operands[0].id], Spread::MmaAcc);
      EXPECT_EQ(s[reduces[i]->results[0].id], Spread::Blocked);
    }
    int rowsLoads = 0; // the first tile's data and scales, and each loop's next tile's
    for (const dsl::Op &op : k->ops)
      rowsLoads += op.kind == OpKind::LoadTile && s[op.results[0].id] == Spread::MmaRows;
    EXPECT_EQ(rowsLoads, 6);
  }
}

namespace {

// keys = decode(load, load); out = dot.tiles(keys, q); optionally a blocked-only use of the keys
// (stored as bytes) or of the result.
dsl::Kernel dotKernel(bool extractKeys, bool storeResult) {
  dsl::KernelBuilder b("k");
  dsl::Buffer kv = b.buffer("kv", dsl::Elem::I8, dsl::Access::Read);
  dsl::Buffer out = b.buffer("out", dsl::Elem::F32, dsl::Access::Write);
  dsl::Buffer bytes = b.buffer("bytes", dsl::Elem::I8, dsl::Access::Write);
  dsl::Value zero = b.constInt(0);
  dsl::Value keys = b.decodeNvfp4(b.loadTile(kv, zero, 1024, 16), b.loadTile(kv, b.constInt(1024), 128, 16));
  dsl::Value q = b.convert(OpKind::Bitcast, b.loadTile(kv, b.constInt(2048), 4 * 128), dsl::Elem::F8E4M3FN);
  dsl::Value dots = b.dotTiles(keys, q, 128);
  if (extractKeys)
    b.storeTile(bytes, zero, b.convert(OpKind::Bitcast, keys, dsl::Elem::I8));
  if (storeResult)
    b.storeTile(out, zero, dots);
  dsl::Value best = b.reduceMaxGroups(b.maxNumF(dots, b.splat(b.constF32(0), 64)), 4);
  b.store(out, b.constInt(1), b.extract(best, 0));
  auto k = b.finish();
  EXPECT_TRUE(k.ok()) << k.status().message();
  return *k;
}

} // namespace

TEST(Sm90Layouts, KeysReadElsewhereStayBlockedAndTheDotRunsOnFfma) {
  const dsl::Kernel k = dotKernel(/*extractKeys=*/true, /*storeResult=*/false);
  const std::vector<Spread> s = spreads(k);
  const dsl::Op &dot = only(k, OpKind::DotTiles), &decode = only(k, OpKind::DecodeNvfp4);
  EXPECT_EQ(s[dot.operands[0].id], Spread::Blocked);
  EXPECT_EQ(s[decode.operands[0].id], Spread::Blocked);
  EXPECT_EQ(s[decode.operands[1].id], Spread::Blocked);
  EXPECT_EQ(s[dot.results[0].id], Spread::Blocked); // FFMA results are blocked
}

TEST(Sm90Layouts, AResultReadElsewhereIsConvertedWhileKeysStayFragments) {
  const dsl::Kernel k = dotKernel(/*extractKeys=*/false, /*storeResult=*/true);
  const std::vector<Spread> s = spreads(k);
  const dsl::Op &dot = only(k, OpKind::DotTiles);
  EXPECT_EQ(s[dot.operands[0].id], Spread::MmaRows);
  // The dot makes accumulators, which every use reads converted to blocked ...
  EXPECT_EQ(s[dot.results[0].id], Spread::MmaAcc);
  EXPECT_EQ(encode(k, 32)->converts(), (std::map<int32_t, Spread>{{dot.results[0].id, Spread::Blocked}}));
  // ... said in the encoded kernel (m3idx inspect --emit layouts) by one convert_layout
  auto encoded = lowering::gpuStage(k, *lowering::makeSm90Target(), lowering::GpuStage::Layouts);
  ASSERT_TRUE(encoded.ok()) << encoded.status().message();
  EXPECT_NE(encoded->find("m3idx.convert_layout %5 : tensor<64xf32, #m3idx.layout<mma_acc>> -> "
                          "tensor<64xf32, #m3idx.layout<blocked>>"),
            std::string::npos)
      << *encoded;
  // ... and lowered as its own op: the dot's accumulators through shared memory to their blocked
  // owners (two barriers around the buffer), not through an FFMA dot's result buffer.
  auto ptx = lowering::gpuStage(k, *lowering::makeSm90Target(), lowering::GpuStage::Binary);
  ASSERT_TRUE(ptx.ok()) << ptx.status().message();
  EXPECT_NE(ptx->find("mma.sync"), std::string::npos);
  EXPECT_NE(ptx->find("st.shared.b32"), std::string::npos) << *ptx;
  EXPECT_EQ(ptx->find("fma.rn.f32"), std::string::npos);
  const dsl::Kernel plain = dotKernel(false, false);
  EXPECT_EQ(spreads(plain)[only(plain, OpKind::DotTiles).results[0].id], Spread::MmaAcc);
}

// Keys read only by an FFMA dot (rows of 64: not the 128 mma.sync tiles take) come from the table
// of exact f32 keys, beside the key-byte table every sm_90 decode program declares.
TEST(Sm90Layouts, KeysReadOnlyByAnFfmaDotLowerForSm90) {
  dsl::KernelBuilder b("k");
  dsl::Buffer kv = b.buffer("kv", dsl::Elem::I8, dsl::Access::Read);
  dsl::Buffer out = b.buffer("out", dsl::Elem::F32, dsl::Access::Write);
  dsl::Value zero = b.constInt(0);
  dsl::Value keys = b.decodeNvfp4(b.loadTile(kv, zero, 1024, 16), b.loadTile(kv, b.constInt(1024), 128, 16));
  dsl::Value q = b.convert(OpKind::Bitcast, b.loadTile(kv, b.constInt(2048), 4 * 64), dsl::Elem::F8E4M3FN);
  b.storeTile(out, zero, b.dotTiles(keys, q, 64));
  auto k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto ptx = lowering::gpuStage(*k, *lowering::makeSm90Target(), lowering::GpuStage::Binary);
  ASSERT_TRUE(ptx.ok()) << ptx.status().message();
  EXPECT_NE(ptx->find("m3idx_nvfp4_keys"), std::string::npos);
  EXPECT_NE(ptx->find("fma.rn.f32"), std::string::npos);
  EXPECT_EQ(ptx->find("mma.sync"), std::string::npos);
}

// Each spread combination lowers to PTX: fragment keys with accumulators kept or sent to their
// blocked owners through shared memory (mma.sync either way), blocked keys on FFMA.
TEST(Sm90Layouts, EveryCombinationLowersForSm90) {
  struct Variant {
    bool extractKeys, storeResult, mma, sharedResult;
  };
  for (Variant v : {Variant{false, false, true, false}, Variant{false, true, true, true},
                    Variant{true, false, false, true}}) {
    const dsl::Kernel k = dotKernel(v.extractKeys, v.storeResult);
    auto ptx = lowering::gpuStage(k, *lowering::makeSm90Target(), lowering::GpuStage::Binary);
    ASSERT_TRUE(ptx.ok()) << ptx.status().message();
    EXPECT_EQ(ptx->find("mma.sync") != std::string::npos, v.mma) << v.extractKeys << v.storeResult;
    EXPECT_EQ(ptx->find("fma.rn.f32") != std::string::npos, !v.mma) << v.extractKeys << v.storeResult;
    EXPECT_EQ(ptx->find("st.shared.f32") != std::string::npos || ptx->find("st.shared.b32") != std::string::npos,
              v.sharedResult)
        << v.extractKeys << v.storeResult;
  }
}

// sm_90 prefill programs (a warpgroup, 64-token tiles): the key chain in MmaRows order (16 rows per
// warp: wgmma's A from registers), the dots' results in WgmmaAcc, folded over token pairs into a
// WgmmaAccFolded running max up to the reduction; the queries stay blocked (staged as B).
TEST(Sm90Layouts, WarpgroupPrefillKeepsKeysAsAAndResultsInWgmmaAccumulators) {
  using kernels::KernelKind;
  for (int heads : {1, 2, 4}) {
    const kernels::KernelConfig c = (*tuning::tuningFor("sm_90"))->configFor(KernelKind::ScorePrefill, heads, 4);
    EXPECT_EQ(c.warps, 4);
    EXPECT_EQ(c.tokenTile, 64);
    auto k = kernels::buildKernel(KernelKind::ScorePrefill, c);
    ASSERT_TRUE(k.ok()) << k.status().message();
    EXPECT_EQ(k->warps, 4);
    const std::vector<Spread> s = warpgroupSpreads(*k);
    const auto dots = all(*k, OpKind::DotTiles), decodes = all(*k, OpKind::DecodeNvfp4),
               reduces = all(*k, OpKind::ReduceMaxGroups), folds = all(*k, OpKind::FoldMax);
    ASSERT_EQ(dots.size(), 2u);
    ASSERT_EQ(reduces.size(), 2u);
    ASSERT_EQ(folds.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(s[dots[i]->operands[0].id], Spread::MmaRows) << heads;
      EXPECT_EQ(s[decodes[i]->operands[0].id], Spread::MmaRows) << heads;
      EXPECT_EQ(s[decodes[i]->operands[1].id], Spread::MmaRows) << heads;
      EXPECT_EQ(s[dots[i]->operands[1].id], Spread::Blocked) << heads;
      EXPECT_EQ(s[dots[i]->results[0].id], Spread::WgmmaAcc) << heads;
      EXPECT_EQ(s[folds[i]->operands[0].id], Spread::WgmmaAcc) << heads;
      EXPECT_EQ(s[folds[i]->results[0].id], Spread::WgmmaAccFolded) << heads;
      EXPECT_EQ(s[reduces[i]->operands[0].id], Spread::WgmmaAccFolded) << heads;
      EXPECT_EQ(s[reduces[i]->results[0].id], Spread::Blocked) << heads;
    }
    // In a one-warp program neither wgmma nor mma.sync takes 64-token dots: nothing takes the
    // tensor-core orders.
    const std::vector<Spread> plain = spreads(*k);
    EXPECT_EQ(plain[dots[0]->results[0].id], Spread::Blocked);
  }
}

// Warpgroup prefill programs of 128 columns (rows 128 / heads: sm_90's form) lower to wgmma
// m64n128k16 with B's 32 KB in shared memory under a 168-register cap; 64 columns to m64n64k16
// under 128.
TEST(Sm90Layouts, WarpgroupPrefillOf128ColumnsLowersToN128) {
  using kernels::KernelKind;
  // score_prefill of `form` for `heads`, lowered to PTX ("" where it did not build or lower)
  auto prefillPtx = [](const tuning::PrefillForm &form, int heads) -> std::string {
    const kernels::KernelConfig c = tuning::TargetTuning{"sm_90", form}.configFor(KernelKind::ScorePrefill, heads, 4);
    EXPECT_EQ(c.queryRows, form.columns / heads);
    auto k = kernels::buildKernel(KernelKind::ScorePrefill, c);
    EXPECT_TRUE(k.ok()) << k.status().message();
    if (!k.ok())
      return "";
    auto ptx = lowering::gpuStage(*k, *lowering::makeSm90Target(), lowering::GpuStage::Binary);
    EXPECT_TRUE(ptx.ok()) << ptx.status().message();
    return ptx.ok() ? *ptx : "";
  };
  tuning::PrefillForm form = (*tuning::tuningFor("sm_90"))->prefill;
  EXPECT_EQ(form.columns, 128);
  for (int heads : {1, 4}) {
    const std::string ptx = prefillPtx(form, heads);
    EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"), std::string::npos);
    EXPECT_EQ(ptx.find("m64n64k16"), std::string::npos);
    EXPECT_NE(ptx.find(".shared .align 1024 .b8 __wg_score_prefill_0[32768]"), std::string::npos);
    EXPECT_NE(ptx.find(".maxnreg 168"), std::string::npos);
  }
  tuning::PrefillForm narrow = form; // and unfolded: the reduction folds the thread's tokens itself
  narrow.columns = 64;
  narrow.foldTokenPairs = false;
  const std::string ptx = prefillPtx(narrow, 1);
  EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"), std::string::npos);
  EXPECT_NE(ptx.find(".maxnreg 128"), std::string::npos);
  kernels::KernelConfig tooMany = tuning::TargetTuning{"sm_90", form}.configFor(KernelKind::ScorePrefill, 1, 4);
  tooMany.queryRows = 129;
  EXPECT_FALSE(kernels::buildKernel(KernelKind::ScorePrefill, tooMany).ok());
}

// A warpgroup dot whose result is also read in blocked order has no wgmma form (64 x 64 results
// have no room to be regrouped in shared memory): a clear lowering error, not wrong code.
TEST(Sm90Layouts, WarpgroupDotReadInBlockedOrderIsALoweringError) {
  dsl::KernelBuilder b("k", 4);
  dsl::Buffer kv = b.buffer("kv", dsl::Elem::I8, dsl::Access::Read);
  dsl::Buffer out = b.buffer("out", dsl::Elem::F32, dsl::Access::Write);
  dsl::Value zero = b.constInt(0);
  dsl::Value keys = b.decodeNvfp4(b.loadTile(kv, zero, 64 * 64, 16), b.loadTile(kv, b.constInt(8192), 64 * 8, 16));
  dsl::Value q = b.convert(OpKind::Bitcast, b.loadTile(kv, b.constInt(16384), 64 * 128), dsl::Elem::F8E4M3FN);
  dsl::Value dots = b.dotTiles(keys, q, 128);
  b.storeTile(out, zero, dots);
  auto k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(warpgroupSpreads(*k)[only(*k, OpKind::DotTiles).operands[0].id], Spread::MmaRows);
  auto ptx = lowering::gpuStage(*k, *lowering::makeSm90Target(), lowering::GpuStage::Binary);
  ASSERT_FALSE(ptx.ok());
  EXPECT_NE(ptx.status().message().find("wgmma dot.tiles result is read in blocked order"), std::string::npos)
      << ptx.status().message();
}

// A warpgroup program's dot that wgmma cannot take (here 16 key tokens, not 64) is refused, not run
// on FFMA behind the kernel's back (it lowered silently to FFMA before).
TEST(Sm90Layouts, WarpgroupDotWgmmaCannotTakeIsRefused) {
  dsl::KernelBuilder b("k", 4);
  dsl::Buffer kv = b.buffer("kv", dsl::Elem::I8, dsl::Access::Read);
  dsl::Buffer out = b.buffer("out", dsl::Elem::F32, dsl::Access::Write);
  dsl::Value zero = b.constInt(0);
  dsl::Value keys = b.decodeNvfp4(b.loadTile(kv, zero, 16 * 64, 16), b.loadTile(kv, b.constInt(8192), 16 * 8, 16));
  dsl::Value q = b.convert(OpKind::Bitcast, b.loadTile(kv, b.constInt(16384), 64 * 128), dsl::Elem::F8E4M3FN);
  dsl::Value dots = b.dotTiles(keys, q, 128);
  const int dotLine = __LINE__ - 1;
  b.storeTile(out, zero, b.reduceMaxGroups(dots, 64));
  auto k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto ptx = lowering::gpuStage(*k, *lowering::makeSm90Target(), lowering::GpuStage::Binary);
  ASSERT_FALSE(ptx.ok());
  EXPECT_NE(ptx.status().message().find("in a 4-warp sm_90 program does not lower to wgmma"), std::string::npos)
      << ptx.status().message();
  // ... naming the kernel line of the dot
  EXPECT_NE(ptx.status().message().find(fmt::format("(at nvvm/Sm90LayoutsTest.cpp:{})", dotLine)), std::string::npos)
      << ptx.status().message();
}

// A multi-warp program is refused where the target has none (gfx950 programs are one wave), and a
// cross-warp lane shuffle is refused in one (no wrong code from a 32-lane shuffle).
TEST(Sm90Layouts, MultiWarpProgramsAreRefusedWhereUnsupported) {
  dsl::KernelBuilder b("k", 4);
  dsl::Buffer in = b.buffer("in", dsl::Elem::F32, dsl::Access::Read);
  dsl::Buffer out = b.buffer("out", dsl::Elem::F32, dsl::Access::Write);
  b.store(out, b.constInt(0), b.reduceMax(b.loadTile(in, b.constInt(0), 256)));
  const int reduceLine = __LINE__ - 1;
  auto k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto gfx = lowering::gpuStage(*k, *lowering::makeGfx950Target(), lowering::GpuStage::Mlir);
  ASSERT_FALSE(gfx.ok());
  EXPECT_NE(gfx.status().message().find("gfx950 programs are one wave"), std::string::npos) << gfx.status().message();
  auto sm90 = lowering::gpuStage(*k, *lowering::makeSm90Target(), lowering::GpuStage::Mlir);
  ASSERT_FALSE(sm90.ok());
  EXPECT_NE(sm90.status().message().find("across the warps"), std::string::npos) << sm90.status().message();
  EXPECT_NE(sm90.status().message().find(fmt::format("Sm90LayoutsTest.cpp:{})", reduceLine)), std::string::npos)
      << sm90.status().message();
}

// fold.max outside wgmma accumulators folds in blocked order: within a thread's lanes it lowers
// (8 lanes per thread, pairs 2 apart), across threads (one lane per thread) it is a named error.
TEST(Sm90Layouts, BlockedFoldMaxOnlyWithinAThread) {
  for (int lanes : {256, 32}) {
    dsl::KernelBuilder b("fold");
    dsl::Buffer in = b.buffer("in", dsl::Elem::F32, dsl::Access::Read);
    dsl::Buffer out = b.buffer("out", dsl::Elem::F32, dsl::Access::Write);
    dsl::Value half = b.foldMax(b.loadTile(in, b.constInt(0), lanes), lanes == 256 ? 2 : 8);
    b.storeTile(out, b.constInt(0), half);
    auto k = b.finish();
    ASSERT_TRUE(k.ok()) << k.status().message();
    EXPECT_EQ(warpgroupSpreads(*k)[only(*k, OpKind::FoldMax).results[0].id], Spread::Blocked);
    auto ptx = lowering::gpuStage(*k, *lowering::makeSm90Target(), lowering::GpuStage::Binary);
    if (lanes == 256) {
      ASSERT_TRUE(ptx.ok()) << ptx.status().message();
      EXPECT_EQ(ptx->find("shfl.sync"), std::string::npos);
    } else {
      ASSERT_FALSE(ptx.ok());
      EXPECT_NE(ptx.status().message().find("fold.max: pairs 8 apart across threads"), std::string::npos)
          << ptx.status().message();
    }
  }
}

// Warpgroup decode programs (every request one, padded to 8 columns: a tuning variant) lower for
// sm_90: up to 16 columns as each warp's own mma.sync on its 16 tokens, wider as wgmma. The 8-column
// ones' loop over a block's two 64-token tiles is unrolled whole, which erased the loop whose
// results the emitter still held (a crash, 2 heads x 4 rows) before results were read back.
TEST(Sm90Layouts, WarpgroupDecodesOfFewColumnsLowerToMmaSync) {
  using kernels::KernelKind;
  tuning::TargetTuning padded = **tuning::tuningFor("sm_90");
  padded.decodeWarpgroupAbove = 0;
  padded.decodeWarpgroupPad = true;
  for (int heads : {1, 2, 4})
    for (int rows : {1, 2, 3, 4, 6, 8}) {
      const kernels::KernelConfig c = padded.configFor(KernelKind::ScoreDecode, heads, rows);
      ASSERT_EQ(c.warps, 4) << heads << " x " << rows;
      auto k = kernels::buildKernel(KernelKind::ScoreDecode, c);
      ASSERT_TRUE(k.ok()) << k.status().message();
      auto ptx = lowering::gpuStage(*k, *lowering::makeSm90Target(), lowering::GpuStage::Binary);
      ASSERT_TRUE(ptx.ok()) << heads << " x " << rows << ": " << ptx.status().message();
      const bool few = c.decodeColumns() <= 16;
      EXPECT_EQ(ptx->find("mma.sync.aligned.m16n8k16") != std::string::npos, few) << heads << " x " << rows;
      EXPECT_EQ(ptx->find("wgmma.mma_async") != std::string::npos, !few) << heads << " x " << rows;
    }
}

// The fuzz target's entry (tile text in, encoded text out): a kernel's layouts as the pass gives
// them, the same text when run on its own output, and bad text or warps an error, not a crash.
TEST(Sm90Layouts, TextInTextOut) {
  auto k = kernels::buildKernel(kernels::KernelKind::ScoreDecode,
                                (*tuning::tuningFor("sm_90"))->configFor(kernels::KernelKind::ScoreDecode, 4, 4));
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto text = tile::tileText(*k);
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto once = lowering::assignSm90LayoutsToText(*text);
  ASSERT_TRUE(once.ok()) << once.status().message();
  EXPECT_NE(once->find("-> tensor<256xf32, #m3idx.layout<mma_acc>>"), std::string::npos) << *once;
  auto twice = lowering::assignSm90LayoutsToText(*once);
  ASSERT_TRUE(twice.ok()) << twice.status().message();
  EXPECT_EQ(*twice, *once);
  EXPECT_FALSE(lowering::assignSm90LayoutsToText("func.func @f(").ok());
  auto badWarps = lowering::assignSm90LayoutsToText("func.func @f() attributes {m3idx.warps = 0 : i64} { return }");
  ASSERT_FALSE(badWarps.ok());
  EXPECT_NE(badWarps.status().message().find("has m3idx.warps 0"), std::string::npos) << badWarps.status().message();
}

// A staged loop's hand-over joins its values' groups: packed keys and scales loaded by the
// producer, decoded by the consumer into a dot's A operand, keep mma fragment order on both sides
// of the stage (else the stage would convert them, which sm_90 cannot).
TEST(Sm90Layouts, StagedKeysKeepFragmentOrderAcrossTheStage) {
  dsl::KernelBuilder b("k");
  dsl::Buffer kv = b.buffer("kv", dsl::Elem::I8, dsl::Access::Read);
  dsl::Buffer out = b.buffer("out", dsl::Elem::F32, dsl::Access::Write);
  dsl::Value q = b.convert(OpKind::Bitcast, b.loadTile(kv, b.constInt(0), 4 * 128), dsl::Elem::F8E4M3FN);
  b.stagedFor(
      b.constInt(0), b.constInt(4), 2, {},
      [&](dsl::Value i) {
        return dsl::Values{b.loadTile(kv, i * 1152, 1024, 16), b.loadTile(kv, i * 1152 + 1024, 128, 16)};
      },
      [&](dsl::Value i, const dsl::Values &staged, const dsl::Values &) {
        dsl::Value best = b.reduceMaxGroups(b.dotTiles(b.decodeNvfp4(staged[0], staged[1]), q, 128), 4);
        b.store(out, i, b.extract(best, 0));
        return dsl::Values{};
      });
  auto k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  const std::vector<Spread> s = spreads(*k);
  const dsl::Op &stage = only(*k, OpKind::Stage);
  for (int j = 0; j < 2; ++j) {
    EXPECT_EQ(s[stage.operands[j].id], Spread::MmaRows) << j;
    EXPECT_EQ(s[stage.results[j].id], Spread::MmaRows) << j;
  }
  EXPECT_EQ(s[only(*k, OpKind::DotTiles).results[0].id], Spread::MmaAcc);
}
