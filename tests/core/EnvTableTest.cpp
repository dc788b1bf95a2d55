// The environment table: defaults when unset or empty, flag spellings, and the fingerprint of
// code-changing variables that every cache key includes.
#include <cstdlib>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "core/EnvTable.h"

using namespace m3idx;

TEST(EnvTable, NamesAreUniqueAndDescribed) {
  std::set<std::string> names;
  for (const env::Variable &v : env::table()) {
    EXPECT_EQ(std::string(v.name).rfind("M3IDX_", 0), 0u) << v.name;
    EXPECT_TRUE(names.insert(v.name).second) << v.name << " twice";
    EXPECT_GT(std::string(v.description).size(), 10u) << v.name;
  }
}

TEST(EnvTable, DefaultsWhenUnsetOrEmpty) {
  ::unsetenv("M3IDX_OPT_LEVEL");
  EXPECT_EQ(env::get("M3IDX_OPT_LEVEL"), "3");
  ::setenv("M3IDX_OPT_LEVEL", "", 1);
  EXPECT_EQ(env::get("M3IDX_OPT_LEVEL"), "3");
  ::setenv("M3IDX_OPT_LEVEL", "1", 1);
  EXPECT_EQ(env::get("M3IDX_OPT_LEVEL"), "1");
  ::unsetenv("M3IDX_OPT_LEVEL");
}

TEST(EnvTable, FlagSpellings) {
  for (const char *yes : {"1", "true", "YES", "On"}) {
    ::setenv("M3IDX_RUN_ONLY", yes, 1);
    EXPECT_TRUE(env::flag("M3IDX_RUN_ONLY")) << yes;
  }
  for (const char *no : {"0", "false", "no", "2", ""}) {
    ::setenv("M3IDX_RUN_ONLY", no, 1);
    EXPECT_FALSE(env::flag("M3IDX_RUN_ONLY")) << no;
  }
  ::unsetenv("M3IDX_RUN_ONLY");
}

TEST(EnvTable, FingerprintHasExactlyTheCodeChangingVariables) {
  ::unsetenv("M3IDX_OPT_LEVEL");
  const std::string base = env::codeChangingFingerprint();
  EXPECT_NE(base.find("M3IDX_OPT_LEVEL=3"), std::string::npos) << base;
  ::setenv("M3IDX_OPT_LEVEL", "2", 1);
  EXPECT_NE(env::codeChangingFingerprint(), base);
  ::unsetenv("M3IDX_OPT_LEVEL");
  ::setenv("M3IDX_CACHE_DIR", "/somewhere/else", 1); // where code is kept does not change it
  EXPECT_EQ(env::codeChangingFingerprint(), base);
  ::unsetenv("M3IDX_CACHE_DIR");
}
