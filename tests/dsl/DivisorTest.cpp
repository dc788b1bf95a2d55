// dsl/Divisor.h: each divisor's word divides every numerator in [0, 2^32) exactly (the word's
// arithmetic done here as the DSL's divide() does it: unsigned 64-bit), names of word arguments,
// and errors for divisors without a word.
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "dsl/Builder.h"
#include "dsl/Divisor.h"

using namespace m3idx;
using namespace m3idx::dsl;

namespace {

uint64_t divideByWord(uint64_t n, int64_t word) {
  const uint64_t m = static_cast<uint64_t>(word) & 0xFFFFFFFFu, l = static_cast<uint64_t>(word) >> 32;
  return (((n * m) >> 32) + n) >> l;
}

// Numerators where a wrong multiplier shows first: around multiples of d and the range's ends.
std::vector<uint64_t> numeratorsFor(uint64_t d, std::mt19937_64 &rng) {
  std::vector<uint64_t> ns = {0, 1, d - 1, d, d + 1, 0xFFFFFFFFu, 0xFFFFFFFEu, 0x80000000u, 0x7FFFFFFFu};
  const uint64_t top = 0xFFFFFFFFu / d;
  for (uint64_t k : {top, top - 1, top / 2, uint64_t{2}, uint64_t{3}})
    for (int64_t delta : {-1, 0, 1})
      ns.push_back(k * d + delta);
  for (int i = 0; i < 16; ++i)
    ns.push_back(rng() & 0xFFFFFFFFu);
  std::erase_if(ns, [](uint64_t n) { return n > 0xFFFFFFFFu; });
  return ns;
}

void expectExact(int64_t d, std::mt19937_64 &rng) {
  StatusOr<int64_t> word = divisorWord(d);
  ASSERT_TRUE(word.ok()) << d << ": " << word.status().message();
  for (uint64_t n : numeratorsFor(static_cast<uint64_t>(d), rng))
    ASSERT_EQ(divideByWord(n, *word), n / static_cast<uint64_t>(d)) << n << " / " << d;
}

} // namespace

TEST(Divisor, WordsDivideEveryNumeratorExactly) {
  std::mt19937_64 rng(11);
  for (int64_t d = 1; d <= 70000; ++d)
    expectExact(d, rng);
  for (int shift = 1; shift < 31; ++shift)
    for (int64_t delta : {-1, 0, 1})
      expectExact((int64_t{1} << shift) + delta, rng);
  expectExact(kDivisorLimit - 1, rng);
  for (int i = 0; i < 20000; ++i)
    expectExact(1 + static_cast<int64_t>(rng() % (kDivisorLimit - 1)), rng);
}

TEST(Divisor, AllNumeratorsOfSmallDivisors) {
  // Every numerator below 2^20, and a stride through the rest of [0, 2^32), for the divisors the
  // kernels meet most (grid chunks, rows, CP's block step).
  for (int64_t d : {1, 2, 3, 4, 5, 6, 7, 12, 16, 96, 127, 2048, 4096, 8191}) {
    const int64_t word = *divisorWord(d);
    for (uint64_t n = 0; n < (uint64_t{1} << 20); ++n)
      ASSERT_EQ(divideByWord(n, word), n / d) << n << " / " << d;
    for (uint64_t n = 1 << 20; n <= 0xFFFFFFFFu; n += 65521)
      ASSERT_EQ(divideByWord(n, word), n / d) << n << " / " << d;
  }
}

TEST(Divisor, ValuesWithoutAWordAreErrors) {
  for (int64_t d : {int64_t{0}, int64_t{-1}, kDivisorLimit, std::numeric_limits<int64_t>::min()}) {
    StatusOr<int64_t> word = divisorWord(d);
    ASSERT_FALSE(word.ok()) << d;
    EXPECT_NE(word.status().message().find("a divisor must be in [1, 2^31), got " + std::to_string(d)), std::string::npos)
        << word.status().message();
  }
}

TEST(Divisor, WordArgumentsAreNamedAfterTheirDivisor) {
  EXPECT_EQ(divisorOfWordName(divisorWordName("grid_rows")), "grid_rows");
  EXPECT_FALSE(divisorOfWordName("grid_rows"));
  EXPECT_FALSE(divisorOfWordName(divisorWordName("")));

  KernelBuilder b("k");
  Divisor d = b.divisorArg("grid_rows");
  Value q = divide(b.programId(), d);
  (void)q;
  StatusOr<Kernel> k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  ASSERT_EQ(k->scalars.size(), 2u);
  EXPECT_EQ(k->scalars[0].name, "grid_rows");
  EXPECT_EQ(k->scalars[1].name, divisorWordName("grid_rows"));

  // A word argument is only ever declared by divisorArg, right after its divisor.
  KernelBuilder bad("bad");
  bad.scalarArg(divisorWordName("grid_rows"), Elem::I64);
  StatusOr<Kernel> rejected = bad.finish();
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.status().message().find("is a divisor's word: declare 'grid_rows' with divisorArg"),
            std::string::npos)
      << rejected.status().message();
}
