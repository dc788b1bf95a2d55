#include "runtime/gpu/GpuBackend.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <vector>

#include "core/Spec.h"
#include "kernels_src/LaunchPlan.h"

namespace m3idx::runtime {

using kernels::KernelKind;
using kernels::maxRequestBlocks;

namespace {

// Device memory freed when it goes out of scope.
class DeviceBuffer {
public:
  DeviceBuffer(const DeviceApi *api) : api_(api) {}
  ~DeviceBuffer() {
    if (ptr_)
      api_->free(ptr_);
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  Status allocate(size_t bytes) {
    bytes_ = bytes;
    return api_->check(api_->alloc(&ptr_, std::max<size_t>(bytes, 4)), "memory allocation");
  }
  Status upload(const void *src, size_t bytes) {
    M3IDX_RETURN_IF_ERROR(allocate(bytes));
    return bytes ? api_->check(api_->upload(ptr_, src, bytes), "host-to-device copy") : Status();
  }
  Status download(void *dst, size_t bytes) const {
    return bytes ? api_->check(api_->download(dst, ptr_, bytes), "device-to-host copy") : Status();
  }
  uint64_t ptr() const { return ptr_; }

private:
  const DeviceApi *api_;
  uint64_t ptr_ = 0;
  size_t bytes_ = 0;
};

// Kernel parameters as convert-gpu-to-nvvm / -rocdl lay them out: per buffer its memref descriptor
// (allocated, aligned, offset, size, stride), then the scalars.
class LaunchArgs {
public:
  LaunchArgs &buffer(const DeviceBuffer &b, int64_t elements) {
    for (uint64_t v : {static_cast<uint64_t>(b.ptr()), static_cast<uint64_t>(b.ptr()), uint64_t{0},
                       static_cast<uint64_t>(elements), uint64_t{1}})
      values_.push_back(v);
    return *this;
  }
  LaunchArgs &scalar(int64_t v) {
    values_.push_back(static_cast<uint64_t>(v));
    return *this;
  }
  std::vector<void *> pointers() {
    std::vector<void *> p;
    for (uint64_t &v : values_)
      p.push_back(&v);
    return p;
  }

private:
  std::vector<uint64_t> values_;
};

} // namespace

StatusOr<std::unique_ptr<GpuBackend>> GpuBackend::create(const DeviceApi *api, std::string name,
                                                        int device, unsigned threads,
                                                        CodeSource source) {
  std::string deviceName;
  M3IDX_RETURN_IF_ERROR(api->check(api->openDevice(device, &deviceName), "device selection"));
  return std::unique_ptr<GpuBackend>(
      new GpuBackend(api, std::move(name), std::move(deviceName), threads, std::move(source)));
}

StatusOr<void *> GpuBackend::function(KernelKind kind, const kernels::KernelConfig &config) {
  auto key = std::make_pair(static_cast<int>(kind), config.str());
  if (auto it = functions_.find(key); it != functions_.end())
    return it->second;
  StatusOr<std::string> code = source_(kind, config);
  if (!code.ok())
    return code.status();
  void *module = nullptr;
  M3IDX_RETURN_IF_ERROR(api_->check(api_->loadModule(&module, code->c_str()), "module load"));
  void *fn = nullptr;
  M3IDX_RETURN_IF_ERROR(api_->check(api_->getFunction(&fn, module, kernels::kernelName(kind)),
                                    "function lookup"));
  functions_[key] = fn;
  return fn;
}

GpuBackend::~GpuBackend() {
  for (void *e : events_)
    api_->eventDestroy(e);
  if (flushBuffer_)
    api_->free(flushBuffer_);
}

StatusOr<void *> GpuBackend::event(size_t i) {
  while (events_.size() <= i) {
    void *e = nullptr;
    M3IDX_RETURN_IF_ERROR(api_->check(api_->eventCreate(&e), "event creation"));
    events_.push_back(e);
  }
  return events_[i];
}

// Larger than any cache in front of HBM (H200: 50 MB L2; MI355X: 256 MB Infinity Cache), so a
// step after the flush reads its inputs from HBM.
constexpr size_t kL2FlushBytes = size_t{512} << 20;

Status GpuBackend::flushL2(void *stream) {
  if (!flushBuffer_)
    M3IDX_RETURN_IF_ERROR(api_->check(api_->alloc(&flushBuffer_, kL2FlushBytes), "memory allocation"));
  const auto value = static_cast<uint8_t>(++flushes_);
  return api_->check(api_->memsetAsync(flushBuffer_, value, kL2FlushBytes, stream), "L2 flush (memset)");
}

StatusOr<double> GpuBackend::copyBandwidthGBs(size_t bytes, int repeat) {
  DeviceBuffer src(api_), dst(api_);
  M3IDX_RETURN_IF_ERROR(src.allocate(bytes));
  M3IDX_RETURN_IF_ERROR(dst.allocate(bytes));
  auto start = event(0), stop = event(1);
  if (!start.ok() || !stop.ok())
    return start.ok() ? stop.status() : start.status();
  std::vector<double> ms;
  for (int i = 0; i <= repeat; ++i) {
    M3IDX_RETURN_IF_ERROR(api_->check(api_->eventRecord(*start, nullptr), "event record"));
    M3IDX_RETURN_IF_ERROR(api_->check(api_->copy(dst.ptr(), src.ptr(), bytes), "device copy"));
    M3IDX_RETURN_IF_ERROR(api_->check(api_->eventRecord(*stop, nullptr), "event record"));
    M3IDX_RETURN_IF_ERROR(api_->check(api_->eventSynchronize(*stop), "event synchronize"));
    float t = 0;
    M3IDX_RETURN_IF_ERROR(api_->check(api_->eventElapsedMs(&t, *start, *stop), "event elapsed time"));
    if (i) // the first copy is a warm-up
      ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return 2.0 * bytes / (ms[ms.size() / 2] * 1e6);
}

StatusOr<IndexerOutput> GpuBackend::run(const BatchView &b, const runtime::RunOptions &options) {
  M3IDX_RETURN_IF_ERROR(validateBatch(b));
  const RowPlan plan = planRows(b);
  const int H = b.params.numHeads, Q = b.params.decodeQueryLen;
  const int64_t T = b.numRows, W = plan.scoreWidth, R = b.numRequests, D = b.params.numDecodes;
  const int64_t decodeRows = b.queryStartLoc[D];
  const int64_t scoreCount = H * T * W, topkCount = H * T * spec::kTopkBlocks;
  // Checked before anything is uploaded.
  const int64_t blockBegin = options.decodeBlockBegin, blockStep = options.decodeBlockStep;
  if (blockBegin < 0 || blockStep < 1 || (blockStep > 1 && blockBegin >= blockStep))
    return invalidArgument("decode block range", "0 <= begin < step, step >= 1",
                           fmt::format("begin {}, step {}", blockBegin, blockStep));
  const bool cpShare = blockStep > 1;
  if (cpShare && T > decodeRows)
    return invalidArgument("decode block range", "a decode-only batch (a CP rank's share)",
                           fmt::format("{} prefill rows", T - decodeRows));

  DeviceBuffer q(api_), kv(api_), bt(api_), sl(api_), qsl(api_), scores(api_), topk(api_),
      tileReq(api_), tileRow(api_), rowBlocks(api_), partial(api_);
  M3IDX_RETURN_IF_ERROR(q.upload(b.q, T * H * spec::kIndexHeadDim));
  M3IDX_RETURN_IF_ERROR(kv.upload(b.kv, b.numPages * spec::kPageBytes));
  M3IDX_RETURN_IF_ERROR(bt.upload(b.blockTable, R * b.maxBlocks * 4));
  M3IDX_RETURN_IF_ERROR(sl.upload(b.seqLens, R * 4));
  M3IDX_RETURN_IF_ERROR(qsl.upload(b.queryStartLoc, (R + 1) * 4));
  M3IDX_RETURN_IF_ERROR(scores.allocate(scoreCount * 4)); // never initialised
  M3IDX_RETURN_IF_ERROR(topk.allocate(topkCount * 4));
  const kernels::TopkSplit decodeSplit = kernels::topkSplit(H * decodeRows, W, kernels::kGpuTopkPrograms);
  const kernels::TopkSplit prefillSplit =
      kernels::topkSplit(H * (T - decodeRows), W, kernels::kGpuTopkPrograms);
  M3IDX_RETURN_IF_ERROR(partial.allocate(
      8 * std::max(decodeSplit.partialKeys(H * T), prefillSplit.partialKeys(H * T))));
  const int64_t tileCount = kernels::prefillTileCount(b);
  std::vector<int32_t> tileRequest(tileCount), tileRowBegin(tileCount), blocks(T, 0);
  kernels::fillPrefillTiles(b, tileRequest.data(), tileRowBegin.data());
  kernels::fillPrefillRowBlocks(b, blocks.data());
  M3IDX_RETURN_IF_ERROR(tileReq.upload(tileRequest.data(), tileRequest.size() * 4));
  M3IDX_RETURN_IF_ERROR(tileRow.upload(tileRowBegin.data(), tileRowBegin.size() * 4));
  M3IDX_RETURN_IF_ERROR(rowBlocks.upload(blocks.data(), blocks.size() * 4));

  auto batchArgs = [&](LaunchArgs &a) {
    a.buffer(q, T * H * spec::kIndexHeadDim).buffer(kv, b.numPages * spec::kPageBytes)
        .buffer(bt, R * b.maxBlocks).buffer(sl, R).buffer(qsl, R + 1);
  };
  // Events on the caller's stream: one before the first launch, one after each (no host sync
  // between launches), so the step and each kernel are timed as they run in sequence.
  std::vector<std::string> launched;
  auto launch = [&](KernelKind kind, LaunchArgs &a, int64_t programs) -> Status {
    if (programs <= 0)
      return Status();
    if (programs > std::numeric_limits<int32_t>::max())
      return invalidArgument("grid", "at most 2^31 - 1 programs", programs);
    auto fn = function(kind, kernels::configFor(kind, H, Q));
    if (!fn.ok())
      return fn.status();
    std::vector<void *> params = a.pointers();
    M3IDX_RETURN_IF_ERROR(api_->check(
        api_->launch(*fn, static_cast<unsigned>(programs), threads_, options.stream, params.data()),
        kernels::kernelName(kind)));
    launched.push_back(kernels::kernelName(kind));
    auto after = event(launched.size());
    if (!after.ok())
      return after.status();
    return api_->check(api_->eventRecord(*after, options.stream), "event record");
  };
  kernelMs_.clear();

  // Compile or load every function first, so the timed region is launches only.
  for (KernelKind k : kernels::allKernels())
    if (auto fn = function(k, kernels::configFor(k, H, Q)); !fn.ok())
      return fn.status();
  if (options.flushL2)
    M3IDX_RETURN_IF_ERROR(flushL2(options.stream));
  auto first = event(0);
  if (!first.ok())
    return first.status();
  M3IDX_RETURN_IF_ERROR(api_->check(api_->eventRecord(*first, options.stream), "event record"));
  if (D > 0) {
    const kernels::ScoreGrid grid = kernels::scoreGrid(
        D, kernels::blockSlots(maxRequestBlocks(b, 0, D), blockBegin, blockStep), kernels::kGpuScorePrograms);
    LaunchArgs a;
    batchArgs(a);
    a.buffer(scores, scoreCount).scalar(T).scalar(b.maxBlocks).scalar(W).scalar(grid.chunks)
        .scalar(grid.blocksPerProgram).scalar(b.params.initBlocks).scalar(b.params.localBlocks)
        .scalar(blockBegin).scalar(blockStep);
    M3IDX_RETURN_IF_ERROR(launch(KernelKind::ScoreDecode, a, grid.programs(D)));
  }
  if (!tileRequest.empty()) {
    const int64_t tiles = static_cast<int64_t>(tileRequest.size());
    const kernels::ScoreGrid grid = kernels::scoreGrid(tiles, maxRequestBlocks(b, D, R), kernels::kGpuScorePrograms);
    LaunchArgs a;
    batchArgs(a);
    a.buffer(tileReq, tiles).buffer(tileRow, tiles).buffer(scores, scoreCount).scalar(T)
        .scalar(b.maxBlocks).scalar(W).scalar(grid.chunks).scalar(grid.blocksPerProgram)
        .scalar(b.params.initBlocks).scalar(b.params.localBlocks);
    M3IDX_RETURN_IF_ERROR(launch(KernelKind::ScorePrefill, a, grid.programs(tiles)));
  }
  // Rows too few to fill the GPU are cut into segments, merged by topk_merge.
  auto merge = [&](const kernels::TopkSplit &split, int64_t rowBegin, int64_t rows) -> Status {
    if (split.segments == 1)
      return Status();
    LaunchArgs a;
    a.buffer(partial, split.partialKeys(H * T)).buffer(topk, topkCount).scalar(T).scalar(rowBegin)
        .scalar(rows).scalar(split.segments);
    return launch(KernelKind::TopkMerge, a, H * rows);
  };
  if (decodeRows > 0 && !cpShare) {
    LaunchArgs a;
    a.buffer(scores, scoreCount).buffer(sl, R).buffer(topk, topkCount)
        .buffer(partial, decodeSplit.partialKeys(H * T)).scalar(T).scalar(W).scalar(decodeRows)
        .scalar(decodeSplit.segmentBlocks).scalar(decodeSplit.segments);
    M3IDX_RETURN_IF_ERROR(launch(KernelKind::TopkDecode, a, H * decodeRows * decodeSplit.segments));
    M3IDX_RETURN_IF_ERROR(merge(decodeSplit, 0, decodeRows));
  }
  if (T - decodeRows > 0 && !cpShare) {
    LaunchArgs a;
    a.buffer(scores, scoreCount).buffer(rowBlocks, T).buffer(topk, topkCount)
        .buffer(partial, prefillSplit.partialKeys(H * T)).scalar(T).scalar(W).scalar(decodeRows)
        .scalar(T - decodeRows).scalar(prefillSplit.segmentBlocks).scalar(prefillSplit.segments);
    M3IDX_RETURN_IF_ERROR(launch(KernelKind::TopkPrefill, a, H * (T - decodeRows) * prefillSplit.segments));
    M3IDX_RETURN_IF_ERROR(merge(prefillSplit, decodeRows, T - decodeRows));
  }
  void *last = events_[launched.size()];
  M3IDX_RETURN_IF_ERROR(api_->check(api_->eventSynchronize(last), "event synchronize"));
  auto elapsed = [&](void *from, void *to) -> StatusOr<double> {
    float ms = 0;
    M3IDX_RETURN_IF_ERROR(api_->check(api_->eventElapsedMs(&ms, from, to), "event elapsed time"));
    return ms;
  };
  for (size_t i = 0; i < launched.size(); ++i) {
    StatusOr<double> ms = elapsed(events_[i], events_[i + 1]);
    if (!ms.ok())
      return ms.status();
    kernelMs_[launched[i]] += *ms; // topk_merge may run for decode and for prefill rows
  }
  StatusOr<double> total = elapsed(events_[0], last);
  if (!total.ok())
    return total.status();
  lastKernelMs_ = *total;
  M3IDX_RETURN_IF_ERROR(api_->check(api_->synchronize(), "synchronize"));

  IndexerOutput out;
  out.numHeads = H;
  out.numRows = T;
  out.scoreWidth = W;
  if (!cpShare) {
    out.topk.resize(topkCount);
    M3IDX_RETURN_IF_ERROR(topk.download(out.topk.data(), topkCount * 4));
  }
  if (options.keepScores) {
    out.scores.resize(scoreCount);
    M3IDX_RETURN_IF_ERROR(scores.download(out.scores.data(), scoreCount * 4));
    for (int h = 0; h < H; ++h)
      for (int64_t r = 0; r < T; ++r)
        std::fill(out.scores.begin() + (h * T + r) * W + plan.rows[r].nblk,
                  out.scores.begin() + (h * T + r + 1) * W, std::numeric_limits<float>::quiet_NaN());
  }
  return out;
}

} // namespace m3idx::runtime
