#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/Nvfp4.h"
#include "core/Nvfp4Writer.h"
#include "core/Spec.h"

using namespace m3idx;
using namespace m3idx::nvfp4;

TEST(Nvfp4Writer, E2M1RoundingTiesToEvenCode) {
  EXPECT_EQ(e2m1RoundNearestEven(0.25f), 0);  // 0 | 0.5
  EXPECT_EQ(e2m1RoundNearestEven(0.75f), 2);  // 0.5 | 1.0 -> code 2
  EXPECT_EQ(e2m1RoundNearestEven(1.25f), 2);  // 1.0 | 1.5
  EXPECT_EQ(e2m1RoundNearestEven(2.5f), 4);   // 2 | 3
  EXPECT_EQ(e2m1RoundNearestEven(3.5f), 6);   // 3 | 4
  EXPECT_EQ(e2m1RoundNearestEven(5.0f), 6);   // 4 | 6
  EXPECT_EQ(e2m1RoundNearestEven(6.4f), 7);   // clamped
  EXPECT_EQ(e2m1RoundNearestEven(-100.0f), 15);
  EXPECT_EQ(e2m1RoundNearestEven(-1.6f), 11);
  EXPECT_EQ(e2m1RoundNearestEven(-0.1f), 0);
}

TEST(Nvfp4Writer, GridValuesRoundTripExactly) {
  std::vector<uint8_t> page(spec::kPageBytes, 0);
  std::vector<float> key(128), back(128);
  for (int d = 0; d < 128; ++d) // each group holds +-6 * 2^k, so scale == 2^k exactly
    key[d] = static_cast<float>(std::ldexp((d % 16 == 0) ? 6.0 : kE2M1Magnitudes[d % 8],
                                           (d / 16) - 4) * ((d % 3) ? 1 : -1));
  ASSERT_TRUE(quantizeToken(key, page, 5).ok());
  dequantizeToken(page, 5, back);
  for (int d = 0; d < 128; ++d)
    EXPECT_EQ(back[d], key[d]) << d;
}

TEST(Nvfp4Writer, GaussianRoundTripWithinNvfp4Bound) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<uint8_t> page(spec::kPageBytes, 0);
  std::vector<float> key(128), back(128);
  for (int slot = 0; slot < spec::kSparseBlockSize; ++slot) {
    for (float &x : key)
      x = normal(rng) * (slot % 5 == 0 ? 1e-3f : 1.0f);
    ASSERT_TRUE(quantizeToken(key, page, slot).ok());
    dequantizeToken(page, slot, back);
    for (int g = 0; g < 8; ++g) {
      float amax = 0;
      for (int i = 0; i < 16; ++i)
        amax = std::fmax(amax, std::fabs(key[g * 16 + i]));
      const float scale = e4m3ToFloat(page[spec::kPageDataBytes + slot * 8 + g]);
      // The scale is E4M3(amax / 6): within 2^-4 relative, or 2^-10 absolute when subnormal;
      // the floor at 2^-9 lifts it at most to 2^-9.
      EXPECT_LE(std::fabs(scale - amax / 6.0f),
                std::fmax(amax / 6.0f * 0.0625f, std::ldexp(1.0f, -9)) * 1.0001f);
      EXPECT_GE(scale, std::ldexp(1.0f, -9));
      // E2M1 rounding errs at most one scale unit (half the 4..6 gap), clamping at +-6 at most
      // amax - 6 scale, and the final E4M3 encode 2^-4 relative or 2^-10 absolute.
      for (int i = 0; i < 16; ++i) {
        float x = key[g * 16 + i], y = back[g * 16 + i];
        float bound = std::fmax(scale, amax - 6.0f * scale) + std::fabs(x) * 0.0625f +
                      std::ldexp(1.0f, -10);
        EXPECT_LE(std::fabs(x - y), bound) << "slot " << slot << " d " << g * 16 + i;
      }
    }
  }
}

TEST(Nvfp4Writer, ScaleIsFlooredAtSmallestSubnormal) {
  std::vector<uint8_t> page(spec::kPageBytes, 0);
  std::vector<float> key(128, 0.0f);
  ASSERT_TRUE(quantizeToken(key, page, 0).ok());
  for (int g = 0; g < 8; ++g)
    EXPECT_EQ(page[spec::kPageDataBytes + g], 0x01);
}

TEST(Nvfp4Writer, RejectsNonFiniteAndBadSlot) {
  std::vector<uint8_t> page(spec::kPageBytes, 0);
  std::vector<float> key(128, 1.0f);
  key[17] = std::nanf("");
  Status s = quantizeToken(key, page, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("key[17]"), std::string::npos) << s.message();
  key[17] = 1.0f;
  s = quantizeToken(key, page, 128);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("slot"), std::string::npos) << s.message();
}
