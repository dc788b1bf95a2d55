// The unit tests run with scripts/test's ASan options whether or not ctest's environment carries
// them (tests/support/SanitizerDefaults.cpp): with allow_user_poisoning=0 a heap region poisoned
// by hand stays readable; under ASan's default the read below is a use-after-poison report, which
// aborts the test binary (`ASAN_OPTIONS=allow_user_poisoning=1` shows it).
#include <memory>

#include <gtest/gtest.h>

#include <sanitizer/asan_interface.h>

TEST(SanitizerDefaults, UserPoisoningIsOffAsScriptsTestSetsIt) {
  auto bytes = std::make_unique<char[]>(64);
  volatile char *b = bytes.get();
  b[8] = 1;
  ASAN_POISON_MEMORY_REGION(bytes.get(), 64);
  EXPECT_EQ(b[8], 1);
  ASAN_UNPOISON_MEMORY_REGION(bytes.get(), 64);
}
