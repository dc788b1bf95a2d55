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
  LaunchArgs &buffer(uint64_t address, int64_t elements) {
    for (uint64_t v : {address, address, uint64_t{0}, static_cast<uint64_t>(elements), uint64_t{1}})
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
                                                        CodeSource source, kernels::PrefillForm prefill,
                                                        const std::string &arch) {
  std::string deviceName;
  M3IDX_RETURN_IF_ERROR(api->check(api->openDevice(device, &deviceName), "device selection"));
  if (!arch.empty() && api->deviceArch) {
    std::string got;
    M3IDX_RETURN_IF_ERROR(api->check(api->deviceArch(device, &got), "device query"));
    if (got != arch)
      return Status::error(fmt::format("{}: device {} ({}) is {}; m3idx's {} kernels are built for {} only{}",
                                       name, device, deviceName, got, api->platform, arch,
                                       arch == "sm_90" ? " (H100, H200, GH200)" : ""));
  }
  return std::unique_ptr<GpuBackend>(new GpuBackend(api, std::move(name), std::move(deviceName), threads,
                                                    std::move(source), prefill));
}

StatusOr<void *> GpuBackend::function(KernelKind kind, const kernels::KernelConfig &config) {
  auto key = std::make_pair(static_cast<int>(kind), config.str());
  if (auto it = functions_.find(key); it != functions_.end())
    return it->second;
  StatusOr<std::string> code = source_(kind, config);
  if (!code.ok())
    return code.status();
  void *module = nullptr;
  const std::string call = fmt::format("module load of {} ({})", kernels::kernelName(kind), config.str());
  M3IDX_RETURN_IF_ERROR(api_->check(api_->loadModule(&module, code->c_str()), call.c_str()));
  void *fn = nullptr;
  M3IDX_RETURN_IF_ERROR(api_->check(api_->getFunction(&fn, module, kernels::kernelName(kind)),
                                    "function lookup"));
  functions_[key] = fn;
  loaded_.push_back(fmt::format("{} ({})", kernels::kernelName(kind), config.str()));
  return fn;
}

GpuBackend::~GpuBackend() {
  if (anyStep_) // the scratch is freed below: the last step must not still read it
    api_->eventSynchronize(stepDone_);
  for (void *e : events_)
    api_->eventDestroy(e);
  if (stepDone_)
    api_->eventDestroy(stepDone_);
}

StatusOr<void *> GpuBackend::event(size_t i) {
  while (events_.size() <= i) {
    void *e = nullptr;
    M3IDX_RETURN_IF_ERROR(api_->check(api_->eventCreate(&e), "event creation"));
    events_.push_back(e);
  }
  return events_[i];
}

Status GpuBackend::prepare(KernelKind kind, const kernels::KernelConfig &config) {
  auto fn = function(kind, config);
  return fn.ok() ? Status() : fn.status();
}

int64_t GpuBackend::scratchAllocations() const {
  return scores_.allocations() + partial_.allocations() + metadata_.allocations();
}

namespace {

// Sections of the step's metadata upload, in int32 elements, each starting 16 bytes aligned.
struct MetadataLayout {
  int64_t blockTable = 0, seqLens, queryStartLoc, tileRequest, tileRowBegin, rowBlocks, total;
  MetadataLayout(const BatchView &b, int64_t tiles, bool withTable) {
    auto after = [](int64_t at, int64_t count) { return (at + count + 3) / 4 * 4; };
    seqLens = after(blockTable, withTable ? b.numRequests * b.maxBlocks : 0);
    queryStartLoc = after(seqLens, b.numRequests);
    tileRequest = after(queryStartLoc, b.numRequests + 1);
    tileRowBegin = after(tileRequest, tiles);
    rowBlocks = after(tileRowBegin, tiles);
    total = after(rowBlocks, b.numRows);
  }
};

} // namespace

