// The DSL rejects ill-typed programs with a message naming the op and the types involved.
#include <algorithm>

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
    b.select(b.constInt(1) < b.constInt(2), b.constInt(1), b.constF32(1));
  }, "select: branch types differ (i64 vs f32)");
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

// A masked tile load may promise its address's alignment, as a plain one may; the promise is
// printed and a bad one refused by name.
TEST(DslBuilder, MaskedLoadsCarryTheirAlignment) {
  KernelBuilder b("k");
  Buffer q = b.buffer("q", Elem::I8, Access::Read);
  b.loadTile(q, b.constInt(0), 64, b.constInt(32), 16);
  auto k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_NE(k->print().find("load.tile.masked @q align=16"), std::string::npos) << k->print();
  expectError([](KernelBuilder &b) {
    Buffer q = b.buffer("q", Elem::I8, Access::Read);
    b.loadTile(q, b.constInt(0), 64, b.constInt(32), 12);
  }, "load.tile.masked: alignment must be a power of two up to 16, got 12");
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

TEST(DslBuilder, GatherChecksOffsetsMaskAndBuffer) {
  auto gather = [](int maskLanes, Elem offsetElem, Access access) {
    return [=](KernelBuilder &b) {
      Buffer in = b.buffer("in", Elem::F32, access);
      Value offsets = b.iota(4);
      if (offsetElem != Elem::I64)
        offsets = offsets.to(offsetElem);
      b.loadGather(in, offsets, b.iota(maskLanes) < b.constInt(2));
    };
  };
  expectError(gather(8, Elem::I64, Access::Read), "load.gather: offsets tile<4 x i64> and mask tile<8 x i1>");
  expectError(gather(4, Elem::I32, Access::Read), "load.gather: offsets tile<4 x i32>");
  expectError(gather(4, Elem::I64, Access::Write), "load.gather: buffer is write-only");
  expectError([](KernelBuilder &b) {
    Buffer in = b.buffer("in", Elem::F32, Access::Read);
    b.loadGather(in, b.constInt(0), b.constInt(0) < b.constInt(1));
  }, "load.gather: offsets i64 and mask i1 must be i64 and i1 tiles");
}

// grid.await: once a program, outside loops, before any store; grid.release: once, outside loops.
TEST(DslBuilder, GridOrderOpsAreOnceOutsideLoopsAndAwaitPrecedesStores) {
  auto inLoop = [](bool await) {
    return [=](KernelBuilder &b) {
      b.forLoop(b.constInt(0), b.constInt(2), b.constInt(1), {}, [&](Value, const Values &) {
        await ? b.awaitEarlierGrids() : b.releaseNextGrid();
        return Values{};
      });
    };
  };
  expectError(inLoop(true), "grid.await: inside a loop");
  expectError(inLoop(false), "grid.release: inside a loop");
  expectError([](KernelBuilder &b) { b.awaitEarlierGrids(); b.awaitEarlierGrids(); }, "grid.await: a second one");
  expectError([](KernelBuilder &b) { b.releaseNextGrid(); b.releaseNextGrid(); }, "grid.release: a second one");
  expectError([](KernelBuilder &b) {
    Buffer out = b.buffer("out", Elem::I32, Access::Write);
    b.store(out, b.constInt(0), b.constInt(1, Elem::I32));
    b.awaitEarlierGrids();
  }, "grid.await: after a store");
  KernelBuilder b("k");
  Buffer in = b.buffer("in", Elem::I32, Access::Read), out = b.buffer("out", Elem::I32, Access::Write);
  b.releaseNextGrid();
  Value n = b.load(in, b.constInt(0)); // metadata: before the wait
  b.ifThen(n > b.constInt(0, Elem::I32), [&] {
    b.awaitEarlierGrids();
    b.store(out, b.constInt(0), b.load(in, b.constInt(1)));
  });
  auto k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_TRUE(k->has(OpKind::GridAwait));
  EXPECT_TRUE(k->has(OpKind::GridRelease));
  EXPECT_NE(k->print().find("  grid.release\n"), std::string::npos) << k->print();
  EXPECT_NE(k->print().find("    grid.await\n"), std::string::npos) << k->print();
}

// program.sync: every lane of a program reaches it the same number of times, so not in a loop.
TEST(DslBuilder, ProgramSyncIsOutsideLoops) {
  expectError([](KernelBuilder &b) {
    b.forLoop(b.constInt(0), b.constInt(2), b.constInt(1), {}, [&](Value, const Values &) {
      b.programSync();
      return Values{};
    });
  }, "program.sync: inside a loop");
  KernelBuilder b("k");
  Buffer buf = b.buffer("buf", Elem::I32, Access::ReadWrite);
  b.store(buf, b.constInt(0), b.constInt(1, Elem::I32));
  b.programSync();
  b.store(buf, b.constInt(1), b.load(buf, b.constInt(2)));
  auto k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_TRUE(k->has(OpKind::ProgramSync));
  EXPECT_NE(k->print().find("  program.sync\n"), std::string::npos) << k->print();
}

TEST(DslBuilder, AtomicAddTakesAnIntegerScalarOfAReadWriteBuffer) {
  auto add = [](Elem elem, Access access, Value (*value)(KernelBuilder &)) {
    return [=](KernelBuilder &b) {
      Buffer counts = b.buffer("counts", elem, access);
      b.atomicAdd(counts, b.constInt(0), value(b));
    };
  };
  auto one32 = [](KernelBuilder &b) { return b.constInt(1, Elem::I32); };
  expectError(add(Elem::I32, Access::Write, one32), "atomic.add: buffer is not read_write");
  expectError(add(Elem::I32, Access::Read, one32), "atomic.add: buffer is not read_write");
  expectError(add(Elem::F32, Access::ReadWrite, [](KernelBuilder &b) { return b.constF32(1); }),
              "atomic.add: needs an i32 or i64 scalar into a buffer of its type, got f32 into f32");
  expectError(add(Elem::I32, Access::ReadWrite, [](KernelBuilder &b) { return b.constInt(1); }),
              "got i64 into i32");
  expectError(add(Elem::I32, Access::ReadWrite, [](KernelBuilder &b) { return b.splat(b.constInt(1, Elem::I32), 4); }),
              "got tile<4 x i32> into i32");
  KernelBuilder b("k");
  Buffer counts = b.buffer("counts", Elem::I32, Access::ReadWrite);
  Value old = b.atomicAdd(counts, b.constInt(3), b.constInt(1, Elem::I32));
  b.store(counts, b.constInt(0), old); // a read_write buffer takes stores and loads too
  b.store(counts, b.constInt(1), b.load(counts, b.constInt(2)));
  auto k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_NE(k->print().find("counts: buffer<i32> read_write"), std::string::npos) << k->print();
  EXPECT_NE(k->print().find("atomic.add @counts"), std::string::npos) << k->print();
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

namespace {

// The ops of a kernel built by `body`, in order.
std::vector<Op> opsOf(const std::function<void(KernelBuilder &)> &body) {
  KernelBuilder b("k");
  body(b);
  StatusOr<Kernel> k = b.finish();
  EXPECT_TRUE(k.ok()) << k.status().message();
  return k.ok() ? k->ops : std::vector<Op>{};
}

std::vector<OpKind> kindsOf(const std::vector<Op> &ops) {
  std::vector<OpKind> kinds;
  for (const Op &op : ops)
    kinds.push_back(op.kind);
  return kinds;
}

} // namespace

// A scalar beside a tile is splat to its lanes (binary, compare, select's branches), in the op
// order a kernel writing the splat by hand gets; the result is a tile.
TEST(DslBuilder, ScalarsBroadcastToTiles) {
  Type sum, less, chosen;
  auto ops = opsOf([&](KernelBuilder &b) {
    Value lanes = b.iota(8);
    sum = (lanes + b.constInt(3)).type();
    less = (lanes < 2).type();
    Value cond = lanes < 2, one = b.constF32(1), zero = b.constF32(0); // (argument order is the compiler's)
    chosen = b.select(cond, one, zero).type();
  });
  EXPECT_EQ(sum, tile(Elem::I64, 8));
  EXPECT_EQ(less, tile(Elem::I1, 8));
  EXPECT_EQ(chosen, tile(Elem::F32, 8));
  const std::vector<OpKind> want = {OpKind::Iota,     OpKind::ConstInt, OpKind::Splat,      OpKind::Add,
                                    OpKind::ConstInt, OpKind::Splat,    OpKind::CmpLtS,     OpKind::ConstInt,
                                    OpKind::Splat,    OpKind::CmpLtS,   OpKind::ConstFloat, OpKind::ConstFloat,
                                    OpKind::Splat,    OpKind::Splat,    OpKind::Select};
  EXPECT_EQ(kindsOf(ops), want);
}

TEST(DslBuilder, BitOperatorsAndUnsignedCompares) {
  auto ops = opsOf([](KernelBuilder &b) {
    Value x = b.constInt(6, Elem::I32);
    (void)(x ^ 3);
    (void)(x << 2);
    (void)(x != 1);
    (void)shrU(x, 1);
    (void)gtU(x, b.constInt(-1, Elem::I32));
    (void)ltU(x, b.constInt(-1, Elem::I32));
  });
  std::vector<OpKind> ops2;
  for (OpKind k : kindsOf(ops))
    if (k != OpKind::ConstInt)
      ops2.push_back(k);
  const std::vector<OpKind> want = {OpKind::Xor, OpKind::Shl, OpKind::CmpNe, OpKind::ShrU, OpKind::CmpGtU,
                                    OpKind::CmpGtU};
  EXPECT_EQ(ops2, want);
  // ltU(a, b) is gtU(b, a): the operands swap
  ASSERT_EQ(ops.back().kind, OpKind::CmpGtU);
  EXPECT_EQ(ops.back().operands[1].id, ops[0].results[0].id);
}

// .to(e) picks the conversion that keeps the value; a float is never made an integer.
TEST(DslBuilder, ToPicksTheConversion) {
  std::vector<Type> types;
  auto ops = opsOf([&](KernelBuilder &b) {
    Value i32 = b.constInt(5, Elem::I32);
    types = {i32.to(Elem::I64).type(), i32.to(Elem::I64).to(Elem::I32).type(), i32.to(Elem::F32).type(),
             b.constF32(1).to(Elem::F8E4M3FN).to(Elem::F32).type(), i32.to(Elem::I32).type()};
  });
  const std::vector<OpKind> want = {OpKind::ConstInt, OpKind::ExtS,       OpKind::ExtS,  OpKind::Trunc,
                                    OpKind::SIToFP,   OpKind::ConstFloat, OpKind::TruncF, OpKind::ExtF};
  EXPECT_EQ(kindsOf(ops), want);
  EXPECT_EQ(types.back(), scalar(Elem::I32));
  expectError([](KernelBuilder &b) { b.constF32(1).to(Elem::I32); }, "cannot convert f32 to i32");
}

// Every op knows the kernel line that built it: builder calls and operators alike, a for body's
// ops their own lines (not the for's), the splat a broadcast adds its expression's line.
TEST(DslBuilder, OpsCarryTheirKernelLine) {
  int lines[4] = {};
  auto ops = opsOf([&](KernelBuilder &b) {
    Value lanes = b.iota(4); lines[0] = __LINE__;
    Value sum = lanes + b.constInt(1); lines[1] = __LINE__;
    b.forLoop(b.constInt(0), b.constInt(4), b.constInt(1), {sum}, [&](Value, const Values &it) {
      Value next = it[0] * 2; lines[2] = __LINE__;
      return Values{next};
    }); lines[3] = __LINE__;
  });
  ASSERT_FALSE(ops.empty());
  for (const Op &op : ops) {
    ASSERT_TRUE(op.loc.known()) << opName(op.kind);
    EXPECT_NE(std::string(op.loc.file).find("BuilderTest.cpp"), std::string::npos) << op.loc.file;
  }
  EXPECT_EQ(ops[0].loc.line, static_cast<uint32_t>(lines[0])); // iota
  EXPECT_EQ(ops[3].loc.line, static_cast<uint32_t>(lines[1])); // add (after const, splat)
  EXPECT_EQ(ops[2].loc.line, static_cast<uint32_t>(lines[1])); // the broadcast's splat
  for (const Op &op : ops) {
    if (op.kind == OpKind::Mul)
      EXPECT_EQ(op.loc.line, static_cast<uint32_t>(lines[2]));
    if (op.kind == OpKind::For)
      EXPECT_EQ(op.loc.line, static_cast<uint32_t>(lines[3] - 3)); // where the call begins
  }
}

// pipelinedFor expands into the hand-written software pipeline: the first trip's load before the
// loop, the next trip's load first in each trip (carried after the iteration values), the work
// on the carried load; only the iteration values come back.
TEST(DslBuilder, PipelinedForLoadsOneTripAhead) {
  size_t results = 0;
  int loadLine = 0;
  auto ops = opsOf([&](KernelBuilder &b) {
    Buffer in = b.buffer("in", Elem::F32, Access::Read);
    Buffer out = b.buffer("out", Elem::F32, Access::Write);
    Value n = b.constInt(8);
    Values r = b.pipelinedFor(
        b.constInt(0), n, b.constInt(1), {b.constF32(0)},
        [&](Value i) { loadLine = __LINE__; return Values{b.loadTile(in, i * 4, 4, (n - i) * 4)}; },
        [&](Value, const Values &tile, const Values &acc) { return Values{acc[0] + b.reduceAdd(tile[0])}; });
    results = r.size();
    b.store(out, b.constInt(0), r[0]);
  });
  EXPECT_EQ(results, 1u);
  std::vector<const Op *> loads, fors;
  for (const Op &op : ops) {
    if (op.kind == OpKind::LoadTileMasked)
      loads.push_back(&op);
    if (op.kind == OpKind::For)
      fors.push_back(&op);
  }
  ASSERT_EQ(loads.size(), 2u); // before the loop, and the next trip's inside it
  ASSERT_EQ(fors.size(), 1u);
  EXPECT_EQ(fors[0]->results.size(), 2u); // the sum and the carried tile
  EXPECT_EQ(fors[0]->operands.size(), 5u); // lo, hi, step, the sum's init, the first tile
  EXPECT_EQ(loads[0]->loc.line, static_cast<uint32_t>(loadLine));
  EXPECT_EQ(loads[1]->loc.line, static_cast<uint32_t>(loadLine));
  // In the body, the next trip's load comes before the work (the reduce of the carried tile).
  const Region &body = fors[0]->regions[0];
  int loadAt = -1, reduceAt = -1;
  for (size_t i = 0; i < body.ops.size(); ++i) {
    if (ops[body.ops[i]].kind == OpKind::LoadTileMasked)
      loadAt = static_cast<int>(i);
    if (ops[body.ops[i]].kind == OpKind::ReduceAdd)
      reduceAt = static_cast<int>(i);
  }
  EXPECT_GE(loadAt, 0);
  EXPECT_LT(loadAt, reduceAt);
  EXPECT_EQ(ops[body.ops[reduceAt]].operands[0].id, body.args[2].id); // the carried tile
}

// stagedFor is a loop whose body is the producer's ops, one stage op handing their values over
// (stages as its attribute), then the consumer's ops on the stage's results.
TEST(DslBuilder, StagedForHandsTheProducersValuesOverInOneStage) {
  auto ops = opsOf([&](KernelBuilder &b) {
    Buffer in = b.buffer("in", Elem::F32, Access::Read);
    Buffer out = b.buffer("out", Elem::F32, Access::Write);
    Values r = b.stagedFor(
        b.constInt(0), b.constInt(8), 3, {b.constF32(0)},
        [&](Value i) { return Values{b.loadTile(in, i * 4, 4), i * 2}; },
        [&](Value, const Values &staged, const Values &acc) {
          b.store(out, staged[1], acc[0]);
          return Values{acc[0] + b.reduceAdd(staged[0])};
        });
    ASSERT_EQ(r.size(), 1u);
    b.store(out, b.constInt(0), r[0]);
  });
  const Op *loop = nullptr;
  for (const Op &op : ops)
    if (op.kind == OpKind::For)
      loop = &op;
  ASSERT_NE(loop, nullptr);
  const Region &body = loop->regions[0];
  std::vector<OpKind> kinds;
  for (int32_t i : body.ops)
    kinds.push_back(ops[i].kind);
  const auto stage = std::find(kinds.begin(), kinds.end(), OpKind::Stage);
  ASSERT_NE(stage, kinds.end());
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), OpKind::Stage), 1);
  const Op &st = ops[body.ops[stage - kinds.begin()]];
  EXPECT_EQ(st.intAttr, 3);
  ASSERT_EQ(st.operands.size(), 2u);
  ASSERT_EQ(st.results.size(), 2u);
  // Before it the load (the producer's), after it the store and the reduce, which read its results.
  EXPECT_NE(std::find(kinds.begin(), stage, OpKind::LoadTile), stage);
  EXPECT_EQ(std::find(kinds.begin(), stage, OpKind::Store), stage);
  for (auto it = stage + 1; it != kinds.end(); ++it) {
    const Op &op = ops[body.ops[it - kinds.begin()]];
    if (op.kind == OpKind::ReduceAdd)
      EXPECT_EQ(op.operands[0].id, st.results[0].id);
    if (op.kind == OpKind::Store)
      EXPECT_EQ(op.operands[0].id, st.results[1].id);
  }
}

