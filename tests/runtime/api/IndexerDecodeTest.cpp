// Indexer::decode, the device-metadata decode, on the host backend (the same kernels and plan a GPU
// runs): equal to the reference for decode_query_len 1, 4 and 8, with padding requests (seq_len 0)
// and a strided block table; bad seq_lens and page ids found by the kernels, recorded in the status
// words and given no blocks while the other requests stay right; the synchronous check; shape
// errors named; capacities checked at creation.
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "casefile/CaseGenerator.h"
#include "core/Spec.h"
#include "m3idx/Indexer.h"
#include "reference/ReferenceIndexer.h"

using namespace m3idx;

namespace {

struct DecodeStep {
  Case c;
  std::vector<int32_t> table; // the case's block table, rows `stride` apart
  int64_t stride = 0;
  int32_t *lens = nullptr; // the case's seq_lens, edited in place
  TensorView q, kv, blockTable, seqLens;
};

std::unique_ptr<DecodeStep> makeDecode(uint64_t seed, int heads, int decodes, int queryLen,
                                       int64_t extraColumns = 0, Range context = {0, 3000}) {
  GenOptions o;
  o.seed = seed;
  o.mode = ValueMode::Exact;
  o.numHeads = heads;
  o.numDecodes = decodes;
  o.decodeQueryLen = queryLen;
  o.numPrefills = 0;
  o.initBlocks = 1;
  o.localBlocks = 1;
  o.decodeContext = context;
  auto s = std::make_unique<DecodeStep>();
  s->c = *generateCase(o);
  const BatchView v = s->c.view();
  s->stride = v.maxBlocks + extraColumns;
  s->table.assign(v.numRequests * s->stride, -7); // columns past the case's are never read
  for (int64_t i = 0; i < v.numRequests; ++i)
    std::copy_n(v.blockTable + i * v.maxBlocks, v.maxBlocks, s->table.begin() + i * s->stride);
  s->q = TensorView::contiguous(s->c.q.bytes.data(), DType::U8, {v.numRows, heads, 128});
  s->kv = TensorView::contiguous(s->c.kv.bytes.data(), DType::U8, {v.numPages, 9216});
  s->blockTable = TensorView::contiguous(s->table.data(), DType::I32, {v.numRequests, v.maxBlocks});
  s->blockTable.strides[0] = s->stride;
  s->lens = s->c.seqLens.as<int32_t>();
  s->seqLens = TensorView::contiguous(s->lens, DType::I32, {v.numRequests});
  return s;
}

std::unique_ptr<Indexer> decodeIndexer(const DecodeStep &s, int maxQueryLen = 8) {
  IndexerConfig config;
  config.numIndexHeads = s.c.params.numHeads;
  config.initBlocks = s.c.params.initBlocks;
  config.localBlocks = s.c.params.localBlocks;
  config.maxDecodeQueryLen = maxQueryLen;
  config.decodeQueryLens = {s.c.params.decodeQueryLen};
  config.maxModelLen = 1 << 16;
  auto indexer = Indexer::create(config, Device{});
  EXPECT_TRUE(indexer.ok()) << indexer.status().message();
  EXPECT_TRUE((*indexer)->warmup().ok());
  return std::move(indexer).value();
}

std::vector<int32_t> values(const TensorView &t) {
  const int32_t *p = static_cast<const int32_t *>(t.data);
  return std::vector<int32_t>(p, p + t.numel());
}

std::vector<int32_t> referenceTopk(const Case &c) {
  auto want = reference::runReference(c.view(), false);
  EXPECT_TRUE(want.ok()) << want.status().message();
  return want->topk;
}

// Rows of request `i` in a [H, T, 16] top-k.
std::vector<int32_t> requestRows(const std::vector<int32_t> &topk, int H, int64_t T, int Q, int64_t i) {
  std::vector<int32_t> rows;
  for (int h = 0; h < H; ++h)
    rows.insert(rows.end(), topk.begin() + (h * T + i * Q) * 16, topk.begin() + (h * T + (i + 1) * Q) * 16);
  return rows;
}

} // namespace

