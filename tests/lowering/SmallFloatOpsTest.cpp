// The DSL's small-float ops compiled for the host (emitter + m3idx-expand-small-floats + LLVM JIT)
// against the scalar numerics: all 4096 (nibble, scale) key bytes through nvfp4.decode, all 256
// E4M3 bytes through extf, and truncf on edge and random inputs.
#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "core/Nvfp4.h"
#include "dsl/Builder.h"
#include "lowering/host/HostCompiler.h"
#include "runtime/KernelArgs.h"

using namespace m3idx;
using namespace m3idx::dsl;

namespace {

std::unique_ptr<lowering::HostKernel> compile(StatusOr<Kernel> k) {
  EXPECT_TRUE(k.ok()) << k.status().message();
  auto compiled = lowering::compileHostKernel(*k);
  EXPECT_TRUE(compiled.ok()) << compiled.status().message();
  return compiled.ok() ? std::move(compiled).value() : nullptr;
}

} // namespace

TEST(SmallFloatOps, AllKeyBytesThroughCompiledDecode) {
  KernelBuilder b("decode_table");
  Buffer in = b.buffer("in", Elem::I8, Access::Read);
  Buffer out = b.buffer("out", Elem::I8, Access::Write);
  Value token = b.programId();
  Value packed = b.loadTile(in, token * 72, 64);
  Value scales = b.loadTile(in, token * 72 + 64, 8);
  b.storeTile(out, token * 128,
              b.convert(OpKind::Bitcast, b.decodeNvfp4(packed, scales), Elem::I8));
  auto kernel = compile(b.finish());
  ASSERT_TRUE(kernel);

  // 32 tokens x 8 groups: group g of token t has scale byte 8t + g and elements with nibbles 0..15.
  std::vector<uint8_t> input(32 * 72), output(32 * 128, 0xAA);
  for (int t = 0; t < 32; ++t) {
    for (int i = 0; i < 64; ++i) // elements 2i, 2i+1 hold nibbles (2i) % 16, (2i+1) % 16
      input[t * 72 + i] = static_cast<uint8_t>(((2 * i) % 16) | (((2 * i + 1) % 16) << 4));
    for (int g = 0; g < 8; ++g)
      input[t * 72 + 64 + g] = static_cast<uint8_t>(8 * t + g);
  }
  runtime::KernelArgs args;
  args.buffer(input.data(), input.size()).buffer(output.data(), output.size());
  args.call(*kernel, 0, 32);
  int checked = 0;
  for (int t = 0; t < 32; ++t)
    for (int d = 0; d < 128; ++d) {
      const int nibble = d % 16, scale = 8 * t + d / 16;
      ASSERT_EQ(output[t * 128 + d], nvfp4::keyByteTable()[nibble][scale])
          << "nibble " << nibble << " scale 0x" << std::hex << scale;
      ++checked;
    }
  EXPECT_EQ(checked, 4096);
}

TEST(SmallFloatOps, AllE4M3BytesThroughCompiledExtF) {
  KernelBuilder b("extf_table");
  Buffer in = b.buffer("in", Elem::I8, Access::Read);
  Buffer out = b.buffer("out", Elem::F32, Access::Write);
  Value bytes = b.loadTile(in, b.programId() * 16, 16);
  b.storeTile(out, b.programId() * 16,
              b.convert(OpKind::ExtF, b.convert(OpKind::Bitcast, bytes, Elem::F8E4M3FN), Elem::F32));
  auto kernel = compile(b.finish());
  ASSERT_TRUE(kernel);
  std::vector<uint8_t> input(256);
  std::vector<float> output(256, 12345.0f);
  for (int i = 0; i < 256; ++i)
    input[i] = static_cast<uint8_t>(i);
  runtime::KernelArgs args;
  args.buffer(input.data(), 256).buffer(output.data(), 256);
  args.call(*kernel, 0, 16);
  for (int i = 0; i < 256; ++i) {
    float want = nvfp4::e4m3ToFloat(static_cast<uint8_t>(i));
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(output[i])) << i;
    else
      EXPECT_EQ(std::bit_cast<uint32_t>(output[i]), std::bit_cast<uint32_t>(want)) << i;
  }
}

TEST(SmallFloatOps, TruncFMatchesSatfiniteOnEdgesAndRandomBits) {
  KernelBuilder b("truncf_table");
  Buffer in = b.buffer("in", Elem::F32, Access::Read);
  Buffer out = b.buffer("out", Elem::I8, Access::Write);
  Value x = b.loadTile(in, b.programId() * 8, 8);
  b.storeTile(out, b.programId() * 8,
              b.convert(OpKind::Bitcast, b.convert(OpKind::TruncF, x, Elem::F8E4M3FN), Elem::I8));
  auto kernel = compile(b.finish());
  ASSERT_TRUE(kernel);

  std::vector<float> input;
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 448.0f, 449.0f, 464.0f, 500.0f, 1e30f, inf, -inf, std::nanf(""),
                  1.0625f, 1.1875f, 432.0f, std::ldexp(1.0f, -10), std::ldexp(3.0f, -10),
                  std::ldexp(15.0f, -10), std::ldexp(1.0f, -6), std::ldexp(1.0f, -30)})
    input.push_back(v);
  for (int c = 0; c < 0x7E; ++c) { // every code, every midpoint, and one ulp either side of it
    float lo = nvfp4::e4m3ToFloat(static_cast<uint8_t>(c));
    float hi = nvfp4::e4m3ToFloat(static_cast<uint8_t>(c + 1));
    float mid = (lo + hi) / 2;
    for (float v : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      input.push_back(v);
      input.push_back(-v);
    }
  }
  std::mt19937 rng(3);
  while (input.size() % 8 || input.size() < 20000)
    input.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  std::vector<uint8_t> output(input.size(), 0xAA);
  runtime::KernelArgs args;
  args.buffer(input.data(), input.size()).buffer(output.data(), output.size());
  args.call(*kernel, 0, static_cast<int64_t>(input.size() / 8));
  for (size_t i = 0; i < input.size(); ++i)
    ASSERT_EQ(output[i], nvfp4::e4m3RnSatfinite(input[i]))
        << "x = " << input[i] << " (bits 0x" << std::hex << std::bit_cast<uint32_t>(input[i]) << ")";
}
