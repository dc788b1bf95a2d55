// The Indexer's GPU engine on a fake device (every machine): what it uploads, launches and waits
// for. A mixed step goes up as one joined batch in one stream-ordered copy; every kernel runs on
// the caller's stream and writes the caller's (or the indexer's own) top-k buffer; a step on a
// second stream first waits for the last step; steady state allocates nothing; decode CP is refused.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "casefile/CaseGenerator.h"
#include "core/Spec.h"
#include "kernels_src/LaunchPlan.h"
#include "runtime/api/BatchMetadata.h"
#include "runtime/api/IndexerEngine.h"
#include "runtime/gpu/GpuBackend.h"
#include "tuning/TargetTuning.h"

using namespace m3idx;

namespace {

// A DeviceApi over host memory that records what it is asked to do; kernels do not run.
struct FakeDevice {
  struct Launch {
    std::string kernel;
    unsigned programs, threads;
    void *stream;
    std::vector<uint64_t> args; // the leading values a check needs (see argsOf)
    bool afterPrevious;
  };
  std::map<uint64_t, std::vector<uint8_t>> memory;
  uint64_t next = 0x10000;
  int allocations = 0, uploads = 0;
  std::vector<void *> uploadStreams;
  std::vector<size_t> uploadBytes;
  std::vector<Launch> launches;
  std::vector<std::pair<void *, void *>> waits;  // (stream, event)
  std::map<void *, void *> lastRecordedOn;       // event -> stream
  std::vector<std::string> names;                // function handles point into this
  std::vector<void *> memsetStreams;
  static constexpr uint8_t kUninitialised = 0xA5;
  int syncs = 0;
  bool capturing = false;
  runtime::DeviceApi api;

  // Values before the first scalar: every buffer's descriptor (5 values each) of score_prefill
  // (8 buffers), score_decode (7), topk_decode (6), topk_prefill (3 of its 5).
  static size_t argsOf(const std::string &k) {
    return k == "score_prefill" ? 40 : k == "score_decode" ? 35 : k == "topk_decode" ? 30 : 15;
  }
  // Where a top-k kernel's topk buffer is among those values.
  static size_t topkArgOf(const std::string &k) {
    return k == "topk_decode" ? 15 : k == "topk_prefill" ? 10 : 0;
  }
  // Bytes from `address` to the end of its allocation (0 outside every one).
  size_t bytesFrom(uint64_t address) {
    auto it = memory.upper_bound(address);
    if (it == memory.begin())
      return 0;
    --it;
    return address < it->first + it->second.size() ? it->first + it->second.size() - address : 0;
  }
  uint8_t *at(uint64_t address) {
    auto it = memory.upper_bound(address);
    if (it == memory.begin())
      return nullptr;
    --it;
    return address < it->first + it->second.size() ? it->second.data() + (address - it->first) : nullptr;
  }

  FakeDevice() {
    names.reserve(16);
    api.platform = "FAKE";
    api.errorString = [](int) { return "fake failure"; };
    api.openDevice = [](int, std::string *name) { *name = "fake"; return 0; };
    api.alloc = [this](uint64_t *p, size_t n) {
      *p = next;
      memory[next].assign(n, kUninitialised); // as cuMemAlloc: whatever was there
      next += (n + 0xfff) / 0x1000 * 0x1000 + 0x1000;
      ++allocations;
      return 0;
    };
    api.free = [this](uint64_t p) { return memory.erase(p) ? 0 : 1; };
    // memcpy of 0 bytes may still not take null (UBSan found one): copies skip empty ranges.
    api.upload = [this](uint64_t d, const void *s, size_t n) {
      if (n)
        std::memcpy(at(d), s, n);
      return 0;
    };
    api.uploadAsync = [this](uint64_t d, const void *s, size_t n, void *stream) {
      if (n)
        std::memcpy(at(d), s, n);
      ++uploads;
      uploadStreams.push_back(stream);
      uploadBytes.push_back(n);
      return 0;
    };
    api.download = [this](void *d, uint64_t s, size_t n) {
      if (n)
        std::memcpy(d, at(s), n);
      return 0;
    };
    api.copy = [](uint64_t, uint64_t, size_t) { return 0; };
    api.synchronize = [] { return 0; };
    api.loadModule = [](void **m, const void *) { *m = reinterpret_cast<void *>(1); return 0; };
    api.getFunction = [this](void **f, void *, const char *name) {
      names.push_back(name);
      *f = &names.back();
      return 0;
    };
    api.launch = [this](void *f, unsigned programs, unsigned threads, void *stream, void **params,
                        bool afterPrevious) {
      Launch l{*static_cast<std::string *>(f), programs, threads, stream, {}, afterPrevious};
      for (size_t i = 0; i < argsOf(l.kernel); ++i)
        l.args.push_back(*static_cast<uint64_t *>(params[i]));
      launches.push_back(l);
      return 0;
    };
    api.eventCreate = [this](void **e) { *e = reinterpret_cast<void *>(next++); return 0; };
    api.eventDestroy = [](void *) { return 0; };
    api.eventRecord = [this](void *e, void *stream) { lastRecordedOn[e] = stream; return 0; };
    api.eventSynchronize = [](void *) { return 0; };
    api.streamWaitEvent = [this](void *stream, void *e) { waits.push_back({stream, e}); return 0; };
    api.eventElapsedMs = [](float *ms, void *, void *) { *ms = 0; return 0; };
    api.memsetAsync = [this](uint64_t d, uint8_t v, size_t n, void *stream) {
      if (n)
        std::memset(at(d), v, n);
      memsetStreams.push_back(stream);
      return 0;
    };
    api.streamSynchronize = [this](void *) { ++syncs; return 0; };
    api.streamIsCapturing = [this](void *, bool *on) { *on = capturing; return 0; };
  }
};

void *fakeStream(uintptr_t n) { return reinterpret_cast<void *>(n); }

struct EngineStep {
  FakeDevice device;
  Case c;
  runtime::BatchMetadata split;
  std::unique_ptr<Indexer> indexer;
  TensorView q, kv;