TEST(IndexerDecode, EqualsTheReferenceForEveryQueryLenWithPaddingAndStridedRows) {
  for (int queryLen : {1, 4, 8}) {
    for (int heads : {1, 4}) {
      auto s = makeDecode(queryLen * 10 + heads, heads, 7, queryLen, /*extraColumns=*/3);
      // Requests 2 and 5 are a graph's padding: seq_len 0, garbage table rows.
      for (int i : {2, 5}) {
        s->lens[i] = 0;
        std::fill_n(s->table.begin() + i * s->stride, s->stride, 123456);
      }
      auto indexer = decodeIndexer(*s);
      auto r = indexer->decode(s->q, s->kv, s->blockTable, s->seqLens);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(r->shape[1], 7 * queryLen);
      const std::vector<int32_t> got = values(*r), want = referenceTopk(s->c);
      EXPECT_EQ(got, want) << "decode_query_len " << queryLen << ", " << heads << " heads";
      EXPECT_EQ(requestRows(got, heads, 7 * queryLen, queryLen, 2),
                std::vector<int32_t>(heads * queryLen * 16, -1));
      auto status = indexer->readDeviceStatus();
      ASSERT_TRUE(status.ok());
      EXPECT_TRUE(status->ok()) << status->message();
      EXPECT_EQ(indexer->compilesAfterWarmup(), 0);
    }
  }
}

TEST(IndexerDecode, LongRowsAreSplitByTheirOwnLength) {
  // One long request among short ones: grids come from shapes, each request's programs split its
  // own blocks, and top-k segments follow each row's length.
  auto s = makeDecode(91, 1, 3, 4, 0, {100, 700});
  auto indexer = decodeIndexer(*s);
  for (int64_t len : {int64_t{1}, int64_t{129}, int64_t{40000}}) {
    auto t = makeDecode(92, 1, 3, 4, 0, {len, len});
    auto r = indexer->decode(t->q, t->kv, t->blockTable, t->seqLens);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(values(*r), referenceTopk(t->c)) << "seq_len " << len;
  }
}

TEST(IndexerDecode, BadValuesAreFoundOnTheDeviceAndGetNoBlocks) {
  auto s = makeDecode(7, 2, 5, 4);
  const BatchView v = s->c.view();
  auto indexer = decodeIndexer(*s);
  auto good = indexer->decode(s->q, s->kv, s->blockTable, s->seqLens);
  ASSERT_TRUE(good.ok());
  const std::vector<int32_t> want = values(*good);
  const int64_t T = v.numRows;

  // A page id past the cache in a block request 1 reads, a negative one in request 3, a seq_len
  // past max_model_len in request 4 (its block table row stays as it was).
  ASSERT_GE(v.maxBlocks, 3);
  const int r1 = 1;
  s->lens[r1] = std::max(s->lens[r1], 300); // sees blocks 0..2
  s->table[r1 * s->stride + 0] = s->table[r1 * s->stride + 2] = 0;
  s->table[r1 * s->stride + 1] = static_cast<int32_t>(v.numPages);
  s->table[3 * s->stride + 0] = -1;
  s->lens[3] = std::max(s->lens[3], 1);
  s->lens[4] = (1 << 16) + 1;
  auto bad = indexer->decode(s->q, s->kv, s->blockTable, s->seqLens);
  ASSERT_TRUE(bad.ok()) << bad.status().message(); // values are the device's to check
  const std::vector<int32_t> got = values(*bad), none(2 * 4 * 16, -1);
  for (int64_t i : {r1, 3, 4})
    EXPECT_EQ(requestRows(got, 2, T, 4, i), none) << "request " << i;
  for (int64_t i : {0, 2})
    EXPECT_EQ(requestRows(got, 2, T, 4, i), requestRows(want, 2, T, 4, i)) << "request " << i;

  auto status = indexer->readDeviceStatus(nullptr, /*clear=*/false);
  ASSERT_TRUE(status.ok());
  EXPECT_FALSE(status->ok());
  EXPECT_EQ((status->seqLens >> 32) & 0x3FFFFFFF, 4);
  EXPECT_EQ(static_cast<int32_t>(status->seqLens), (1 << 16) + 1);
  const std::string message = status->message();
  EXPECT_NE(message.find("decode.seq_lens[4] = 65537"), std::string::npos) << message;
  // Which bad page the word keeps is the last program's to write: either is named exactly.
  const bool first = message.find(fmt::format("decode.block_table[{}][1] = {}", r1, v.numPages)) != std::string::npos;
  const bool second = message.find("decode.block_table[3][0] = -1") != std::string::npos;
  EXPECT_TRUE(first || second) << message;
  // Sticky until cleared.
  ASSERT_TRUE(indexer->readDeviceStatus().ok());
  auto cleared = indexer->readDeviceStatus();
  ASSERT_TRUE(cleared.ok());
  EXPECT_TRUE(cleared->ok()) << cleared->message();

  // A seq_len the table's columns cannot hold is as bad: max_seq_len is min(max_model_len, M x 128).
  s->table[r1 * s->stride + 1] = 0;
  s->table[3 * s->stride + 0] = 0;
  s->lens[4] = static_cast<int32_t>(v.maxBlocks * 128 + 1);
  ASSERT_TRUE(indexer->decode(s->q, s->kv, s->blockTable, s->seqLens).ok());
  auto past = indexer->readDeviceStatus();
  ASSERT_TRUE(past.ok());
  EXPECT_EQ((past->seqLens >> 32) & 0x3FFFFFFF, 4);
  EXPECT_EQ(past->blockTable, 0);
}

