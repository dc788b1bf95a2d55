// Decode CP's device step (kernels::planDeviceDecodeShare) on the host backend: four ranks' score
// parts write into one array laid out as the GPU ranks' PeerArray is (part k: head k's scores,
// then rank k's program flags), then each rank's top-k runs on its own part and every rank's
// flags. Each rank's top-k must equal its own head's local device decode bit for bit, padding
// requests and bad page ids included (a bad page any rank meets gives the request no blocks on
// every rank).
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "casefile/CaseGenerator.h"
#include "core/Spec.h"
#include "kernels_src/LaunchPlan.h"
#include "runtime/HostBackend.h"
#include "tuning/TargetTuning.h"

using namespace m3idx;

namespace {

constexpr int kRanks = 4;

struct ShareStep {
  Case c;          // the group's batch: q [T, 4, 128], one head a rank
  int64_t W = 0, maxSeqLen = 0;
};

ShareStep makeStep(uint64_t seed, int decodes, Range context) {
  GenOptions o;
  o.seed = seed;
  o.numHeads = kRanks;
  o.numDecodes = decodes;
  o.numPrefills = 0;
  o.decodeContext = context;
  o.extraPages = 3;
  StatusOr<Case> c = generateCase(o);
  EXPECT_TRUE(c.ok()) << c.status().message();
  ShareStep s{std::move(*c)};
  s.maxSeqLen = context.max;
  s.W = spec::scoreWidth(spec::blocksFor(s.maxSeqLen));
  return s;
}

// The batch as rank `head` holds it: its head's q, numHeads 1 (qOf: its storage).
BatchView rankView(const ShareStep &s, int head, std::vector<uint8_t> &qOf) {
  BatchView v = s.c.view();
  const int64_t T = v.numRows;
  qOf.resize(T * spec::kIndexHeadDim);
  for (int64_t r = 0; r < T; ++r)
    std::memcpy(&qOf[r * spec::kIndexHeadDim], v.q + (r * kRanks + head) * spec::kIndexHeadDim, spec::kIndexHeadDim);
  v.q = qOf.data();
  v.params.numHeads = 1;
  return v;
}

// Every rank's CP top-k [T, 16] of a step, against each rank's local device decode.
class ShareGroup {
public:
  explicit ShareGroup(const ShareStep &s) : s_(s) {
    const int64_t T = s.c.view().numRows;
    // A part: the step's rows of scores, the flags behind them, rounded to whole score rows.
    const int64_t rowBytes = s.W * 4, flagBytes = 1 << 16;
    scoreHeadRows_ = T + (flagBytes + rowBytes - 1) / rowBytes;
    partBytes_ = scoreHeadRows_ * rowBytes;
    flagsOffset_ = T * rowBytes;
    array_.assign(kRanks * partBytes_, 0xEE); // stale bytes where nothing is written this step
  }
  std::vector<std::vector<int32_t>> cpTopk() {
    const BatchView group = s_.c.view();
    const int64_t T = group.numRows;
    for (int r = 0; r < kRanks; ++r) { // every rank's score part first, as the device's order makes it
      BatchView v = group;
      v.params.numHeads = 1; // the rank's; its q is the group's [T, 4, 128]
      Status st = hosts_[r].executeDeviceDecodeShare(v, s_.W, s_.maxSeqLen, share(r), array_.data(), partBytes_,
                                                      flagsOffset_, kernels::kScoreDecode, nullptr);
      EXPECT_TRUE(st.ok()) << st.message();
    }
    std::vector<std::vector<int32_t>> topk(kRanks, std::vector<int32_t>(T * spec::kTopkBlocks, 7));
    for (int r = 0; r < kRanks; ++r) {
      std::vector<uint8_t> q;
      Status st = hosts_[r].executeDeviceDecodeShare(rankView(s_, r, q), s_.W, s_.maxSeqLen, share(r), array_.data(),
                                                      partBytes_, flagsOffset_, kernels::kTopkDecode, topk[r].data());
      EXPECT_TRUE(st.ok()) << st.message();
    }
    return topk;
  }
  std::vector<int32_t> localTopk(int r) {
    std::vector<uint8_t> q;
    const BatchView v = rankView(s_, r, q);
    const int64_t T = v.numRows;
    const tuning::TargetTuning &t = local_.tuning();
    const kernels::DecodeWorkspaceLayout layout = t.decodeWorkspace(1, T, s_.W);
    std::vector<uint8_t> workspace(layout.bytes, 0);
    std::vector<int32_t> topk(T * spec::kTopkBlocks, 7);
    Status st = local_.executeDeviceDecode(v, s_.W, s_.maxSeqLen, layout, workspace.data(), topk.data());
    EXPECT_TRUE(st.ok()) << st.message();
    return topk;
  }
  runtime::HostBackend &host(int r) { return hosts_[r]; }

private:
  kernels::DecodeShare share(int r) const {
    return {r, kRanks, scoreHeadRows_, static_cast<int64_t>(partBytes_ / 4)};
  }
  const ShareStep &s_;
  int64_t scoreHeadRows_ = 0;
  size_t partBytes_ = 0, flagsOffset_ = 0;
  std::vector<uint8_t> array_;
  runtime::HostBackend hosts_[kRanks], local_;
};

TEST(DeviceDecodeShare, EveryRankEqualsItsLocalDecodeBitForBit) {
  // Requests of 1 to 9000 tokens (some ranks have no block of the short ones), and padding.
  for (uint64_t seed : {1, 2, 3}) {
    ShareStep s = makeStep(seed, 7, {1, 9000});
    int32_t *seqLens = s.c.seqLens.as<int32_t>();
    seqLens[2] = 0; // padding: every row of it all -1
    seqLens[5] = 0;
    ShareGroup g(s);
    const std::vector<std::vector<int32_t>> cp = g.cpTopk();
    for (int r = 0; r < kRanks; ++r)
      EXPECT_EQ(cp[r], g.localTopk(r)) << "seed " << seed << ", rank " << r;
    // the same step again over the last one's array
    EXPECT_EQ(g.cpTopk(), cp) << "seed " << seed;
  }
}

TEST(DeviceDecodeShare, ABadPageAnyRankMeetsEmptiesTheRequestOnEveryRank) {
  ShareStep s = makeStep(11, 3, {3000, 3000}); // 24 blocks each
  const BatchView v = s.c.view();
  int32_t *table = s.c.blockTable.as<int32_t>();
  for (int64_t block : {int64_t{0}, int64_t{5}, int64_t{10}, int64_t{23}}) { // ranks 0, 1, 2, 3 score them
    int32_t &entry = table[1 * v.maxBlocks + block];
    const int32_t page = entry;
    entry = static_cast<int32_t>(v.numPages);
    ShareGroup g(s);
    const std::vector<std::vector<int32_t>> cp = g.cpTopk();
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(cp[r], g.localTopk(r)) << "bad block " << block << ", rank " << r;
      for (int64_t i = 4 * spec::kTopkBlocks; i < 8 * spec::kTopkBlocks; ++i)
        ASSERT_EQ(cp[r][i], -1) << "bad block " << block << ", rank " << r;
      // the rank that met it says so
      EXPECT_EQ(g.host(r).status()[1] != 0, r == block % kRanks) << "bad block " << block << ", rank " << r;
    }
    entry = page;
  }
}

