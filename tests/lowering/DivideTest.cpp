// dsl::divideWithRemainder (dsl::divide and the remainder) compiled for the host: the quotient and
// remainder of numerators across [0, 2^32) by divisor arguments across [1, 2^31), the words filled
// as kernels::bindLaunch fills them.
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "dsl/Builder.h"
#include "dsl/Divisor.h"
#include "lowering/host/HostCompiler.h"
#include "runtime/KernelArgs.h"

using namespace m3idx;
using namespace m3idx::dsl;

TEST(Divide, QuotientsAndRemaindersOfTheCompiledKernel) {
  KernelBuilder b("divide");
  Buffer in = b.buffer("n", Elem::I64, Access::Read);
  Buffer quotients = b.buffer("q", Elem::I64, Access::Write);
  Buffer remainders = b.buffer("r", Elem::I64, Access::Write);
  Divisor d = b.divisorArg("d");
  Value i = b.programId();
  Value n = b.load(in, i);
  const QuotientRemainder qr = divideWithRemainder(n, d);
  b.store(quotients, i, qr.quotient);
  b.store(remainders, i, qr.remainder);
  StatusOr<Kernel> k = b.finish();
  ASSERT_TRUE(k.ok()) << k.status().message();
  auto kernel = lowering::compileHostKernel(*k);
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();

  std::mt19937_64 rng(5);
  std::vector<int64_t> divisors = {1, 2, 3, 7, 128, 2047, 2048, 65535, 65537, kDivisorLimit - 1};
  for (int i = 0; i < 24; ++i)
    divisors.push_back(1 + static_cast<int64_t>(rng() % (kDivisorLimit - 1)));
  for (int64_t dv : divisors) {
    std::vector<int64_t> ns = {0, 1, dv - 1, dv, dv + 1, 0xFFFFFFFF, 0x7FFFFFFF, 8191 * dv / 2};
    for (int i = 0; i < 64; ++i)
      ns.push_back(static_cast<int64_t>(rng() & 0xFFFFFFFF));
    std::erase_if(ns, [](int64_t n) { return n > 0xFFFFFFFF; }); // divide()'s numerators only
    std::vector<int64_t> q(ns.size(), -1), r(ns.size(), -1);
    runtime::KernelArgs args;
    args.buffer(ns.data(), ns.size()).buffer(q.data(), q.size()).buffer(r.data(), r.size());
    args.scalar(dv).scalar(*divisorWord(dv));
    args.call(**kernel, 0, static_cast<int64_t>(ns.size()));
    for (size_t j = 0; j < ns.size(); ++j) {
      ASSERT_EQ(q[j], ns[j] / dv) << ns[j] << " / " << dv;
      ASSERT_EQ(r[j], ns[j] % dv) << ns[j] << " % " << dv;
    }
  }
}
