// The sm_90 NVFP4 decode (lowering/nvvm/Sm90KeyTables.cpp) against SPEC §2, through a host model of
// its steps written from the instructions' documented semantics: per scale, a table of the key
// bytes of the 8 positive E2M1 codes (f16 products, cvt.rn.satfinite.e4m3x2.f16x2), prmt lookups
// with the masked nibbles as selectors, and the nibbles' signs spread to bytes by a
// sign-replicating prmt and XORed into bit 7. All 16 x 256
// (nibble, scale) pairs must give the reference key byte (NaN by class: see Gfx950NumericsTest).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "core/Nvfp4.h"
#include "tests/lowering/Fp8Model.h"

namespace {

using m3idx::testing::e4m3Round;
using m3idx::testing::e4m3Value;
using m3idx::testing::isE4m3NaN;

// prmt.b32 d, a, b, c (default mode): byte i of d is byte c[4i+2:4i] of {b, a}, or that byte's
// sign replicated when c[4i+3] is set.
uint32_t prmt(uint32_t a, uint32_t b, uint32_t c) {
  const uint64_t pool = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t d = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t sel = (c >> (4 * i)) & 15;
    uint32_t byte = (pool >> (8 * (sel & 7))) & 0xFF;
    if (sel & 8)
      byte = (byte & 0x80) ? 0xFF : 0;
    d |= byte << (8 * i);
  }
  return d;
}

// The table of one scale: key bytes of codes 0..7 in two words. f16 products of E2M1 magnitudes
// and E4M3 scales are exact, so the double product stands for them.
std::pair<uint32_t, uint32_t> table(uint8_t scale) {
  const double mags[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  uint32_t w[2] = {0, 0};
  for (int c = 0; c < 8; ++c)
    w[c / 4] |= uint32_t{e4m3Round(mags[c] * e4m3Value(scale), /*saturate=*/true)} << (8 * (c % 4));
  return {w[0], w[1]};
}

// 8 elements from one packed word, as the emitter computes them.
uint64_t decodeWord(uint32_t x, uint8_t scale) {
  auto [lo, hi] = table(scale);
  const uint32_t codes = x & 0x77777777;
  uint64_t out = 0;
  for (int half = 0; half < 2; ++half) {
    const uint32_t mag = prmt(lo, hi, half ? codes >> 16 : codes);
    const uint32_t sign = prmt(x << 4, x, half ? 0xFBEA : 0xD9C8) & 0x80808080;
    out |= uint64_t{mag ^ sign} << (32 * half);
  }
  return out;
}

} // namespace

TEST(Sm90Numerics, PermuteDecodeReproducesAllKeyBytes) {
  for (int s = 0; s < 256; ++s)
    for (int n = 0; n < 16; ++n) {
      // Element n % 8 of a word holding nibble n there and other nibbles around it.
      uint32_t x = 0;
      for (int e = 0; e < 8; ++e)
        x |= static_cast<uint32_t>(e == n % 8 ? n : (n + 5 * e) % 16) << (4 * e);
      const uint8_t got = static_cast<uint8_t>(decodeWord(x, static_cast<uint8_t>(s)) >> (8 * (n % 8)));
      const uint8_t want = m3idx::nvfp4::keyByteTable()[n][s];
      if (isE4m3NaN(want)) {
        EXPECT_TRUE(isE4m3NaN(got)) << "nibble " << n << " scale " << s;
        continue;
      }
      ASSERT_EQ(got, want) << "nibble " << n << " scale 0x" << std::hex << s;
    }
}

// The bug the H200 found in the first version: ORing the nibble's sign into a table that already
// carries a negative scale's sign gave negative keys for negative x negative.
TEST(Sm90Numerics, NegativeTimesNegativeIsPositive) {
  const uint8_t minusTwo = 0xC0; // E4M3 -2.0
  const uint32_t minusOne = 0xA;  // E2M1 -1.0 in element 0
  EXPECT_EQ(decodeWord(minusOne, minusTwo) & 0xFF, 0x40u); // +2.0
}