  explicit EngineStep(int decodes, int prefills, tuning::PrefillForm prefill = tuning::PrefillForm{},
                      bool warm = true) {
    GenOptions o;
    o.seed = 11;
    o.mode = ValueMode::Exact;
    o.numHeads = 2;
    o.numDecodes = decodes;
    o.numPrefills = prefills;
    o.decodeContext = {0, 3000};
    o.prefillQueryLen = {1, 40};
    c = *generateCase(o);
    const BatchView v = c.view();
    runtime::splitBatch(v, split);
    IndexerConfig config;
    config.numIndexHeads = 2;
    config.initBlocks = v.params.initBlocks;
    config.localBlocks = v.params.localBlocks;
    auto backend = runtime::GpuBackend::create(&device.api, "cuda", 0, 32,
                                               [](const dsl::Kernel &, const kernels::KernelConfig &)
                                                   -> StatusOr<std::string> { return std::string("image"); },
                                               tuning::TargetTuning{"sm_90", prefill});
    EXPECT_TRUE(backend.ok());
    indexer = std::move(createIndexer(config, Device{DeviceKind::Cuda, 0},
                                      makeGpuIndexerEngine(config, std::move(backend).value()))
                            .value());
    if (warm) {
      EXPECT_TRUE(indexer->warmup().ok());
    }
    uint64_t qAt, kvAt; // the engine never reads them: addresses are enough
    device.api.alloc(&qAt, v.numRows * 2 * 128);
    device.api.alloc(&kvAt, v.numPages * spec::kPageBytes);
    const Device cuda{DeviceKind::Cuda, 0};
    q = TensorView::contiguous(reinterpret_cast<void *>(qAt), DType::U8, {v.numRows, 2, 128}, cuda);
    kv = TensorView::contiguous(reinterpret_cast<void *>(kvAt), DType::U8, {v.numPages, 9216}, cuda);
  }
  StatusOr<ForwardResult> forward(void *stream, const TensorView *out = nullptr) {
    return indexer->forward(q, kv, split.metadata(), stream, out);
  }
  // The case's block table in fake device memory, given as the parts' device tables: rows of one
  // table, or (apart) two tables whose rows do not follow each other.
  uint64_t deviceTables(bool apart) {
    const BatchView v = c.view();
    const int64_t D = v.params.numDecodes, R = v.numRequests, M = v.maxBlocks;
    uint64_t at;
    device.api.alloc(&at, R * M * 4 + (apart ? 4096 : 0));
    const uint64_t prefillAt = at + 4 * D * M + (apart ? 4096 : 0);
    device.api.upload(at, v.blockTable, D * M * 4);
    device.api.upload(prefillAt, v.blockTable + D * M, (R - D) * M * 4);
    const Device cuda{DeviceKind::Cuda, 0};
    split.decode.deviceBlockTable =
        TensorView::contiguous(reinterpret_cast<void *>(at), DType::I32, {D, M}, cuda);
    split.prefill.deviceBlockTable =
        TensorView::contiguous(reinterpret_cast<void *>(prefillAt), DType::I32, {R - D, M}, cuda);
    return at;
  }
  // The case's block table and seq_lens in fake device memory (the device decode's metadata) and
  // room for its top-k, as views.
  struct DecodeIo {
    uint64_t tableAt, lensAt, outAt;
    TensorView table, lens, out;
  };
  DecodeIo deviceDecodeIo() {
    const BatchView v = c.view();
    const Device cuda{DeviceKind::Cuda, 0};
    DecodeIo io;
    device.api.alloc(&io.tableAt, v.numRequests * v.maxBlocks * 4);
    device.api.alloc(&io.lensAt, v.numRequests * 4);
    device.api.alloc(&io.outAt, 2 * v.numRows * 16 * 4);
    device.api.upload(io.tableAt, v.blockTable, v.numRequests * v.maxBlocks * 4);
    device.api.upload(io.lensAt, v.seqLens, v.numRequests * 4);
    io.table = TensorView::contiguous(reinterpret_cast<void *>(io.tableAt), DType::I32,
                                      {v.numRequests, v.maxBlocks}, cuda);
    io.lens = TensorView::contiguous(reinterpret_cast<void *>(io.lensAt), DType::I32, {v.numRequests}, cuda);
    io.out = TensorView::contiguous(reinterpret_cast<void *>(io.outAt), DType::I32, {2, v.numRows, 16}, cuda);
    return io;
  }
  // The int32 array a launch argument's memref descriptor (5 values from `first`) points at.
  std::vector<int32_t> array(const FakeDevice::Launch &l, size_t first) {
    const int32_t *p = reinterpret_cast<const int32_t *>(device.at(l.args[first]));
    return std::vector<int32_t>(p, p + l.args[first + 3]);
  }
};

} // namespace

