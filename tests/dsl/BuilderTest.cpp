// The DSL rejects ill-typed programs with a message naming the op and the types involved.
#include <gtest/gtest.h>

#include "dsl/Builder.h"

using namespace m3idx;
using namespace m3idx::dsl;

namespace {

std::string errorOf(const std::function<void(KernelBuilder &)> &body) {
  KernelBuilder b("bad");
  body(b);
  StatusOr<Kernel> k = b.finish();
  return k.ok() ? "" : k.status().message();
}

void expectError(const std::function<void(KernelBuilder &)> &body, const std::string &needle) {
  std::string msg = errorOf(body);
  ASSERT_FALSE(msg.empty()) << "accepted an ill-typed kernel (" << needle << ")";
  EXPECT_NE(msg.find("kernel @bad"), std::string::npos) << msg;
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
}

} // namespace

TEST(DslBuilder, MismatchedBinaryOperands) {
  expectError([](KernelBuilder &b) { b.constInt(1) + b.constInt(2, Elem::I32); },
              "add: operand types differ (i64 vs i32)");
}

TEST(DslBuilder, FloatOpOnIntegers) {
  expectError([](KernelBuilder &b) { b.maxNumF(b.constInt(1), b.constInt(2)); },
              "maxnumf: needs f32");
}

TEST(DslBuilder, IntegerOpOnFloats) {
  expectError([](KernelBuilder &b) { b.constF32(1) % b.constF32(2); }, "rems: needs integer");
}

TEST(DslBuilder, SelectBranchTypes) {
  expectError([](KernelBuilder &b) {
    b.select(b.constInt(1) < b.constInt(2), b.constInt(1), b.splat(b.constInt(1), 4));
  }, "select: branch types differ (i64 vs tile<4 x i64>)");
}

TEST(DslBuilder, SelectConditionType) {
  expectError([](KernelBuilder &b) { b.select(b.constInt(1), b.constInt(1), b.constInt(2)); },
              "select: condition must be i1");
}

TEST(DslBuilder, DecodeNeedsMatchingScaleCount) {
  expectError([](KernelBuilder &b) {
    Buffer kv = b.buffer("kv", Elem::I8, Access::Read);
    b.decodeNvfp4(b.loadTile(kv, b.constInt(0), 64), b.loadTile(kv, b.constInt(0), 4));
  }, "nvfp4.decode: needs packed tile<8k x i8> and scales tile<k x i8>");
}

TEST(DslBuilder, DotNeedsF32Tiles) {
  expectError([](KernelBuilder &b) {
    Buffer q = b.buffer("q", Elem::I8, Access::Read);
    Value t = b.loadTile(q, b.constInt(0), 128);
    b.dot(t, t);
  }, "dot: needs two f32 tiles");
}

TEST(DslBuilder, BadConversions) {
  expectError([](KernelBuilder &b) { b.convert(OpKind::TruncF, b.constInt(3), Elem::F8E4M3FN); },
              "truncf: cannot convert i64 to f8E4M3FN");
  expectError([](KernelBuilder &b) { b.convert(OpKind::ExtS, b.constInt(3), Elem::I32); },
              "exts: cannot convert i64 to i32");
}

TEST(DslBuilder, StoreChecksBufferAccessAndType) {
  expectError([](KernelBuilder &b) {
    Buffer in = b.buffer("in", Elem::F32, Access::Read);
    b.store(in, b.constInt(0), b.constF32(1));
  }, "store: buffer is read-only");
  expectError([](KernelBuilder &b) {
    Buffer out = b.buffer("out", Elem::F32, Access::Write);
    b.store(out, b.constInt(0), b.constInt(1));
  }, "store: value i64 into a buffer of f32");
}

TEST(DslBuilder, ScatterChecksOffsetsMaskAndBuffer) {
  auto scatter = [](int offsetLanes, Elem maskElem, Access access) {
    return [=](KernelBuilder &b) {
      Buffer out = b.buffer("out", Elem::F32, access);
      Value v = b.splat(b.constF32(1), 4);
      Value mask = b.splat(maskElem == Elem::I1 ? b.constInt(0) < b.constInt(1) : b.constInt(0, Elem::I32), 4);
      b.storeScatter(out, b.iota(offsetLanes), v, mask);
    };
  };
  expectError(scatter(8, Elem::I1, Access::Write), "store.scatter: offsets tile<8 x i64>");
  expectError(scatter(4, Elem::I32, Access::Write), "mask tile<4 x i32> must be i64 and i1 tiles");
  expectError(scatter(4, Elem::I1, Access::Read), "store.scatter: buffer is read-only");
}

TEST(DslBuilder, ExtractAtNeedsATileAndAnI64Lane) {
  expectError([](KernelBuilder &b) { b.extractAt(b.iota(4), b.constInt(1, Elem::I32)); },
              "extract.at: needs a tile and an i64 lane, got tile<4 x i64> and i32");
  expectError([](KernelBuilder &b) { b.extractAt(b.constInt(3), b.constInt(0)); },
              "extract.at: needs a tile and an i64 lane, got i64 and i64");
}

TEST(DslBuilder, LoopYieldMustMatchIterArgs) {
  expectError([](KernelBuilder &b) {
    b.forLoop(b.constInt(0), b.constInt(4), b.constInt(1), {b.constF32(0)},
              [&](Value iv, const Values &) { return Values{iv}; });
  }, "for: iter arg 0 is f32 but the body yields i64");
}