// The producer runs ahead of the consumer (on other warps where a target has them): it may load
// and compute, not store, branch, loop or nest another stage; stages are 2 to 8.
TEST(DslBuilder, StagedForProducerOnlyLoadsAndComputes) {
  auto staged = [](KernelBuilder &b, int stages, const std::function<void(Buffer, Value)> &extra) {
    Buffer io = b.buffer("io", Elem::F32, Access::ReadWrite);
    b.stagedFor(
        b.constInt(0), b.constInt(4), stages, {},
        [&](Value i) {
          extra(io, i);
          return Values{b.load(io, i)};
        },
        [&](Value i, const Values &v, const Values &) {
          b.store(io, i, v[0]);
          return Values{};
        });
  };
  expectError([&](KernelBuilder &b) { staged(b, 2, [&](Buffer io, Value i) { b.store(io, i, b.constF32(1)); }); },
              "staged for: the producer may not store (it only loads and computes)");
  expectError([&](KernelBuilder &b) {
    staged(b, 2, [&](Buffer io, Value i) { b.ifThen(i == 0, [&] { (void)b.load(io, i); }); });
  }, "staged for: the producer may not if");
  expectError([&](KernelBuilder &b) {
    staged(b, 2, [&](Buffer, Value i) {
      b.forLoop(b.constInt(0), i, b.constInt(1), {}, [](Value, const Values &) { return Values{}; });
    });
  }, "staged for: the producer may not for");
  expectError([&](KernelBuilder &b) { staged(b, 1, [](Buffer, Value) {}); }, "staged for: stages must be 2 to 8, got 1");
  expectError([&](KernelBuilder &b) { staged(b, 9, [](Buffer, Value) {}); }, "staged for: stages must be 2 to 8, got 9");
  EXPECT_EQ(errorOf([&](KernelBuilder &b) { staged(b, 8, [](Buffer, Value) {}); }), "");
  expectError([&](KernelBuilder &b) {
    b.stagedFor(b.constInt(0), b.constInt(4), 2, {}, [](Value) { return Values{}; },
                [](Value, const Values &, const Values &) { return Values{}; });
  }, "staged for: the producer stages no value");
}