TEST(GpuIndexerEngine, MixedStepIsOneJoinedBatchOnTheCallersStream) {
  EngineStep s(5, 2);
  const BatchView v = s.c.view();
  const int64_t D = 5, R = v.numRequests, M = v.maxBlocks, T = v.numRows;
  std::vector<int32_t> out(2 * T * 16);
  void *outAt = nullptr;
  s.device.api.alloc(reinterpret_cast<uint64_t *>(&outAt), out.size() * 4);
  TensorView topk = TensorView::contiguous(outAt, DType::I32, {2, T, 16}, Device{DeviceKind::Cuda, 0});
  auto r = s.forward(fakeStream(7), &topk);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->topk.data, outAt);
  EXPECT_EQ(s.device.uploads, 1);
  EXPECT_EQ(s.device.uploadStreams, std::vector<void *>{fakeStream(7)});
  std::vector<std::string> kernels;
  for (const auto &l : s.device.launches) {
    kernels.push_back(l.kernel);
    EXPECT_EQ(l.stream, fakeStream(7)) << l.kernel;
    const size_t topkArg = FakeDevice::topkArgOf(l.kernel);
    if (topkArg) {
      EXPECT_EQ(l.args[topkArg], reinterpret_cast<uint64_t>(outAt)) << l.kernel;
    }
  }
  ASSERT_GE(kernels.size(), 4u);
  EXPECT_EQ(kernels[0], "score_decode");
  EXPECT_EQ(kernels[1], "score_prefill");
  // The joined batch: decode requests' rows of the table, then the prefill ones; seq_lens as the
  // case has them; query_start_loc over all rows (decode_query_len apart, then the prefill rows).
  const auto &score = s.device.launches[1]; // score_prefill: it reads query_start_loc too
  EXPECT_EQ(score.args[0], reinterpret_cast<uint64_t>(s.q.data));
  EXPECT_EQ(score.args[5], reinterpret_cast<uint64_t>(s.kv.data));
  const std::vector<int32_t> table = s.array(score, 10), seqLens = s.array(score, 15),
                             qsl = s.array(score, 20);
  ASSERT_EQ(static_cast<int64_t>(table.size()), R * M);
  for (int64_t i = 0; i < R; ++i)
    for (int64_t b = 0; b < spec::blocksFor(v.seqLens[i]); ++b)
      EXPECT_EQ(table[i * M + b], v.blockTable[i * M + b]) << "request " << i << " block " << b;
  EXPECT_EQ(seqLens, std::vector<int32_t>(v.seqLens, v.seqLens + R));
  EXPECT_EQ(qsl, std::vector<int32_t>(v.queryStartLoc, v.queryStartLoc + R + 1));
  EXPECT_EQ(qsl[D], D * v.params.decodeQueryLen);
}

// The top-k kernels await the score kernels themselves (grid.await), so they may start while
// those end (CUDA's programmatic dependent launch), but never as a step's first launch: before
// their wait they read the metadata, which a caller's kernel ahead of the step may still write.
TEST(GpuIndexerEngine, TopkStartsEarlyOnlyBehindTheStepsOwnLaunches) {
  for (auto [decodes, prefills] : {std::pair{5, 2}, std::pair{4, 0}, std::pair{0, 3}}) {
    EngineStep s(decodes, prefills);
    ASSERT_TRUE(s.forward(fakeStream(7)).ok());
    ASSERT_FALSE(s.device.launches.empty());
    EXPECT_FALSE(s.device.launches[0].afterPrevious);
    for (const auto &l : s.device.launches)
      EXPECT_EQ(l.afterPrevious, l.kernel.rfind("topk_", 0) == 0) << l.kernel << " of " << decodes << "+" << prefills;
  }
  EngineStep s(4, 0);
  auto [tableAt, lensAt, outAt, table, lens, out] = s.deviceDecodeIo();
  s.device.launches.clear();
  ASSERT_TRUE(s.indexer->decode(s.q, s.kv, table, lens, fakeStream(9), &out).ok());
  ASSERT_EQ(s.device.launches.size(), 2u);
  EXPECT_FALSE(s.device.launches[0].afterPrevious);
  EXPECT_TRUE(s.device.launches[1].afterPrevious);
}

TEST(GpuIndexerEngine, StepOnAnotherStreamWaitsForTheLastAndSteadyStateAllocatesNothing) {
  EngineStep s(3, 1);
  auto first = s.forward(fakeStream(1));
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(s.device.waits.empty());
  const int allocations = s.device.allocations;
  const int64_t scratch = s.indexer->scratchAllocations();
  // The indexer's own top-k is device memory of the fake, whole.
  EXPECT_NE(s.device.at(reinterpret_cast<uint64_t>(first->topk.data)), nullptr);
  ASSERT_TRUE(s.forward(fakeStream(1)).ok());
  EXPECT_TRUE(s.device.waits.empty()); // same stream: ordered already
  ASSERT_TRUE(s.forward(fakeStream(2)).ok());
  ASSERT_EQ(s.device.waits.size(), 1u);
  EXPECT_EQ(s.device.waits[0].first, fakeStream(2));
  EXPECT_EQ(s.device.lastRecordedOn[s.device.waits[0].second], fakeStream(2)); // re-recorded since
  ASSERT_TRUE(s.forward(fakeStream(2)).ok());
  EXPECT_EQ(s.device.waits.size(), 1u);
  EXPECT_EQ(s.device.allocations, allocations);
  EXPECT_EQ(s.indexer->scratchAllocations(), scratch);
  EXPECT_EQ(s.indexer->compilesAfterWarmup(), 0);
}

