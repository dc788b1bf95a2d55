// The host lowering of tiles wider than a 64-lane piece (lowering/host/HostTiles.cpp, used by the
// host patterns in lowering/host/HostOpPatterns.cpp): every op kind on wide tiles, with tails,
// against values computed here; no emitted vector wider than a piece for any kernel config; code
// size bounded on a CPU without AVX-512.
#include <cmath>
#include <limits>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "dsl/Builder.h"
#include "kernels_src/KernelCatalog.h"
#include "tuning/TargetTuning.h"
#include "lowering/host/HostCompiler.h"
#include "runtime/KernelArgs.h"

using namespace m3idx;
using namespace m3idx::dsl;

namespace {

constexpr int kInts = 300, kIntStride = 1000, kFloats = 1024, kFloatStride = 2048;

int32_t intInput(int p, int j) { return (j * 13 + p * 5) % 97 - 40; }
float floatInput(int p, int i) {
  return i == 5 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>((i * 37 + p * 11) % 23 - 11);
}
int32_t shuffleSource(int j) { return (j * 7) % (2 * kInts); }

// One program per p: 300-lane i32 tiles (two pieces and a 44-lane tail) through loads, a masked
// load, elementwise ops, a permutation of two tiles, a loop that swaps two wide iter args, a branch
// yielding a wide tile, reductions, lane reads, a store, a scatter and a masked gather; 1024-lane f32 tiles through
// fold.max (within pieces and across them), group and whole maxima (NaN dropped) and a dot.
StatusOr<Kernel> wideOpsKernel() {
  KernelBuilder b("wide_ops");
  Buffer in = b.buffer("in", Elem::I32, Access::Read);
  Buffer fin = b.buffer("fin", Elem::F32, Access::Read);
  Buffer out = b.buffer("out", Elem::I32, Access::Write);
  Buffer fout = b.buffer("fout", Elem::F32, Access::Write);
  Value p = b.programId();
  Value x = b.loadTile(in, p * kInts, kInts);
  Value xm = b.loadTile(in, p * kInts, kInts, b.constInt(250));
  Value y = b.binary(OpKind::Add, x, b.convert(OpKind::Trunc, b.iota(kInts), Elem::I32));
  Value z = b.select(b.cmp(OpKind::CmpGtS, y, b.splat(b.constInt(100, Elem::I32), kInts)), y, xm);
  std::vector<int32_t> mask;
  for (int j = 0; j < kInts; ++j)
    mask.push_back(shuffleSource(j));
  Value r = b.shuffle(z, x, mask);
  Values l = b.forLoop(b.constInt(0), b.constInt(3), b.constInt(1),
                       {r, z, b.splat(b.constInt(0, Elem::I32), kInts)}, [&](Value, const Values &it) {
                         return Values{it[1], it[0], b.binary(OpKind::Add, it[2], it[0])};
                       });
  Value w = b.ifElse(p == b.constInt(0), [&] { return Values{l[2]}; }, [&] { return Values{l[0]}; })[0];
  Value base = p * kIntStride;
  b.storeTile(out, base, w);
  b.store(out, base + 300, b.reduceAdd(w));
  b.store(out, base + 301, b.extract(w, kInts - 1));
  b.store(out, base + 302, b.extractAt(w, p + 5));
  Value lane = b.iota(kInts);
  Value even = b.cmp(OpKind::CmpEq, lane % 2, b.splat(b.constInt(0), kInts));
  b.storeScatter(out, b.splat(base + 400 + (kInts - 1), kInts) - lane, w, even);
  b.storeTile(out, base + 700, b.loadGather(in, (lane * 7) % kInts + p * kInts, lane % 3 != 0));

  Value f = b.loadTile(fin, p * kFloats, kFloats);
  Value fb = b.loadTile(fin, p * kFloats + kFloats / 2, kFloats / 2);
  Value f1 = b.foldMax(f, 1), f2 = b.foldMax(f, 256);
  Value fbase = p * kFloatStride;
  b.storeTile(fout, fbase, f1);
  b.storeTile(fout, fbase + 512, f2);
  b.storeTile(fout, fbase + 1024, b.reduceMaxGroups(f1, 32));
  b.store(fout, fbase + 1056, b.reduceMax(f));
  b.store(fout, fbase + 1057, b.dot(fb, fb));
  return b.finish();
}

float fmaxf_(float a, float b) { return std::fmax(a, b); }

TEST(HostTiles, EveryOpOnWideTilesMatchesItsDefinition) {
  auto k = wideOpsKernel();
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto kernel = lowering::compileHostKernel(*k);
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();
  constexpr int kPrograms = 2;
  std::vector<int32_t> in(kPrograms * kInts), out(kPrograms * kIntStride, -7);
  std::vector<float> fin(kPrograms * kFloats), fout(kPrograms * kFloatStride, -7.0f);
  for (int p = 0; p < kPrograms; ++p) {
    for (int j = 0; j < kInts; ++j)
      in[p * kInts + j] = intInput(p, j);
    for (int i = 0; i < kFloats; ++i)
      fin[p * kFloats + i] = floatInput(p, i);
  }
  runtime::KernelArgs args;
  args.buffer(in.data(), in.size()).buffer(fin.data(), fin.size()).buffer(out.data(), out.size());
  args.buffer(fout.data(), fout.size());
  args.call(**kernel, 0, kPrograms);

  for (int p = 0; p < kPrograms; ++p) {
    std::vector<int32_t> z(kInts), both(2 * kInts), w(kInts);
    for (int j = 0; j < kInts; ++j) {
      const int32_t x = intInput(p, j), y = x + j;
      z[j] = y > 100 ? y : (j < 250 ? x : 0);
      both[j] = z[j];
      both[kInts + j] = x;
    }
    int64_t sum = 0;
    for (int j = 0; j < kInts; ++j) {
      const int32_t r = both[shuffleSource(j)];
      w[j] = p == 0 ? 2 * r + z[j] : z[j]; // three trips: (r, z, 0) -> (z, r, r) -> (r, z, r + z) -> (z, r, 2r + z)
      sum += w[j];
      ASSERT_EQ(out[p * kIntStride + j], w[j]) << "program " << p << ", lane " << j;
      ASSERT_EQ(out[p * kIntStride + 400 + (kInts - 1 - j)], j % 2 == 0 ? w[j] : -7) << "scatter lane " << j;
      ASSERT_EQ(out[p * kIntStride + 700 + j], j % 3 != 0 ? intInput(p, (j * 7) % kInts) : 0) << "gather lane " << j;
    }
    EXPECT_EQ(out[p * kIntStride + 300], static_cast<int32_t>(sum));
    EXPECT_EQ(out[p * kIntStride + 301], w[kInts - 1]);
    EXPECT_EQ(out[p * kIntStride + 302], w[p + 5]);

    std::vector<float> f(kFloats), f1(kFloats / 2), f2(kFloats / 2);
    for (int i = 0; i < kFloats; ++i)
      f[i] = floatInput(p, i);
    for (int i = 0; i < kFloats; ++i) {
      if ((i & 1) == 0)
        f1[i / 2] = fmaxf_(f[i], f[i + 1]);
      if ((i & 256) == 0)
        f2[(i / 512) * 256 + i % 256] = fmaxf_(f[i], f[i + 256]);
    }
    const float *got = &fout[p * kFloatStride];
    float all = -std::numeric_limits<float>::infinity(), dot = 0;
    for (int i = 0; i < kFloats / 2; ++i) {
      ASSERT_EQ(got[i], f1[i]) << "fold 1, lane " << i;
      ASSERT_EQ(got[512 + i], f2[i]) << "fold 256, lane " << i;
      dot += f[kFloats / 2 + i] * f[kFloats / 2 + i];
    }
    for (int g = 0; g < 32; ++g) {
      float m = -std::numeric_limits<float>::infinity();
      for (int i = 0; i < 16; ++i)
        m = fmaxf_(m, f1[g * 16 + i]);
      ASSERT_EQ(got[1024 + g], m) << "group " << g;
    }
    for (float v : f)
      all = fmaxf_(all, v);
    EXPECT_EQ(got[1056], all);
    EXPECT_EQ(got[1057], dot); // small integers: exact in any order
  }
}

// Every config a host step can use, and sm_90's prefill form, which the tests run on the host.
std::vector<std::pair<kernels::KernelKind, kernels::KernelConfig>> everyHostConfig() {
  std::vector<std::pair<kernels::KernelKind, kernels::KernelConfig>> configs;
  for (int heads : {1, 2, 4})
    for (kernels::KernelKind kind : kernels::allKernels()) {
      for (int q = 1; q <= 8; ++q)
        configs.push_back({kind, tuning::hostTuning().configFor(kind, heads, q)});
      configs.push_back({kind, (*tuning::tuningFor("sm_90"))->configFor(kind, heads, 4)});
    }
  return configs;
}

// Straight-line wide vectors are what made compile time grow with tiles (a 2048-byte masked load
// scalarized into 2048 branches without AVX-512BW): no emitted vector is wider than a piece, or a
// dot_tiles row (128 lanes).
TEST(HostTiles, NoEmittedVectorIsWiderThanAPiece) {
  const std::regex vectorType("vector<([0-9]+)x");
  for (const auto &[kind, config] : everyHostConfig()) {
    auto k = kernels::buildKernel(kind, config);
    ASSERT_TRUE(k.ok()) << k.status().message();
    auto mlir = lowering::hostStage(*k, lowering::Stage::Mlir);
    ASSERT_TRUE(mlir.ok()) << mlir.status().message();
    for (std::sregex_iterator it(mlir->begin(), mlir->end(), vectorType), end; it != end; ++it)
      ASSERT_LE(std::stol((*it)[1]), 128) << kernels::kernelName(kind) << " " << config.str() << ": " << it->str();
  }
}

// Compiled for a CPU with AVX2 and no AVX-512 (where the unbounded form took 24 s for
// score_prefill and 412 KB objects for sm_90's form), the widest kernel stays small.
TEST(HostTiles, CodeStaysSmallWithoutAvx512) {
  auto k = kernels::buildKernel(kernels::KernelKind::ScorePrefill,
                                (*tuning::tuningFor("sm_90"))->configFor(kernels::KernelKind::ScorePrefill, 1, 4));
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto object = lowering::compileHostObject(*k, nullptr, "x86-64-v3");
  ASSERT_TRUE(object.ok()) << object.status().message();
  EXPECT_LT(object->bytes.size(), 160u * 1024);
}

// A wide form the host lowering does not take is an error naming it, never wrong code.
TEST(HostTiles, UnsupportedWideFormIsAnError) {
  KernelBuilder b("wide_groups");
  Buffer in = b.buffer("in", Elem::F32, Access::Read);
  Buffer out = b.buffer("out", Elem::F32, Access::Write);
  b.storeTile(out, b.constInt(0), b.reduceMaxGroups(b.loadTile(in, b.constInt(0), 256), 2)); // 128 a group
  auto k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto compiled = lowering::compileHostKernel(*k);
  ASSERT_FALSE(compiled.ok());
  EXPECT_NE(compiled.status().message().find("reduce.max.groups of 128 lanes per group"), std::string::npos)
      << compiled.status().message();
}

TEST(HostTiles, UnknownCpuIsAnError) {
  auto k = kernels::buildKernel(kernels::KernelKind::TopkPrefill, tuning::hostTuning().configFor(kernels::KernelKind::TopkPrefill, 1, 4));
  ASSERT_TRUE(k.ok());
  auto object = lowering::compileHostObject(*k, nullptr, "no-such-cpu");
  ASSERT_FALSE(object.ok());
  EXPECT_NE(object.status().message().find("unknown CPU 'no-such-cpu'"), std::string::npos) << object.status().message();
}

} // namespace