TEST(IndexerDecode, ABadPageAnywhereInALongRequestIsFound) {
  // A long request's blocks are spread over many score programs, and its rows over top-k segments
  // that each read their share of those programs' flags (the request's own length), the row's last
  // segment to arrive learning of the others' through the arrival count: a bad page in the first
  // block, in the first and second flag steps of the first segment's share, in the second
  // segment's, or in the last block still gives the request no blocks.
  for (auto [heads, queryLen] : {std::pair{1, 4}, std::pair{4, 8}}) {
    auto s = makeDecode(93 + heads, heads, 3, queryLen, 0, {40000, 40000});
    const BatchView v = s->c.view();
    auto indexer = decodeIndexer(*s);
    auto good = indexer->decode(s->q, s->kv, s->blockTable, s->seqLens);
    ASSERT_TRUE(good.ok()) << good.status().message();
    const std::vector<int32_t> want = values(*good);
    const int64_t lastBlock = spec::blocksFor(s->lens[1]) - 1;
    for (int64_t block : {int64_t{0}, int64_t{100}, int64_t{140}, int64_t{200}, lastBlock}) {
      const int32_t page = s->table[1 * s->stride + block];
      s->table[1 * s->stride + block] = static_cast<int32_t>(v.numPages);
      auto bad = indexer->decode(s->q, s->kv, s->blockTable, s->seqLens);
      ASSERT_TRUE(bad.ok()) << bad.status().message();
      const std::vector<int32_t> got = values(*bad);
      const int64_t T = v.numRows;
      EXPECT_EQ(requestRows(got, heads, T, queryLen, 1), std::vector<int32_t>(heads * queryLen * 16, -1))
          << heads << " heads, bad block " << block;
      for (int64_t i : {0, 2})
        EXPECT_EQ(requestRows(got, heads, T, queryLen, i), requestRows(want, heads, T, queryLen, i))
            << "request " << i << ", " << heads << " heads, bad block " << block;
      auto status = indexer->readDeviceStatus();
      ASSERT_TRUE(status.ok());
      EXPECT_NE(status->message().find(fmt::format("decode.block_table[1][{}] = {}", block, v.numPages)),
                std::string::npos)
          << status->message();
      // put back: the next step is whole again (the arrival counts were left at 0)
      s->table[1 * s->stride + block] = page;
      auto again = indexer->decode(s->q, s->kv, s->blockTable, s->seqLens);
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(values(*again), want) << heads << " heads, after bad block " << block;
    }
  }
}

TEST(IndexerDecode, SynchronousCheckFailsAtTheCall) {
  auto s = makeDecode(8, 1, 3, 4);
  s->table[0] = 1 << 30;
  s->lens[0] = std::max(s->lens[0], 1);
  IndexerConfig config;
  config.checkDecodeSync = true;
  auto indexer = Indexer::create(config, Device{});
  ASSERT_TRUE(indexer.ok());
  auto r = (*indexer)->decode(s->q, s->kv, s->blockTable, s->seqLens);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("decode.block_table[0][0] = 1073741824 is not a page of kv_cache"),
            std::string::npos)
      << r.status().message();
  // The check cleared the words: the next good step passes.
  s->table[0] = 0;
  EXPECT_TRUE((*indexer)->decode(s->q, s->kv, s->blockTable, s->seqLens).ok());
}