// Indexer::plan uploads a step's metadata once, into the plan's own memory; its runs (layers) only
// launch, each as forward() would, a run on another stream than the upload first waiting for it.
// A dropped plan's memory serves the next plan.
TEST(GpuIndexerEngine, APlanUploadsOnceAndItsRunsOnlyLaunch) {
  EngineStep s(3, 2);
  ASSERT_TRUE(s.forward(fakeStream(7)).ok());
  const std::vector<FakeDevice::Launch> forwardLaunches = s.device.launches;
  const auto &fs = forwardLaunches[1]; // score_prefill reads the table, seq_lens and query_start_loc
  ASSERT_EQ(fs.kernel, "score_prefill");
  const std::vector<int32_t> wantTable = s.array(fs, 10), wantLens = s.array(fs, 15), wantQsl = s.array(fs, 20);
  s.device.launches.clear();
  s.device.uploads = 0;
  s.device.uploadStreams.clear();
  s.device.waits.clear();
  auto plan = s.indexer->plan(s.split.metadata(), fakeStream(7));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(s.device.uploads, 1);
  EXPECT_TRUE(s.device.launches.empty());
  for (void *stream : {fakeStream(7), fakeStream(7), fakeStream(9)}) {
    s.device.launches.clear();
    ASSERT_TRUE(s.indexer->run(**plan, s.q, s.kv, stream).ok());
    EXPECT_EQ(s.device.uploads, 1); // runs upload nothing
    ASSERT_EQ(s.device.launches.size(), forwardLaunches.size());
    for (size_t i = 0; i < forwardLaunches.size(); ++i) {
      EXPECT_EQ(s.device.launches[i].kernel, forwardLaunches[i].kernel);
      EXPECT_EQ(s.device.launches[i].programs, forwardLaunches[i].programs);
      EXPECT_EQ(s.device.launches[i].stream, stream);
    }
    const auto &score = s.device.launches[1];
    EXPECT_EQ(s.array(score, 10), wantTable);
    EXPECT_EQ(s.array(score, 15), wantLens);
    EXPECT_EQ(s.array(score, 20), wantQsl);
  }
  ASSERT_EQ(s.device.waits.size(), 1u); // the run on stream 9 waited for the step before it
  EXPECT_EQ(s.device.waits[0].first, fakeStream(9));
  // A second plan while the first lives gets memory of its own; a plan made after one is dropped
  // takes the dropped one's.
  auto second = s.indexer->plan(s.split.metadata(), fakeStream(9));
  ASSERT_TRUE(second.ok());
  const int allocations = s.device.allocations;
  plan->reset();
  auto third = s.indexer->plan(s.split.metadata(), fakeStream(9));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(s.device.allocations, allocations);
  s.device.launches.clear();
  ASSERT_TRUE(s.indexer->run(**third, s.q, s.kv, fakeStream(9)).ok());
  EXPECT_EQ(s.array(s.device.launches[1], 10), wantTable);
}

TEST(GpuIndexerEngine, DeviceBlockTableIsReadInPlaceAndOnlySmallArraysGoUp) {
  for (auto [decodes, prefills] : {std::pair{4, 0}, std::pair{0, 2}, std::pair{4, 2}}) {
    EngineStep host(decodes, prefills), s(decodes, prefills);
    ASSERT_TRUE(host.forward(fakeStream(3)).ok());
    const BatchView v = s.c.view();
    const uint64_t table = s.deviceTables(/*apart=*/false);
    const uint64_t prefillTable = table + 4 * decodes * v.maxBlocks;
    ASSERT_TRUE(s.forward(fakeStream(3)).ok());
    ASSERT_FALSE(s.device.launches.empty());
    for (const auto &l : s.device.launches) {
      if (l.kernel.rfind("score", 0) == 0) {
        EXPECT_EQ(l.args[10], decodes ? table : prefillTable) << decodes << " + " << prefills;
      }
    }
    // The upload is the host-table one less the table's section (16-byte aligned).
    ASSERT_EQ(s.device.uploadBytes.size(), 1u);
    EXPECT_EQ(host.device.uploadBytes.at(0) - s.device.uploadBytes[0],
              size_t((v.numRequests * v.maxBlocks + 3) / 4 * 16));
  }
}

TEST(GpuIndexerEngine, MixedDeviceTablesApartAreJoinedFromTheHost) {
  EngineStep s(3, 2);
  const BatchView v = s.c.view();
  const uint64_t table = s.deviceTables(/*apart=*/true);
  ASSERT_TRUE(s.forward(fakeStream(3)).ok());
  const auto &score = s.device.launches.at(0);
  EXPECT_NE(score.args[10], table);
  EXPECT_EQ(s.array(score, 10), std::vector<int32_t>(v.blockTable, v.blockTable + v.numRequests * v.maxBlocks));
}