Status GpuBackend::enqueue(const BatchView &b, int64_t W, const DeviceTensors &io,
                           const RunOptions &options, bool timed) {
  const int H = b.params.numHeads, Q = b.params.decodeQueryLen;
  const int64_t T = b.numRows, R = b.numRequests, D = b.params.numDecodes;
  const int64_t decodeRows = b.queryStartLoc[D];
  const int64_t scoreCount = H * T * W, topkCount = H * T * spec::kTopkBlocks;
  const int64_t blockBegin = options.decodeBlockBegin, blockStep = options.decodeBlockStep;
  if (blockBegin < 0 || blockStep < 1 || (blockStep > 1 && blockBegin >= blockStep))
    return invalidArgument("decode block range", "0 <= begin < step, step >= 1",
                           fmt::format("begin {}, step {}", blockBegin, blockStep));
  const bool cpShare = blockStep > 1;
  if (cpShare && T > decodeRows)
    return invalidArgument("decode block range", "a decode-only batch (a CP rank's share)",
                           fmt::format("{} prefill rows", T - decodeRows));
  // Every function first (a compile or module load), so nothing below waits on the host.
  for (KernelKind k : kernels::allKernels())
    M3IDX_RETURN_IF_ERROR(prepare(k, kernels::configFor(k, H, Q, prefill_)));

  // Metadata: one host staging array, one stream-ordered upload.
  const int rowTile = kernels::prefillRowTile(H, prefill_.columns);
  const int64_t tiles = kernels::prefillTileCount(b, rowTile);
  const MetadataLayout at(b, tiles, /*withTable=*/!io.blockTable);
  int32_t *host = staging_.ensure(at.total);
  if (!io.blockTable)
    std::copy_n(b.blockTable, R * b.maxBlocks, host + at.blockTable);
  std::copy_n(b.seqLens, R, host + at.seqLens);
  std::copy_n(b.queryStartLoc, R + 1, host + at.queryStartLoc);
  kernels::fillPrefillTiles(b, rowTile, host + at.tileRequest, host + at.tileRowBegin);
  std::fill_n(host + at.rowBlocks, decodeRows, 0);
  kernels::fillPrefillRowBlocks(b, host + at.rowBlocks);

  const kernels::TopkSplit decodeSplit = kernels::topkSplit(H * decodeRows, W, kernels::kGpuTopkPrograms);
  const kernels::TopkSplit prefillSplit =
      kernels::topkSplit(H * (T - decodeRows), W, kernels::kGpuTopkPrograms);
  StatusOr<uint64_t> meta = metadata_.ensure(at.total * 4), scores = scores_.ensure(scoreCount * 4),
                     partial = partial_.ensure(8 * std::max(decodeSplit.partialKeys(H * T),
                                                            prefillSplit.partialKeys(H * T)));
  for (const StatusOr<uint64_t> *p : {&meta, &scores, &partial})
    if (!p->ok())
      return p->status();

  void *stream = options.stream;
  if (anyStep_ && stream != lastStream_) // the scratch is the last step's until it is done
    M3IDX_RETURN_IF_ERROR(api_->check(api_->streamWaitEvent(stream, stepDone_), "stream wait"));
  M3IDX_RETURN_IF_ERROR(
      api_->check(api_->uploadAsync(*meta, host, at.total * 4, stream), "host-to-device copy"));

  auto section = [&](int64_t offset) { return *meta + 4 * offset; };
  auto batchArgs = [&](LaunchArgs &a) {
    a.buffer(io.q, T * H * spec::kIndexHeadDim);
    a.buffer(io.kv, b.numPages * spec::kPageBytes);
    a.buffer(io.blockTable ? io.blockTable : section(at.blockTable), R * b.maxBlocks);
    a.buffer(section(at.seqLens), R);
    a.buffer(section(at.queryStartLoc), R + 1);
  };
  if (timed) {
    launched_.clear();
    if (options.beforeLaunches)
      M3IDX_RETURN_IF_ERROR(options.beforeLaunches(stream));
    auto first = event(0);
    if (!first.ok())
      return first.status();
    M3IDX_RETURN_IF_ERROR(api_->check(api_->eventRecord(*first, stream), "event record"));
  }
  auto launch = [&](KernelKind kind, LaunchArgs &a, int64_t programs) -> Status {
    if (programs <= 0)
      return Status();
    if (programs > std::numeric_limits<int32_t>::max())
      return invalidArgument("grid", "at most 2^31 - 1 programs", programs);
    const kernels::KernelConfig config = kernels::configFor(kind, H, Q, prefill_);
    auto fn = function(kind, config);
    if (!fn.ok())
      return fn.status();
    std::vector<void *> params = a.pointers();
    const unsigned threads = threads_ * static_cast<unsigned>(config.warps);
    M3IDX_RETURN_IF_ERROR(api_->check(
        api_->launch(*fn, static_cast<unsigned>(programs), threads, stream, params.data()),
        kernels::kernelName(kind)));
    if (!timed)
      return Status();
    launched_.push_back(kernels::kernelName(kind));
    auto after = event(launched_.size());
    if (!after.ok())
      return after.status();
    return api_->check(api_->eventRecord(*after, stream), "event record");
  };

  if (D > 0) {
    const kernels::ScoreGrid grid = kernels::scoreGrid(
        D, kernels::blockSlots(maxRequestBlocks(b, 0, D), blockBegin, blockStep), kernels::kGpuScorePrograms);
    LaunchArgs a;
    batchArgs(a);
    a.buffer(*scores, scoreCount).scalar(T).scalar(b.maxBlocks).scalar(W).scalar(grid.chunks)
        .scalar(grid.blocksPerProgram).scalar(b.params.initBlocks).scalar(b.params.localBlocks)
        .scalar(blockBegin).scalar(blockStep);
    M3IDX_RETURN_IF_ERROR(launch(KernelKind::ScoreDecode, a, grid.programs(D)));
  }
  if (tiles > 0) {
    const kernels::ScoreGrid grid = kernels::scoreGrid(tiles, maxRequestBlocks(b, D, R), prefill_.gpuPrograms,
                                                       prefill_.maxBlocksPerProgram, prefill_.minBlocksPerProgram);
    LaunchArgs a;
    batchArgs(a);
    a.buffer(section(at.tileRequest), tiles);
    a.buffer(section(at.tileRowBegin), tiles);
    a.buffer(*scores, scoreCount).scalar(T).scalar(b.maxBlocks).scalar(W).scalar(grid.chunks)
        .scalar(grid.blocksPerProgram).scalar(b.params.initBlocks).scalar(b.params.localBlocks);
    M3IDX_RETURN_IF_ERROR(launch(KernelKind::ScorePrefill, a, grid.programs(tiles)));
  }
  // Rows too few to fill the GPU are cut into segments, merged by topk_merge.
  auto merge = [&](const kernels::TopkSplit &split, int64_t rowBegin, int64_t rows) -> Status {
    if (split.segments == 1)
      return Status();
    LaunchArgs a;
    a.buffer(*partial, split.partialKeys(H * T));
    a.buffer(io.topk, topkCount).scalar(T).scalar(rowBegin).scalar(rows).scalar(split.segments);
    return launch(KernelKind::TopkMerge, a, H * rows);
  };
  if (decodeRows > 0 && !cpShare) {
    LaunchArgs a;
    a.buffer(*scores, scoreCount);
    a.buffer(section(at.seqLens), R);
    a.buffer(io.topk, topkCount);
    a.buffer(*partial, decodeSplit.partialKeys(H * T)).scalar(T).scalar(W).scalar(decodeRows)
        .scalar(decodeSplit.segmentBlocks).scalar(decodeSplit.segments);
    M3IDX_RETURN_IF_ERROR(launch(KernelKind::TopkDecode, a, H * decodeRows * decodeSplit.segments));
    M3IDX_RETURN_IF_ERROR(merge(decodeSplit, 0, decodeRows));
  }
  if (T - decodeRows > 0 && !cpShare) {
    LaunchArgs a;
    a.buffer(*scores, scoreCount);
    a.buffer(section(at.rowBlocks), T);
    a.buffer(io.topk, topkCount);
    a.buffer(*partial, prefillSplit.partialKeys(H * T)).scalar(T).scalar(W).scalar(decodeRows)
        .scalar(T - decodeRows).scalar(prefillSplit.segmentBlocks).scalar(prefillSplit.segments);
    M3IDX_RETURN_IF_ERROR(launch(KernelKind::TopkPrefill, a, H * (T - decodeRows) * prefillSplit.segments));
    M3IDX_RETURN_IF_ERROR(merge(prefillSplit, decodeRows, T - decodeRows));
  }
  if (!stepDone_) {
    void *e = nullptr;
    M3IDX_RETURN_IF_ERROR(api_->check(api_->eventCreate(&e), "event creation"));
    stepDone_ = e;
  }
  M3IDX_RETURN_IF_ERROR(api_->check(api_->eventRecord(stepDone_, stream), "event record"));
  lastStream_ = stream;
  anyStep_ = true;
  return Status();
}