TEST(DeviceDecodeShare, BadSharesAreNamed) {
  ShareStep s = makeStep(5, 2, {100, 2000});
  BatchView v = s.c.view();
  v.params.numHeads = 1;
  const kernels::StepTuning group = tuning::hostTuning().forStep(kRanks, 4, 2), own = tuning::hostTuning().forStep(1, 4, 2);
  auto error = [&](kernels::DecodeShare share, int heads = 1) {
    BatchView b = v;
    b.params.numHeads = heads;
    StatusOr<kernels::SharePlans> p = kernels::planDeviceDecodeShare(b, s.W, s.maxSeqLen, group, own, share);
    return p.ok() ? std::string("ok") : p.status().message();
  };
  EXPECT_EQ(error({0, 4, 8, 1 << 20}), "ok");
  EXPECT_NE(error({0, 4, 8, 1 << 20}, 2).find("decode CP heads"), std::string::npos);
  EXPECT_NE(error({4, 4, 8, 1 << 20}).find("decode CP rank"), std::string::npos);
  EXPECT_NE(error({0, 1, 8, 1 << 20}).find("decode CP rank"), std::string::npos);
  EXPECT_NE(error({0, 4, 7, 1 << 20}).find("decode CP score head rows"), std::string::npos);
  EXPECT_NE(error({0, 4, 8, 1}).find("decode CP flag stride"), std::string::npos);
}

} // namespace