TEST(GpuIndexerEngine, DeviceBlockTableIsChecked) {
  EngineStep s(3, 1);
  s.deviceTables(false);
  DecodeMetadata d = s.split.decode;
  d.deviceBlockTable.shape[0] -= 1;
  auto r = s.indexer->forward(s.q, s.kv, IndexerMetadata{&d, &s.split.prefill}, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("decode.device_block_table: expected the block table's shape"),
            std::string::npos)
      << r.status().message();
  d = s.split.decode;
  d.deviceBlockTable.device = Device{};
  r = s.indexer->forward(s.q, s.kv, IndexerMetadata{&d, &s.split.prefill}, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("decode.device_block_table: expected device cuda:0, got host:0"),
            std::string::npos)
      << r.status().message();
}

// sm_90's prefill programs take 64 columns on a warpgroup: warm-up obtains that config (no kernel
// loaded by the step), the step's tile table has one tile per 64 / heads rows of a request, and
// score_prefill launches with 4 warps' threads (every other kernel with one warp's).
TEST(GpuIndexerEngine, PrefillTilesAndThreadsFollowTheBackendsForm) {
  for (tuning::PrefillForm form : {tuning::PrefillForm{}, (*tuning::tuningFor("sm_90"))->prefill}) {
    EngineStep s(2, 3, form);
    ASSERT_TRUE(s.forward(fakeStream(1)).ok());
    EXPECT_EQ(s.indexer->compilesAfterWarmup(), 0) << form.columns;
    const BatchView v = s.c.view();
    const int tile = tuning::TargetTuning{"sm_90", form}.prefillRowTile(2);
    int prefills = 0;
    for (const auto &l : s.device.launches) {
      const bool prefill = l.kernel == "score_prefill";
      EXPECT_EQ(l.threads, 32u * (prefill ? static_cast<unsigned>(form.warps) : 1u)) << l.kernel;
      if (prefill) {
        ++prefills;
        EXPECT_EQ(static_cast<int64_t>(l.args[28]), kernels::prefillTileCount(v, tile)) << form.columns;
      }
    }
    EXPECT_EQ(prefills, 1);
  }
  EXPECT_EQ((*tuning::tuningFor("sm_90"))->prefill.warps, 4);
}

TEST(GpuIndexerEngine, DecodeCpIsRefusedWithTheReason) {
  EngineStep s(1, 0);
  struct AnyGroup final : Communicator {
    int rank() const override { return 0; }
    int worldSize() const override { return 4; }
    Status allGather(const void *, void *, size_t, Stream) override { return Status(); }
    Status allToAll(const void *, void *, size_t, Stream) override { return Status(); }
  };
  Status st = s.indexer->initDecodeCp(std::make_shared<AnyGroup>());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("decode CP over a Communicator: not served on cuda devices"), std::string::npos)
      << st.message();
}

// A decode whose kernels were not loaded at warm-up (decode_query_len 1; decodeQueryLens holds 4)
// refuses to load them inside a graph capture, naming the fix, and launches nothing; outside one
// it loads them, after which a capture replans new shapes (the plan is host arithmetic) freely.
TEST(GpuIndexerEngine, DecodeRefusesToLoadKernelsInsideACapture) {
  EngineStep s(4, 0);
  const BatchView v = s.c.view();
  const Device cuda{DeviceKind::Cuda, 0};
  auto [tableAt, lensAt, outAt, table, lens, out] = s.deviceDecodeIo();
  TensorView oneRow = s.q;
  oneRow.shape[0] = v.numRequests; // decode_query_len 1
  out = TensorView::contiguous(out.data, DType::I32, {2, v.numRequests, 16}, cuda);
  s.device.capturing = true;
  const int allocations = s.device.allocations;
  auto refused = s.indexer->decode(oneRow, s.kv, table, lens, fakeStream(4), &out);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("would load score_decode (heads=2,rows=1"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("IndexerConfig::decodeQueryLens"), std::string::npos);
  EXPECT_TRUE(s.device.launches.empty());
  EXPECT_EQ(s.device.allocations, allocations);
  s.device.capturing = false;
  ASSERT_TRUE(s.indexer->decode(oneRow, s.kv, table, lens, fakeStream(4), &out).ok());
  EXPECT_GT(s.indexer->compilesAfterWarmup(), 0);
  s.device.capturing = true;
  EXPECT_TRUE(s.indexer->decode(oneRow, s.kv, table, lens, fakeStream(4), &out).ok());
  table.shape[0] = lens.shape[0] = oneRow.shape[0] = 2; // a new shape, its kernels loaded
  out = TensorView::contiguous(out.data, DType::I32, {2, 2, 16}, cuda);
  auto fewer = s.indexer->decode(oneRow, s.kv, table, lens, fakeStream(4), &out);
  EXPECT_TRUE(fewer.ok()) << fewer.status().message();
  EXPECT_EQ(s.device.allocations, allocations);

  // Without warmup() nothing is reserved: the indexer's own workspace would be allocated.
  EngineStep cold(4, 0, tuning::PrefillForm{}, /*warm=*/false);
  cold.device.capturing = true;
  table.shape[0] = lens.shape[0] = v.numRequests;
  auto own = cold.indexer->decode(cold.q, cold.kv, table, lens, fakeStream(4));
  ASSERT_FALSE(own.ok());
  EXPECT_NE(own.status().message().find("would allocate the indexer's own workspace"), std::string::npos)
      << own.status().message();
  EXPECT_TRUE(cold.device.launches.empty());
}