Status GpuBackend::collectTimes() {
  kernelMs_.clear();
  void *last = events_[launched_.size()];
  M3IDX_RETURN_IF_ERROR(api_->check(api_->eventSynchronize(last), "event synchronize"));
  auto elapsed = [&](void *from, void *to) -> StatusOr<double> {
    float ms = 0;
    M3IDX_RETURN_IF_ERROR(api_->check(api_->eventElapsedMs(&ms, from, to), "event elapsed time"));
    return ms;
  };
  for (size_t i = 0; i < launched_.size(); ++i) {
    StatusOr<double> ms = elapsed(events_[i], events_[i + 1]);
    if (!ms.ok())
      return ms.status();
    kernelMs_[launched_[i]] += *ms; // topk_merge may run for decode and for prefill rows
  }
  StatusOr<double> total = elapsed(events_[0], last);
  if (!total.ok())
    return total.status();
  lastKernelMs_ = *total;
  return Status();
}

StatusOr<IndexerOutput> GpuBackend::run(const BatchView &b, const runtime::RunOptions &options) {
  M3IDX_RETURN_IF_ERROR(validateBatch(b));
  const RowPlan plan = planRows(b);
  const int H = b.params.numHeads;
  const int64_t T = b.numRows, W = plan.scoreWidth;
  const int64_t scoreCount = H * T * W, topkCount = H * T * spec::kTopkBlocks;
  DeviceBuffer q(api_), kv(api_), topk(api_);
  M3IDX_RETURN_IF_ERROR(q.upload(b.q, T * H * spec::kIndexHeadDim));
  M3IDX_RETURN_IF_ERROR(kv.upload(b.kv, b.numPages * spec::kPageBytes));
  M3IDX_RETURN_IF_ERROR(topk.allocate(topkCount * 4));
  // Poisoned outputs (0x7B7B7B7B: no block id, no score a kernel makes by chance), so an entry a
  // kernel should write and does not cannot pass for a right one (METHOD.md).
  M3IDX_RETURN_IF_ERROR(api_->check(api_->memsetAsync(topk.ptr(), 0x7B, topkCount * 4, options.stream),
                                    "memset (poison)"));
  if (options.keepScores && scoreCount > 0) {
    StatusOr<uint64_t> scores = scores_.ensure(scoreCount * 4);
    if (!scores.ok())
      return scores.status();
    M3IDX_RETURN_IF_ERROR(api_->check(api_->memsetAsync(*scores, 0x7B, scoreCount * 4, options.stream),
                                      "memset (poison)"));
  }
  M3IDX_RETURN_IF_ERROR(enqueue(b, W, {q.ptr(), kv.ptr(), topk.ptr()}, options, /*timed=*/true));
  M3IDX_RETURN_IF_ERROR(collectTimes());
  M3IDX_RETURN_IF_ERROR(api_->check(api_->synchronize(), "synchronize"));

  IndexerOutput out;
  out.numHeads = H;
  out.numRows = T;
  out.scoreWidth = W;
  if (options.decodeBlockStep <= 1) {
    out.topk.resize(topkCount);
    M3IDX_RETURN_IF_ERROR(topk.download(out.topk.data(), topkCount * 4));
  }
  if (options.keepScores) {
    out.scores.resize(scoreCount);
    if (scoreCount > 0)
      M3IDX_RETURN_IF_ERROR(api_->check(api_->download(out.scores.data(), scores_.ptr(), scoreCount * 4),
                                        "device-to-host copy"));
    for (int h = 0; h < H; ++h)
      for (int64_t r = 0; r < T; ++r)
        std::fill(out.scores.begin() + (h * T + r) * W + plan.rows[r].nblk,
                  out.scores.begin() + (h * T + r + 1) * W, std::numeric_limits<float>::quiet_NaN());
  }
  return out;
}

} // namespace m3idx::runtime
