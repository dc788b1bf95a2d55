// topk.pack_key compiled for the host, on scalars and lane by lane on a tile (the top-k packs a
// step's 32 keys at once), against core's SPEC §5 key: NaN as -inf, -0 as +0, the ordered bits
// above the block id, on special values and random bit patterns.
#include <bit>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "core/TopkKey.h"
#include "dsl/Builder.h"
#include "lowering/host/HostCompiler.h"
#include "runtime/KernelArgs.h"

using namespace m3idx;
using namespace m3idx::dsl;

TEST(PackScoreKey, TileAndScalarFormsMatchTheSpecKey) {
  constexpr int kLanes = 32;
  KernelBuilder b("pack_keys");
  Buffer scores = b.buffer("scores", Elem::F32, Access::Read);
  Buffer tileKeys = b.buffer("tile_keys", Elem::I64, Access::Write);
  Buffer scalarKeys = b.buffer("scalar_keys", Elem::I64, Access::Write);
  Value base = b.programId() * kLanes;
  Value tile = b.loadTile(scores, base, kLanes);
  // Block ids past 2^32 keep only their low 32 bits, as the scalar form does.
  Value blocks = b.iota(kLanes) + b.splat(base + b.constInt(int64_t{1} << 32), kLanes);
  b.storeTile(tileKeys, base, b.packScoreKey(tile, blocks));
  b.forLoop(b.constInt(0), b.constInt(kLanes), b.constInt(1), {}, [&](Value i, const Values &) {
    b.store(scalarKeys, base + i,
            b.packScoreKey(b.load(scores, base + i), base + i + b.constInt(int64_t{1} << 32)));
    return Values{};
  });
  StatusOr<Kernel> k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto kernel = lowering::compileHostKernel(*k);
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();

  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> in = {0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                           -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                           -std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                           -std::numeric_limits<float>::max(), 1e29f, 1e30f};
  std::mt19937 rng(7);
  while (in.size() % kLanes || in.size() < 4 * kLanes)
    in.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  const int64_t programs = static_cast<int64_t>(in.size()) / kLanes;
  std::vector<int64_t> fromTile(in.size(), -1), fromScalar(in.size(), -1);
  runtime::KernelArgs args;
  args.buffer(in.data(), in.size()).buffer(fromTile.data(), fromTile.size())
      .buffer(fromScalar.data(), fromScalar.size());
  args.call(**kernel, 0, programs);
  for (size_t i = 0; i < in.size(); ++i) {
    const uint64_t want = packScoreKey(in[i], static_cast<int32_t>(i));
    EXPECT_EQ(static_cast<uint64_t>(fromTile[i]), want) << "lane " << i << " score bits 0x" << std::hex
                                                        << std::bit_cast<uint32_t>(in[i]);
    EXPECT_EQ(static_cast<uint64_t>(fromScalar[i]), want) << "element " << i;
  }
}
