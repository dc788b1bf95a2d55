// The gfx950 NVFP4 decode sequence (lowering/rocdl/Gfx950Program.cpp) against SPEC §2, through a host
// model of each instruction written from its documented semantics, independent of core/Nvfp4:
//   v_cvt_scalef32_pk_f32_fp4 (E2M1 -> f32, times 2^exponent(scale); the emitter passes 1.0),
//   v_cvt_f32_fp8 (OCP E4M3 -> f32, for the scale), an IEEE f32 multiply, the NaN-keeping clamp
//   (minimumf/maximumf), and v_cvt_pk_fp8_f32 (f32 -> OCP E4M3, round to nearest even, overflow
//   to NaN: not saturating). All 16 x 256 (nibble, scale) pairs must give the reference key byte.
// No MI355X is available: this checks the sequence's arithmetic, not the silicon.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/Nvfp4.h"
#include "tests/lowering/Fp8Model.h"

namespace {

// v_cvt_scalef32_pk_f32_fp4, one element: E2M1 is s.ee.m with exponent bias 1.
float cvtScaleF32Fp4(uint8_t nibble, float scale) {
  const int e = (nibble >> 1) & 3, m = nibble & 1;
  const float mag = e == 0 ? 0.5f * m : std::ldexp(1.0f + 0.5f * m, e - 1);
  // Only the scale's exponent is used.
  const float v = std::ldexp(mag, std::ilogb(scale));
  return (nibble & 8) ? -v : v;
}

// v_cvt_f32_fp8 (OCP E4M3FN to f32, exact).
float cvtF32Fp8(uint8_t byte) { return m3idx::testing::e4m3Value(byte); }

// IEEE 754-2019 minimum / maximum: NaN in, NaN out.
float minimumf(float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::fmin(a, b); }
float maximumf(float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::fmax(a, b); }

// v_cvt_pk_fp8_f32, one element: round to nearest even, not saturating (464 and beyond to NaN).
uint8_t cvtPkFp8F32(float x) { return m3idx::testing::e4m3Round(x, /*saturate=*/false); }

uint8_t gfx950KeyByte(uint8_t nibble, uint8_t scale) {
  const float x = cvtScaleF32Fp4(nibble, 1.0f) * cvtF32Fp8(scale);
  return cvtPkFp8F32(maximumf(minimumf(x, 448.0f), -448.0f));
}

using m3idx::testing::isE4m3NaN;

} // namespace

TEST(Gfx950Numerics, DecodeSequenceReproducesAllKeyBytes) {
  int nanPairs = 0;
  for (int n = 0; n < 16; ++n)
    for (int s = 0; s < 256; ++s) {
      const uint8_t want = m3idx::nvfp4::keyByteTable()[n][s];
      const uint8_t got = gfx950KeyByte(static_cast<uint8_t>(n), static_cast<uint8_t>(s));
      if (isE4m3NaN(want)) {
        // SPEC writes NaN as 0x7F; the hardware may keep the product's sign (0xFF). Both are
        // E4M3 NaN, widen to an f32 NaN, and are dropped by the score's fmaxf alike.
        EXPECT_TRUE(isE4m3NaN(got)) << "nibble " << n << " scale " << s;
        ++nanPairs;
        continue;
      }
      ASSERT_EQ(got, want) << "nibble " << n << " scale 0x" << std::hex << s;
    }
  EXPECT_EQ(nanPairs, 2 * 16); // scales 0x7F and 0xFF
}

// Without the clamp the non-saturating convert would turn products above 448 into NaN: the clamp
// is what makes the sequence satfinite (e.g. nibble 6.0 x scale 448 = 2688 -> 448).
TEST(Gfx950Numerics, ClampIsWhatSaturates) {
  const uint8_t six = 0x7, s448 = 0x7E;
  EXPECT_TRUE(isE4m3NaN(cvtPkFp8F32(cvtScaleF32Fp4(six, 1.0f) * cvtF32Fp8(s448))));
  EXPECT_EQ(gfx950KeyByte(six, s448), 0x7E);
  EXPECT_EQ(gfx950KeyByte(six | 8, s448), 0xFE);
}

// Why the scale cannot be handed to the fp4 convert itself: it would use only 2^exponent(scale).
TEST(Gfx950Numerics, ScaledConvertUsesOnlyTheScalesExponent) {
  EXPECT_EQ(cvtScaleF32Fp4(0x2 /* 1.0 */, 1.75f), 1.0f);
  EXPECT_EQ(cvtScaleF32Fp4(0x2, 2.0f), 2.0f);
}
