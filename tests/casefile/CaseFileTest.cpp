// Case folders: loading rejects every malformed file with a message naming it (SPEC §7-8).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "casefile/CaseFile.h"
#include "casefile/CaseGenerator.h"
#include "core/Spec.h"
#include "tests/TestCases.h"

using namespace m3idx;
using namespace m3idx::testing;
namespace fs = std::filesystem;

namespace {

std::string freshDir(const std::string &name) {
  fs::path dir = fs::temp_directory_path() /
                 ("m3idx_case_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  return dir.string();
}

std::string savedCase(const std::string &name) {
  IndexerParams p;
  p.numHeads = 2;
  p.numDecodes = 1;
  Case c = buildCase(p, {4, 5}, {300, 700});
  std::string dir = freshDir(name);
  EXPECT_TRUE(saveCase(dir, c).ok());
  return dir;
}

void expectLoadError(const std::string &dir, const std::string &needle) {
  StatusOr<Case> c = loadCase(dir);
  ASSERT_FALSE(c.ok()) << "loaded a case that should fail on " << needle;
  EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("expected"), std::string::npos) << c.status().message();
}

void writeText(const std::string &path, const std::string &text) { std::ofstream(path) << text; }

} // namespace

TEST(CaseFile, SaveLoadRoundTrip) {
  std::string dir = savedCase("roundtrip");
  StatusOr<Case> c = loadCase(dir);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->params.numHeads, 2);
  EXPECT_EQ(c->view().numRows, 9);
}

TEST(CaseFile, MissingFile) {
  std::string dir = savedCase("missing");
  fs::remove(fs::path(dir) / "kv.npy");
  expectLoadError(dir, "kv.npy");
}

TEST(CaseFile, MissingFolder) { expectLoadError(freshDir("nope"), "CASE"); }

TEST(CaseFile, TruncatedNpy) {
  std::string dir = savedCase("truncated");
  fs::resize_file(fs::path(dir) / "q.npy", fs::file_size(fs::path(dir) / "q.npy") - 10);
  expectLoadError(dir, "q.npy");
}

TEST(CaseFile, NonNpyFile) {
  std::string dir = savedCase("nonnpy");
  writeText((fs::path(dir) / "seq_lens.npy").string(), "hello");
  expectLoadError(dir, "seq_lens.npy");
}

TEST(CaseFile, UnknownFormat) {
  std::string dir = savedCase("format");
  writeText((fs::path(dir) / "case.json").string(),
            R"({"format":"m3idx-case/9","num_index_heads":2,"init_blocks":0,"local_blocks":1,)"
            R"("num_decodes":1,"decode_query_len":4})");
  expectLoadError(dir, "format");
}

TEST(CaseFile, BadJsonAndMissingField) {
  std::string dir = savedCase("json");
  writeText((fs::path(dir) / "case.json").string(), "{not json");
  expectLoadError(dir, "case.json");
  writeText((fs::path(dir) / "case.json").string(),
            R"({"format":"m3idx-case/1","num_index_heads":2,"init_blocks":0,"local_blocks":1,)"
            R"("decode_query_len":4})");
  expectLoadError(dir, "num_decodes");
  writeText((fs::path(dir) / "case.json").string(),
            R"({"format":"m3idx-case/1","num_index_heads":"2","init_blocks":0,"local_blocks":1,)"
            R"("num_decodes":1,"decode_query_len":4})");
  expectLoadError(dir, "num_index_heads");
}

TEST(CaseFile, HeadsNotSupported) {
  std::string dir = savedCase("heads");
  writeText((fs::path(dir) / "case.json").string(),
            R"({"format":"m3idx-case/1","num_index_heads":3,"init_blocks":0,"local_blocks":1,)"
            R"("num_decodes":1,"decode_query_len":4})");
  expectLoadError(dir, "num_index_heads");
}