// The graph-safe decode: after warm-up a step in a caller's workspace is its kernels on the
// caller's stream, over the caller's device seq_lens and block table, with no upload, memset,
// allocation, event or wait; its grids come from shapes, whatever the lengths hold.
TEST(GpuIndexerEngine, DeviceDecodeIsOnlyLaunchesWhateverTheLengths) {
  EngineStep s(4, 0);
  const Device cuda{DeviceKind::Cuda, 0};
  auto [tableAt, lensAt, outAt, table, lens, out] = s.deviceDecodeIo();
  uint64_t wsAt;
  s.device.api.alloc(&wsAt, s.indexer->decodeWorkspaceBytes());
  std::memset(s.device.at(wsAt), 0, s.indexer->decodeWorkspaceBytes()); // zeroed once, as a caller does
  const TensorView ws = TensorView::contiguous(reinterpret_cast<void *>(wsAt), DType::U8,
                                               {s.indexer->decodeWorkspaceBytes()}, cuda);

  auto step = [&] {
    s.device.launches.clear();
    s.device.memsetStreams.clear();
    const int allocations = s.device.allocations, uploads = s.device.uploads, syncs = s.device.syncs;
    const size_t waits = s.device.waits.size(), records = s.device.lastRecordedOn.size();
    auto r = s.indexer->decode(s.q, s.kv, table, lens, fakeStream(9), &out, &ws);
    EXPECT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(s.device.allocations, allocations);
    EXPECT_EQ(s.device.uploads, uploads);
    EXPECT_EQ(s.device.syncs, syncs);
    EXPECT_EQ(s.device.waits.size(), waits);
    EXPECT_EQ(s.device.lastRecordedOn.size(), records);
    EXPECT_TRUE(s.device.memsetStreams.empty());
    std::vector<std::pair<std::string, unsigned>> grids;
    for (const auto &l : s.device.launches) {
      EXPECT_EQ(l.stream, fakeStream(9)) << l.kernel;
      grids.push_back({l.kernel, l.programs});
      if (l.kernel == "score_decode") {
        EXPECT_EQ(l.args[10], tableAt);
        EXPECT_EQ(l.args[15], lensAt);
      }
      for (size_t a = 0; a < l.args.size(); a += 5) // scratch buffers all lie in the workspace
        if (l.args[a] != tableAt && l.args[a] != lensAt && l.args[a] != outAt && l.args[a] != 0 &&
            l.args[a] != reinterpret_cast<uint64_t>(s.q.data) && l.args[a] != reinterpret_cast<uint64_t>(s.kv.data) &&
            s.device.bytesFrom(l.args[a]) != 16) { // 16: the status words
          EXPECT_GE(l.args[a], wsAt) << l.kernel << " buffer " << a / 5;
          EXPECT_LT(l.args[a], wsAt + ws.shape[0]) << l.kernel << " buffer " << a / 5;
        }
      if (const size_t at = FakeDevice::topkArgOf(l.kernel)) {
        EXPECT_EQ(l.args[at], outAt) << l.kernel;
      }
    }
    return grids;
  };
  const auto first = step();
  ASSERT_EQ(first.size(), 2u); // the top-k's last segment program of a row merges: no third launch
  EXPECT_EQ(first[0].first, "score_decode");
  EXPECT_EQ(first[1].first, "topk_decode");
  // Its arrival counts (buffer 5) lie in the zeroed workspace: kernels only ever put them back to 0.
  const uint64_t arrivals = s.device.launches[1].args[25];
  const size_t arrivalBytes = s.device.bytesFrom(arrivals);
  ASSERT_GT(arrivalBytes, 0u);
  EXPECT_EQ(std::count(s.device.at(arrivals), s.device.at(arrivals) + arrivalBytes, 0), static_cast<long>(arrivalBytes));
  // Other lengths (a padding request, a long one, a bad one): the same launches.
  std::vector<int32_t> other = {0, 1 << 20, 5, -3};
  s.device.api.upload(lensAt, other.data(), other.size() * 4);
  EXPECT_EQ(step(), first);
  // Another shape (the first two requests) is planned anew: fewer programs, the same buffers.
  TensorView allTable = table, allLens = lens, allQ = s.q;
  table.shape[0] = lens.shape[0] = 2;
  s.q.shape[0] = 2 * 4;
  TensorView allOut = out;
  out = TensorView::contiguous(out.data, DType::I32, {2, 2 * 4, 16}, cuda);
  const auto fewer = step();
  ASSERT_EQ(fewer.size(), first.size());
  EXPECT_LT(fewer[0].second, first[0].second);
  table = allTable, lens = allLens, s.q = allQ, out = allOut;
  EXPECT_EQ(step(), first);

  // Status words: read after waiting for the caller's stream; the synchronous check cannot run
  // inside a capture and says so.
  auto status = s.indexer->readDeviceStatus(fakeStream(9));
  ASSERT_TRUE(status.ok()) << status.status().message();
  EXPECT_EQ(s.device.syncs, 1);
  ::setenv("M3IDX_CHECK_DECODE", "1", 1);
  s.device.capturing = true;
  auto captured = s.indexer->decode(s.q, s.kv, table, lens, fakeStream(9), &out, &ws);
  ::unsetenv("M3IDX_CHECK_DECODE");
  ASSERT_FALSE(captured.ok());
  EXPECT_NE(captured.status().message().find("cannot happen inside a graph capture"), std::string::npos)
      << captured.status().message();
}