// A rows x heads x tokens view of a tile's lanes: each lane's coordinates, from one iota, as the
// divisions and remainders a kernel would write (none where a stride or the first dim needs none).
TEST(DslBuilder, TileShapeIndexesRowsHeadsAndTokens) {
  std::vector<OpKind> kinds;
  std::string error = errorOf([&](KernelBuilder &b) {
    TileShape lanes(b, {4, 2, 16});
    EXPECT_EQ(lanes.lanes(), 128);
    Value row = lanes.index(0), head = lanes.index(1), token = lanes.index(2);
    EXPECT_EQ(row.type(), tile(Elem::I64, 128));
    (void)head;
    (void)token;
    TileShape narrow(b, {4, 16}, Elem::I32);
    EXPECT_EQ(narrow.index(1).type(), tile(Elem::I32, 64));
  });
  EXPECT_EQ(error, "");
  auto ops = opsOf([](KernelBuilder &b) {
    TileShape lanes(b, {4, 2, 16});
    (void)lanes.index(0); // iota / 32
    (void)lanes.index(1); // iota / 16 % 2
    (void)lanes.index(2); // iota % 16
  });
  std::vector<OpKind> want = {OpKind::Iota,     OpKind::ConstInt, OpKind::Splat, OpKind::DivS,
                              OpKind::ConstInt, OpKind::Splat,    OpKind::DivS,  OpKind::ConstInt,
                              OpKind::Splat,    OpKind::RemS,     OpKind::ConstInt, OpKind::Splat,
                              OpKind::RemS};
  EXPECT_EQ(kindsOf(ops), want);
  EXPECT_EQ(ops[1].intAttr, 32);
  EXPECT_EQ(ops[4].intAttr, 16);
  EXPECT_EQ(ops[7].intAttr, 2);
  EXPECT_EQ(ops[10].intAttr, 16);
  expectError([](KernelBuilder &b) { TileShape(b, {4, 4}).index(2); }, "tile shape: no dim 2 in a shape of 2 dims");
}