TEST(CaseFile, WrongDtype) {
  std::string dir = savedCase("dtype");
  ASSERT_TRUE(npy::write((fs::path(dir) / "seq_lens.npy").string(),
                         npy::makeArray(npy::DType::F32, {2}))
                  .ok());
  expectLoadError(dir, "seq_lens.npy");
}

TEST(CaseFile, WrongQueryShape) {
  std::string dir = savedCase("qshape");
  ASSERT_TRUE(npy::write((fs::path(dir) / "q.npy").string(),
                         npy::makeArray(npy::DType::U8, {9, 1, 128}))
                  .ok());
  expectLoadError(dir, "q.npy");
  ASSERT_TRUE(npy::write((fs::path(dir) / "q.npy").string(),
                         npy::makeArray(npy::DType::U8, {9, 2, 64}))
                  .ok());
  expectLoadError(dir, "q.npy");
}

TEST(CaseFile, WrongPageSize) {
  std::string dir = savedCase("kvshape");
  ASSERT_TRUE(npy::write((fs::path(dir) / "kv.npy").string(),
                         npy::makeArray(npy::DType::U8, {8, 8192}))
                  .ok());
  expectLoadError(dir, "kv.npy");
}

TEST(CaseFile, WrongRowCount) {
  std::string dir = savedCase("rows");
  ASSERT_TRUE(npy::write((fs::path(dir) / "q.npy").string(),
                         npy::makeArray(npy::DType::U8, {8, 2, 128}))
                  .ok());
  expectLoadError(dir, "query_start_loc[2]");
}

TEST(CaseFile, LengthArraysMatchRequests) {
  std::string dir = savedCase("lens");
  ASSERT_TRUE(npy::write((fs::path(dir) / "seq_lens.npy").string(),
                         npy::makeArray(npy::DType::I32, {3}))
                  .ok());
  expectLoadError(dir, "seq_lens.npy");
  dir = savedCase("qsl");
  ASSERT_TRUE(npy::write((fs::path(dir) / "query_start_loc.npy").string(),
                         npy::makeArray(npy::DType::I32, {2}))
                  .ok());
  expectLoadError(dir, "query_start_loc.npy");
}

TEST(CaseFile, ValueRulesApplyOnLoad) {
  IndexerParams p;
  p.numDecodes = 1;
  Case c = buildCase(p, {4}, {300});
  c.blockTable.as<int32_t>()[1] = 99;
  std::string dir = freshDir("values");
  ASSERT_TRUE(saveCase(dir, c).ok());
  expectLoadError(dir, "block_table[0][1]");
}

TEST(CaseGenerator, SameSeedSameCase) {
  GenOptions o;
  o.seed = 11;
  o.numHeads = 2;
  StatusOr<Case> a = generateCase(o), b = generateCase(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->kv.bytes, b->kv.bytes);
  EXPECT_EQ(a->q.bytes, b->q.bytes);
  EXPECT_TRUE(validateBatch(a->view()).ok());
  o.seed = 12;
  EXPECT_NE(generateCase(o)->q.bytes, a->q.bytes);
}

TEST(CaseGenerator, RejectsBadOptions) {
  GenOptions o;
  o.numHeads = 3;
  StatusOr<Case> c = generateCase(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--heads"), std::string::npos);
  o = GenOptions{};
  o.decodeContext = {2, 1};
  EXPECT_FALSE(generateCase(o).ok());
}

// The generator's requests, rows and pages land in int32 files: their sums are checked in int64_t
// before anything is sized by them (INT32_MAX + 1 requests overflowed an int; 2^31 pages were
// sized, then allocated as 19 TB of kv).
TEST(CaseGenerator, CountsPastInt32AreRefused) {
  GenOptions o;
  o.numDecodes = INT32_MAX;
  o.numPrefills = 1;
  StatusOr<Case> c = generateCase(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--decodes/--prefills"), std::string::npos) << c.status().message();
  o = GenOptions();
  o.extraPages = INT32_MAX;
  c = generateCase(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--extra-pages: expected at most 2147483647 pages"), std::string::npos)
      << c.status().message();
}