// A staged loop (DSL stagedFor) on the host: the roles trip by trip, wide tiles and a scalar
// handed over (a stack buffer's tile forwarded by the stage), equal to the sums computed here.
TEST(HostTiles, StagedLoopHandsWideTilesOverTripByTrip) {
  KernelBuilder b("staged");
  Buffer inBuf = b.buffer("in", Elem::I32, Access::Read);
  Buffer outBuf = b.buffer("out", Elem::I32, Access::Write);
  Value p = b.programId();
  constexpr int kTrips = 5;
  Values sums = b.stagedFor(
      b.constInt(0), b.constInt(kTrips), 3, {b.splat(b.constInt(0, Elem::I32), kInts), b.constInt(0)},
      [&](Value i) {
        Value x = b.loadTile(inBuf, (p * kTrips + i) * kInts, kInts);
        return Values{b.binary(OpKind::Add, x, x), i * i};
      },
      [&](Value, const Values &staged, const Values &acc) {
        return Values{b.binary(OpKind::Add, acc[0], staged[0]), acc[1] + staged[1]};
      });
  b.storeTile(outBuf, p * (kInts + 1), sums[0]);
  b.store(outBuf, p * (kInts + 1) + kInts, sums[1].to(Elem::I32));
  auto k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto kernel = lowering::compileHostKernel(*k);
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();
  constexpr int kPrograms = 2;
  std::vector<int32_t> in(kPrograms * kTrips * kInts), out(kPrograms * (kInts + 1), -7);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<int32_t>(i % 1009) - 300;
  runtime::KernelArgs args;
  args.buffer(in.data(), in.size()).buffer(out.data(), out.size());
  args.call(**kernel, 0, kPrograms);
  for (int p = 0; p < kPrograms; ++p) {
    for (int j = 0; j < kInts; ++j) {
      int32_t want = 0;
      for (int i = 0; i < kTrips; ++i)
        want += 2 * in[(p * kTrips + i) * kInts + j];
      ASSERT_EQ(out[p * (kInts + 1) + j], want) << "program " << p << ", lane " << j;
    }
    EXPECT_EQ(out[p * (kInts + 1) + kInts], 0 + 1 + 4 + 9 + 16);
  }
}