TEST(IndexerDecode, ShapesDtypesAndStridesAreCheckedOnTheHost) {
  auto s = makeDecode(9, 1, 4, 4);
  auto indexer = decodeIndexer(*s, 4);
  auto expectError = [&](const TensorView &q, const TensorView &table, const TensorView &lens,
                         const std::string &needle, const TensorView *out = nullptr) {
    auto r = indexer->decode(q, s->kv, table, lens, nullptr, out);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  TensorView q = s->q;
  q.shape[0] = 15;
  expectError(q, s->blockTable, s->seqLens, "index_query: expected num_decodes x decode_query_len rows");
  q.shape[0] = 4 * 5; // 5 rows a request: past max_decode_query_len 4
  expectError(q, s->blockTable, s->seqLens, "max_decode_query_len = 4");
  TensorView table = s->blockTable;
  table.strides[1] = 2;
  expectError(s->q, table, s->seqLens, "block_table: expected contiguous columns");
  table = s->blockTable;
  table.dtype = DType::F32;
  expectError(s->q, table, s->seqLens, "block_table: expected int32 [num_decodes, max_blocks]");
  table = s->blockTable;
  table.shape[0] = 3;
  expectError(s->q, table, s->seqLens, "block_table: expected shape [4, >= 1]");
  table = s->blockTable;
  table.device = Device{DeviceKind::Cuda, 0};
  expectError(s->q, table, s->seqLens, "block_table: expected device host:0");
  table = s->blockTable; // a row stride whose rows' reach overflows (checked before any product)
  table.strides[0] = int64_t{1} << 62;
  expectError(s->q, table, s->seqLens, "block_table: expected sizes and strides whose bytes fit in 64 bits");
  TensorView lens = s->seqLens;
  lens.dtype = DType::U8;
  expectError(s->q, s->blockTable, lens, "seq_lens: expected dtype int32");
  std::vector<int32_t> many(300, 0);
  lens = TensorView::contiguous(many.data(), DType::I32, {300});
  expectError(s->q, s->blockTable, lens, "seq_lens: expected at most max_num_decodes = 256 requests");
  std::vector<int32_t> out(16);
  TensorView wrongOut = TensorView::contiguous(out.data(), DType::I32, {1, 1, 16});
  expectError(s->q, s->blockTable, s->seqLens, "topk_out: expected shape [1, 16, 16]", &wrongOut);
  // No decodes: nothing to do, an empty result.
  TensorView noRows = s->q;
  noRows.shape[0] = 0;
  TensorView noTable = s->blockTable, noLens = s->seqLens;
  noTable.shape[0] = 0;
  noLens.shape[0] = 0;
  auto empty = indexer->decode(noRows, s->kv, noTable, noLens);
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_EQ(empty->numel(), 0);
}

TEST(IndexerDecode, CapacitiesAreCheckedAtCreation) {
  for (auto [field, mutate] :
       std::vector<std::pair<std::string, std::function<void(IndexerConfig &)>>>{
           {"max_num_decodes must be in [1, 256], got 257", [](IndexerConfig &c) { c.maxNumDecodes = 257; }},
           {"max_num_decodes must be in [1, 256], got 0", [](IndexerConfig &c) { c.maxNumDecodes = 0; }},
           {"max_decode_query_len must be in [1, 8], got 9", [](IndexerConfig &c) { c.maxDecodeQueryLen = 9; }}}) {
    IndexerConfig config;
    mutate(config);
    auto indexer = Indexer::create(config, Device{});
    ASSERT_FALSE(indexer.ok()) << field;
    EXPECT_NE(indexer.status().message().find(field), std::string::npos) << indexer.status().message();
  }
}

// One host Indexer called from two threads at once (issue 40: 17 of 40 decode outputs were wrong,
// the threads sharing the scores, segment keys and arrival counts): each call gets its own step's
// answer, in the indexer's own workspace or a caller's, and equals the reference.
TEST(IndexerDecode, IndexersOfOtherConfigurationsShareOneWorkspace) {
  // Layers of two configurations (4 heads; 1 head and 2 requests at most) on one workspace, steps
  // alternating: a's long rows write scores where b's arrival counts would lie if the layout put
  // them after its own (small) scores region, and b's rows are long enough to be cut into segments
  // counted in there. Each step must equal the same step on a workspace of its own.
  auto a = makeDecode(95, 4, 3, 4, 0, {40000, 40000});
  auto b = makeDecode(96, 1, 2, 4, 0, {40000, 40000});
  auto ia = decodeIndexer(*a);
  IndexerConfig small;
  small.numIndexHeads = 1;
  small.initBlocks = small.localBlocks = 1;
  small.maxNumDecodes = 2;
  small.decodeQueryLens = {4};
  small.maxModelLen = 1 << 16;
  auto created = Indexer::create(small, Device{});
  ASSERT_TRUE(created.ok()) << created.status().message();
  auto ib = std::move(created).value();
  ASSERT_TRUE(ib->warmup().ok());
  const std::vector<int32_t> wantA = values(*ia->decode(a->q, a->kv, a->blockTable, a->seqLens));
  const std::vector<int32_t> wantB = values(*ib->decode(b->q, b->kv, b->blockTable, b->seqLens));
  EXPECT_EQ(wantB, referenceTopk(b->c));
  const int64_t bytes = std::max(ia->decodeWorkspaceBytes(), ib->decodeWorkspaceBytes());
  std::vector<uint64_t> memory((bytes + 7) / 8, 0); // zeroed once, 8-byte aligned words
  const TensorView ws = TensorView::contiguous(memory.data(), DType::U8, {bytes});
  for (int round = 0; round < 3; ++round) {
    auto ra = ia->decode(a->q, a->kv, a->blockTable, a->seqLens, nullptr, nullptr, &ws);
    ASSERT_TRUE(ra.ok()) << ra.status().message();
    EXPECT_EQ(values(*ra), wantA) << "round " << round;
    auto rb = ib->decode(b->q, b->kv, b->blockTable, b->seqLens, nullptr, nullptr, &ws);
    ASSERT_TRUE(rb.ok()) << rb.status().message();
    EXPECT_EQ(values(*rb), wantB) << "round " << round;
  }
}

TEST(IndexerDecode, TwoThreadsEachGetTheirOwnStep) {
  auto a = makeDecode(31, 2, 6, 4, 0, {0, 20000});
  auto b = makeDecode(32, 2, 3, 4, 0, {0, 20000});
  auto indexer = decodeIndexer(*a);
  const std::vector<int32_t> wantA = referenceTopk(a->c), wantB = referenceTopk(b->c);
  std::vector<uint8_t> workspace(indexer->decodeWorkspaceBytes() + 16);
  // 16-byte aligned, zeroed once
  uint8_t *wsAt = workspace.data() + (16 - reinterpret_cast<uintptr_t>(workspace.data()) % 16) % 16;
  const TensorView ws = TensorView::contiguous(wsAt, DType::U8, {indexer->decodeWorkspaceBytes()});
  auto run = [&](const DecodeStep &s, const std::vector<int32_t> &want, const TensorView *w, int *wrong) {
    std::vector<int32_t> out(want.size());
    const TensorView outView = TensorView::contiguous(out.data(), DType::I32, {2, s.q.shape[0], 16});
    for (int i = 0; i < 20; ++i) {
      std::fill(out.begin(), out.end(), 12345);
      auto r = indexer->decode(s.q, s.kv, s.blockTable, s.seqLens, nullptr, &outView, w);
      *wrong += !r.ok() || out != want;
    }
  };
  int wrongA = 0, wrongB = 0, wrongC = 0;
  std::thread ta(run, std::cref(*a), std::cref(wantA), nullptr, &wrongA);
  std::thread tb(run, std::cref(*b), std::cref(wantB), &ws, &wrongB);
  std::thread tc(run, std::cref(*b), std::cref(wantB), nullptr, &wrongC);
  ta.join();
  tb.join();
  tc.join();
  EXPECT_EQ(wrongA, 0);
  EXPECT_EQ(wrongB, 0);
  EXPECT_EQ(wrongC, 0);
}
