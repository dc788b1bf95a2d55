#include <gtest/gtest.h>

#include "cache/EntryFile.h"

using namespace m3idx;

namespace {

cache::Entry sample() {
  return {"m3idx 0.1.0", "host", "topk_decode", "heads=1,rows=4", std::string(64, 'a'), "_sym",
          "{\"compile_ms\":1}", std::vector<uint8_t>{1, 2, 3, 4, 5, 0, 255}};
}

void expectBad(const std::string &bytes, const std::string &needle) {
  StatusOr<cache::Entry> e = cache::decodeEntry(bytes, "entry");
  ASSERT_FALSE(e.ok()) << needle;
  EXPECT_NE(e.status().message().find(needle), std::string::npos) << e.status().message();
}

} // namespace

TEST(EntryFile, RoundTrip) {
  std::string bytes = cache::encodeEntry(sample());
  StatusOr<cache::Entry> e = cache::decodeEntry(bytes, "entry");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->kernel, "topk_decode");
  EXPECT_EQ(e->binary, sample().binary);
  EXPECT_EQ(e->metadata, sample().metadata);
}

TEST(EntryFile, EveryDefectIsNamed) {
  const std::string good = cache::encodeEntry(sample());
  expectBad("", "truncated");
  expectBad(good.substr(0, good.size() - 1), "checksum");
  expectBad(good.substr(0, 20), "truncated");
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x10;
  expectBad(flipped, "checksum mismatch");
  std::string magic = good;
  magic[0] = 'X';
  expectBad(magic, "wrong magic");
  std::string version = good;
  version[8] = 9;
  expectBad(version, "format version 9");
}
