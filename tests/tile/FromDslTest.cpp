// The DSL as the tile dialect (tile/FromDsl.cpp): every kernel config of every target's table
// converts, verifies and parses back to the same text; a kernel of the ops no indexer kernel uses
// converts too, one op each; bad text is an error naming the problem.
#include <gtest/gtest.h>

#include "dsl/Builder.h"
#include "kernels_src/KernelCatalog.h"
#include "tile/TileText.h"
#include "tuning/TargetRegistry.h"

using namespace m3idx;
using namespace m3idx::dsl;

namespace {

int count(const std::string &text, const std::string &what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace

TEST(TileFromDsl, EveryKernelConfigRoundTrips) {
  int configs = 0;
  for (const tuning::TargetInfo &t : tuning::targets())
    for (kernels::KernelKind kind : kernels::allKernels())
      for (int heads : {1, 2, 4})
        for (int rows = 1; rows <= 8; ++rows) {
          kernels::KernelConfig c = t.tuning().configFor(kind, heads, rows);
          auto k = kernels::buildKernel(kind, c);
          ASSERT_TRUE(k.ok()) << k.status().message();
          auto text = tile::tileText(*k);
          ASSERT_TRUE(text.ok()) << t.name << " " << kernels::kernelName(kind) << " " << c.str() << ": "
                                 << text.status().message();
          auto again = tile::reprintTileText(*text);
          ASSERT_TRUE(again.ok()) << again.status().message();
          EXPECT_EQ(*again, *text) << kernels::kernelName(kind) << " " << c.str();
          ++configs;
        }
  EXPECT_EQ(configs, 3 * 5 * 3 * 8);
}

// The DSL ops the indexer kernels do not use (float conversions, clamps, dynamic extracts, sums,
// plain dots, float compares), each as its one tile-dialect or arith op.
TEST(TileFromDsl, OpsNoKernelUsesConvertOneToOne) {
  KernelBuilder b("rest");
  Buffer in = b.buffer("in", Elem::F32, Access::Read);
  Buffer bytes = b.buffer("bytes", Elem::I8, Access::Read);
  Buffer out = b.buffer("out", Elem::F32, Access::Write);
  Value n = b.scalarArg("n", Elem::I64);
  Value t = b.loadTile(in, b.constInt(0), 16);
  Value keys = b.decodeNvfp4(b.loadTile(bytes, b.constInt(0), 64), b.loadTile(bytes, b.constInt(64), 8));
  Value wide = b.convert(OpKind::ExtF, keys, Elem::F32);
  Value narrow = b.convert(OpKind::TruncF, b.clampF(wide, 448.0), Elem::F8E4M3FN);
  Value f = b.convert(OpKind::SIToFP, n, Elem::F32);
  Value s = b.reduceAdd(t) + b.dot(t, t) + b.extractAt(t, n % 16) + f;
  Value nan = b.cmp(OpKind::CmpUnordF, s, s), same = b.cmp(OpKind::CmpEqF, s, s), le = n <= 3;
  Value pick = b.select(b.select(nan, same, le), s, b.reduceMax(b.convert(OpKind::ExtF, narrow, Elem::F32)));
  b.store(out, b.constInt(0), pick);
  auto k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto text = tile::tileText(*k);
  ASSERT_TRUE(text.ok()) << text.status().message();
  for (const char *op : {"m3idx.decode_nvfp4", "m3idx.clampf", "m3idx.reduce_add", "m3idx.dot ", "m3idx.extract_at",
                         "m3idx.reduce_max ", "arith.sitofp", "arith.truncf", "arith.cmpf uno", "arith.cmpf oeq",
                         "arith.cmpi sle"})
    EXPECT_EQ(count(*text, op), 1) << op << "\n" << *text;
  EXPECT_EQ(count(*text, "arith.extf"), 2) << *text;
}

TEST(TileFromDsl, BadTextIsAnErrorNamingIt) {
  auto bad = tile::reprintTileText("func.func @f(%t: tensor<4xf32>) {\n"
                                   "  %e = m3idx.extract %t[9] : tensor<4xf32> -> f32\n  return\n}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("lane 9 out of [0, 4)"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(tile::reprintTileText("m3idx.no_such_op").ok());
  EXPECT_FALSE(tile::reprintTileText(std::string("\0\xff", 2)).ok());
}