// Concurrent decode steps (issue 40: two steps on two streams shared one scratch, and 200 of 400
// outputs were wrong with a clean status). Steps given different workspaces bind disjoint
// scratch and never wait; steps in the indexer's own workspace on another stream than the last
// wait for the last (the event it recorded there), and inside a capture neither wait nor record.
TEST(GpuIndexerEngine, DecodeWorkspacesSeparateStreamsAndTheOwnOneIsOrdered) {
  EngineStep s(4, 0);
  const Device cuda{DeviceKind::Cuda, 0};
  auto [tableAt, lensAt, outAt, table, lens, out] = s.deviceDecodeIo();
  const int64_t bytes = s.indexer->decodeWorkspaceBytes();
  uint64_t a, b;
  s.device.api.alloc(&a, bytes);
  s.device.api.alloc(&b, bytes);
  const TensorView wsA = TensorView::contiguous(reinterpret_cast<void *>(a), DType::U8, {bytes}, cuda);
  const TensorView wsB = TensorView::contiguous(reinterpret_cast<void *>(b), DType::U8, {bytes}, cuda);
  auto arrivalsOf = [&](size_t launch) { return s.device.launches[launch].args[25]; }; // topk_decode's buffer 5
  s.device.launches.clear();
  ASSERT_TRUE(s.indexer->decode(s.q, s.kv, table, lens, fakeStream(1), &out, &wsA).ok());
  ASSERT_TRUE(s.indexer->decode(s.q, s.kv, table, lens, fakeStream(2), &out, &wsB).ok());
  ASSERT_EQ(s.device.launches.size(), 4u);
  EXPECT_GE(arrivalsOf(1), a);
  EXPECT_LT(arrivalsOf(1), a + bytes);
  EXPECT_GE(arrivalsOf(3), b);
  EXPECT_LT(arrivalsOf(3), b + bytes);
  EXPECT_TRUE(s.device.waits.empty());

  // Without out, the top-k goes into the workspace, and decode() says where.
  auto inWs = s.indexer->decode(s.q, s.kv, table, lens, fakeStream(2), nullptr, &wsB);
  ASSERT_TRUE(inWs.ok()) << inWs.status().message();
  EXPECT_GE(reinterpret_cast<uint64_t>(inWs->data), b);
  EXPECT_LT(reinterpret_cast<uint64_t>(inWs->data), b + bytes);

  // The own workspace: stream 1, then stream 2 waits for the event recorded on stream 1.
  ASSERT_TRUE(s.indexer->decode(s.q, s.kv, table, lens, fakeStream(1), &out).ok());
  EXPECT_TRUE(s.device.waits.empty());
  ASSERT_EQ(s.device.lastRecordedOn.size(), 1u);
  void *done = s.device.lastRecordedOn.begin()->first;
  EXPECT_EQ(s.device.lastRecordedOn[done], fakeStream(1));
  ASSERT_TRUE(s.indexer->decode(s.q, s.kv, table, lens, fakeStream(2), &out).ok());
  ASSERT_EQ(s.device.waits.size(), 1u);
  EXPECT_EQ(s.device.waits[0], std::make_pair(fakeStream(2), done));
  EXPECT_EQ(s.device.lastRecordedOn[done], fakeStream(2));
  ASSERT_TRUE(s.indexer->decode(s.q, s.kv, table, lens, fakeStream(2), &out).ok()); // same stream
  EXPECT_EQ(s.device.waits.size(), 1u);
  s.device.capturing = true; // a capture on stream 3: nothing to wait on, nothing recorded
  ASSERT_TRUE(s.indexer->decode(s.q, s.kv, table, lens, fakeStream(3), &out).ok());
  EXPECT_EQ(s.device.waits.size(), 1u);
  EXPECT_EQ(s.device.lastRecordedOn[done], fakeStream(2));
  s.device.capturing = false;

  // A workspace too small, misaligned or elsewhere is refused, naming it.
  auto expectError = [&](const TensorView &ws, const std::string &needle) {
    auto r = s.indexer->decode(s.q, s.kv, table, lens, fakeStream(1), &out, &ws);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  TensorView small = wsA;
  small.shape[0] = bytes - 1;
  expectError(small, "workspace: expected at least");
  TensorView shifted = wsA;
  shifted.data = reinterpret_cast<void *>(a + 8);
  shifted.shape[0] = bytes;
  expectError(shifted, "workspace: expected a 16-byte aligned address");
  TensorView host = wsA;
  host.device = Device{};
  expectError(host, "workspace: expected device cuda:0");
}

// One engine's layers share a workspace: without reserveDecodeWorkspace, warmup() allocates none,
// and decode steps given one allocate nothing either.
TEST(GpuIndexerEngine, NoOwnWorkspaceWhenNotReserved) {
  FakeDevice device;
  IndexerConfig config;
  config.numIndexHeads = 2;
  config.reserveDecodeWorkspace = false;
  auto backend = runtime::GpuBackend::create(&device.api, "cuda", 0, 32,
                                             [](const dsl::Kernel &, const kernels::KernelConfig &)
                                                 -> StatusOr<std::string> { return std::string("image"); },
                                             tuning::TargetTuning{"sm_90", tuning::PrefillForm{}});
  ASSERT_TRUE(backend.ok());
  auto indexer = createIndexer(config, Device{DeviceKind::Cuda, 0}, makeGpuIndexerEngine(config, std::move(backend).value()));
  ASSERT_TRUE(indexer.ok());
  const int before = device.allocations;
  ASSERT_TRUE((*indexer)->warmup().ok());
  // Only the status words (16 bytes) are allocated: far below the workspace's size.
  size_t allocated = 0;
  for (const auto &[at, mem] : device.memory)
    allocated += mem.size();
  EXPECT_LE(device.allocations - before, 1);
  EXPECT_LT(allocated, static_cast<size_t>((*indexer)->decodeWorkspaceBytes()));
  EXPECT_GT((*indexer)->decodeWorkspaceBytes(), 32 << 20); // H=2 x 1024 rows x 8192 columns of floats
}

// Decode CP's device step (issue 39) as the GPU backend queues it: the score part writes the
// group's array from its base (each head into its owner's part) and its flags into its own part;
// the top-k part reads its own part's scores and every rank's flags from part 0's on; the
// segment keys, arrival counts and top-k stay in the rank's workspace. An array whose parts cannot
// hold a step is named.
TEST(GpuIndexerEngine, DecodeShareBindsTheGroupArray) {
  FakeDevice device;
  auto backend = runtime::GpuBackend::create(&device.api, "cuda", 0, 32,
                                             [](const dsl::Kernel &, const kernels::KernelConfig &)
                                                 -> StatusOr<std::string> { return std::string("image"); },
                                             tuning::TargetTuning{"sm_90", tuning::PrefillForm{}});
  ASSERT_TRUE(backend.ok()) << backend.status().message();
  GenOptions o;
  o.numHeads = 1;
  o.numDecodes = 4;
  o.numPrefills = 0;
  o.decodeContext = {1, 3000};
  Case c = *generateCase(o);
  const BatchView shape = c.view();
  const int64_t W = spec::scoreWidth(spec::blocksFor(3000)), T = shape.numRows;
  const int ranks = 4, rank = 2;
  runtime::GpuBackend::GroupArray array;
  array.partStride = 1 << 20;
  array.flagsOffset = 1 << 19;
  device.api.alloc(&array.base, ranks * array.partStride);
  const kernels::DecodeWorkspaceLayout layout = (*backend)->tuning().decodeWorkspace(1, T, W);
  runtime::DeviceWorkspace ws{0, layout};
  device.api.alloc(&ws.base, layout.bytes);
  runtime::DeviceTensors io;
  for (uint64_t *at : {&io.q, &io.kv, &io.blockTable, &io.seqLens, &io.topk})
    device.api.alloc(at, 4096);
  const uint64_t own = array.base + rank * array.partStride;

  auto queue = [&](unsigned part) {
    device.launches.clear();
    Status s = (*backend)->enqueueDeviceDecodeShare(shape, W, 3000, rank, ranks, array, part, io, ws, fakeStream(3));
    EXPECT_TRUE(s.ok()) << s.message();
    return device.launches;
  };
  for (int step = 0; step < 2; ++step) { // planned, then the kept plan
    const std::vector<FakeDevice::Launch> score = queue(kernels::kScoreDecode);
    ASSERT_EQ(score.size(), 1u);
    EXPECT_EQ(score[0].kernel, "score_decode");
    EXPECT_EQ(score[0].stream, fakeStream(3));
    EXPECT_EQ(score[0].args[0], io.q);
    EXPECT_EQ(score[0].args[3], static_cast<uint64_t>(T * ranks * spec::kIndexHeadDim)); // the group's q
    EXPECT_EQ(score[0].args[10], io.blockTable);
    EXPECT_EQ(score[0].args[15], io.seqLens);
    EXPECT_EQ(score[0].args[20], array.base);
    EXPECT_EQ(score[0].args[30], own + array.flagsOffset);
    const std::vector<FakeDevice::Launch> topk = queue(kernels::kTopkDecode);
    ASSERT_EQ(topk.size(), 1u);
    EXPECT_EQ(topk[0].kernel, "topk_decode");
    EXPECT_EQ(topk[0].args[0], own);
    EXPECT_EQ(topk[0].args[10], array.base + array.flagsOffset);
    EXPECT_EQ(topk[0].args[15], io.topk);
    for (size_t a : {20, 25}) { // segment keys and arrival counts
      EXPECT_GE(topk[0].args[a], ws.base);
      EXPECT_LT(topk[0].args[a], ws.base + layout.bytes);
    }
  }
  auto error = [&](runtime::GpuBackend::GroupArray a, unsigned part = kernels::kScoreDecode) {
    Status s = (*backend)->enqueueDeviceDecodeShare(shape, W, 3000, rank, ranks, a, part, io, ws, fakeStream(3));
    return s.ok() ? std::string("ok") : s.message();
  };
  runtime::GpuBackend::GroupArray bad = array;
  bad.partStride = array.partStride + 4; // not whole score rows
  EXPECT_NE(error(bad).find("decode CP array"), std::string::npos) << error(bad);
  bad = array;
  bad.flagsOffset = T * W * 4 - 4; // inside the step's scores
  EXPECT_NE(error(bad).find("decode CP array"), std::string::npos) << error(bad);
  bad = array;
  bad.flagsOffset = array.partStride - 4; // no room for the flags
  EXPECT_NE(error(bad, kernels::kTopkDecode).find("room for a rank's flags"), std::string::npos)
      << error(bad, kernels::kTopkDecode);
  EXPECT_NE(error(array, kernels::kAllParts).find("decode CP part"), std::string::npos);
}