TEST(DslBuilder, LoopUnrollHintIsPositiveAndPrinted) {
  expectError([](KernelBuilder &b) {
    b.forLoop(b.constInt(0), b.constInt(4), b.constInt(1), {},
              [&](Value, const Values &) { return Values{}; }, 0);
  }, "for: unroll must be at least 1, got 0");
  // The hint changes the code some targets make, so it is part of the printed kernel (the cache
  // key's source).
  auto print = [](int unroll) {
    KernelBuilder b("ok");
    Buffer out = b.buffer("out", Elem::F32, Access::Write);
    Values r = b.forLoop(b.constInt(0), b.constInt(8), b.constInt(1), {b.constF32(0)},
                         [&](Value, const Values &acc) { return Values{acc[0] + b.constF32(1)}; }, unroll);
    b.store(out, b.programId(), r[0]);
    StatusOr<Kernel> k = b.finish();
    return k.ok() ? k->print() : k.status().message();
  };
  EXPECT_NE(print(4).find(" = for unroll=4 "), std::string::npos) << print(4);
  EXPECT_EQ(print(1).find("unroll"), std::string::npos) << print(1);
}

TEST(DslBuilder, IfBranchesMustAgree) {
  expectError([](KernelBuilder &b) {
    b.ifElse(b.constInt(0) < b.constInt(1), [&] { return Values{b.constInt(1)}; },
             [&] { return Values{b.constF32(1)}; });
  }, "if: result 0 is i64 in then and f32 in else");
}

TEST(DslBuilder, ValuesFromAnotherKernel) {
  KernelBuilder other("other");
  Value foreign = other.constInt(1);
  expectError([&](KernelBuilder &b) { b.constInt(1) + foreign; }, "not a value of this kernel");
}

TEST(DslBuilder, ShuffleLaneRange) {
  expectError([](KernelBuilder &b) {
    Value t = b.splat(b.constInt(1), 4);
    b.shuffle(t, t, {0, 8});
  }, "shuffle: lane 8 out of [0, 8)");
}

TEST(DslBuilder, PackScoreKeyNeedsScoresAndBlocksOfOneShape) {
  expectError([](KernelBuilder &b) {
    b.packScoreKey(b.splat(b.constF32(1.0), 8), b.iota(4));
  }, "topk.pack_key: needs f32 scores and i64 blocks of one shape, got tile<8 x f32> and tile<4 x i64>");
  expectError([](KernelBuilder &b) { b.packScoreKey(b.constF32(1.0), b.iota(4)); },
              "got f32 and tile<4 x i64>");
  expectError([](KernelBuilder &b) { b.packScoreKey(b.iota(4), b.iota(4)); },
              "got tile<4 x i64> and tile<4 x i64>");
}

TEST(DslBuilder, WellTypedKernelPrintsCanonically) {
  auto build = [] {
    KernelBuilder b("ok");
    Buffer out = b.buffer("out", Elem::F32, Access::Write);
    Value n = b.scalarArg("n", Elem::I64);
    Values r = b.forLoop(b.constInt(0), n, b.constInt(1), {b.constF32(0)},
                         [&](Value, const Values &acc) { return Values{acc[0] + b.constF32(1)}; });
    b.store(out, b.programId(), r[0]);
    return b.finish();
  };
  StatusOr<Kernel> a = build(), c = build();
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->print(), c->print());
  EXPECT_NE(a->print().find("kernel @ok(out: buffer<f32> write, n: i64)"), std::string::npos)
      << a->print();
  EXPECT_NE(a->print().find("for "), std::string::npos);
}

// A program's warps are part of the kernel (and its canonical text, so of cache keys); a CTA has
// at most 32 warps.
TEST(DslBuilder, WarpsPerProgram) {
  for (int warps : {0, 33}) {
    KernelBuilder b("w", warps);
    StatusOr<Kernel> k = b.finish();
    ASSERT_FALSE(k.ok()) << warps;
    EXPECT_NE(k.status().message().find("warps per program (expected 1..32)"), std::string::npos);
  }
  KernelBuilder one("w"), four("w", 4);
  EXPECT_EQ(one.finish()->print().find("warps="), std::string::npos);
  EXPECT_NE(four.finish()->print().find("kernel @w() warps=4 {"), std::string::npos) << four.finish()->print();
}

// fold.max halves an f32 tile by pairs d apart (d a power of two whose double divides the lanes)
// and prints its distance.
TEST(DslBuilder, FoldMaxPairs) {
  expectError([](KernelBuilder &b) { b.foldMax(b.splat(b.constF32(1), 16), 3); },
              "fold.max: needs an f32 tile whose lanes are a multiple of 2 x 3 (a power of two), got tile<16 x f32>");
  expectError([](KernelBuilder &b) { b.foldMax(b.splat(b.constF32(1), 24), 16); }, "got tile<24 x f32>");
  expectError([](KernelBuilder &b) { b.foldMax(b.iota(16), 8); }, "got tile<16 x i64>");
  KernelBuilder b("fold");
  Buffer out = b.buffer("out", Elem::F32, Access::Write);
  Value half = b.foldMax(b.splat(b.constF32(1), 32), 8);
  EXPECT_EQ(half.type().lanes, 16);
  b.storeTile(out, b.constInt(0), half);
  StatusOr<Kernel> k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_NE(k->print().find("fold.max pairs=8"), std::string::npos) << k->print();
}
