#include "runtime/gpu/GpuBackend.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <vector>

#include "core/Spec.h"
#include "kernels_src/LaunchPlan.h"
#include "tuning/TargetRegistry.h"

namespace m3idx::runtime {

using kernels::KernelKind;

namespace {

// The step's metadata the host fills and uploads at plan time (one staging array, one copy).
constexpr kernels::StepBuffer kMetadataRoles[] = {
    kernels::StepBuffer::BlockTable,   kernels::StepBuffer::SeqLens,   kernels::StepBuffer::QueryStartLoc,
    kernels::StepBuffer::TileRequest,  kernels::StepBuffer::TileRowBegin, kernels::StepBuffer::RowBlocks,
    kernels::StepBuffer::ImageBase,    kernels::StepBuffer::ImagePages};

// A device decode's buffer addresses by role: the caller's tensors, the status words and the
// workspace's regions (a CP share then points its scores and flags into the group's array).
void bindDeviceDecode(const DeviceTensors &io, const DeviceWorkspace &ws, uint64_t status,
                      uint64_t (&address)[kernels::kStepBufferCount]) {
  using kernels::StepBuffer;
  const kernels::DecodeWorkspaceLayout &l = ws.layout;
  auto bind = [&](StepBuffer role, uint64_t a) { address[static_cast<int>(role)] = a; };
  bind(StepBuffer::Q, io.q);
  bind(StepBuffer::Kv, io.kv);
  bind(StepBuffer::BlockTable, io.blockTable);
  bind(StepBuffer::SeqLens, io.seqLens);
  bind(StepBuffer::Scores, ws.base + l.scores);
  bind(StepBuffer::Topk, io.topk ? io.topk : ws.base + l.topk);
  bind(StepBuffer::Partial, ws.base + l.partial);
  bind(StepBuffer::Arrivals, ws.base + l.arrivals);
  bind(StepBuffer::Status, status);
  bind(StepBuffer::ProgramFlags, ws.base + l.flags);
}

// " (H100, H200, GH200)": the devices of the target whose code is built for `arch`, for errors.
std::string devicesOf(const std::string &arch) {
  for (const tuning::TargetInfo &t : tuning::targets())
    if (t.deviceArch == arch && !t.devices.empty())
      return fmt::format(" ({})", t.devices);
  return "";
}

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

} // namespace

StatusOr<std::unique_ptr<GpuBackend>> GpuBackend::create(const DeviceApi *api, std::string name,
                                                        int device, unsigned threads,
                                                        CodeSource source, const tuning::TargetTuning &tuning,
                                                        const std::string &arch) {
  std::string deviceName;
  M3IDX_RETURN_IF_ERROR(api->check(api->openDevice(device, &deviceName), "device selection"));
  if (!arch.empty() && api->deviceArch) {
    std::string got;
    M3IDX_RETURN_IF_ERROR(api->check(api->deviceArch(device, &got), "device query"));
    if (got != arch)
      return Status::error(fmt::format("{}: device {} ({}) is {}; m3idx's {} kernels are built for {} only{}",
                                       name, device, deviceName, got, api->platform, arch,
                                       devicesOf(arch)));
  }
  return std::unique_ptr<GpuBackend>(new GpuBackend(api, std::move(name), std::move(deviceName), device, threads,
                                                    std::move(source), tuning));
}

StatusOr<const GpuBackend::Function *> GpuBackend::function(KernelKind kind, const kernels::KernelConfig &config) {
  auto key = std::make_pair(static_cast<int>(kind), config);
  if (auto it = functions_.find(key); it != functions_.end())
    return &it->second;
  StatusOr<dsl::Kernel> kernel = kernels::buildKernel(kind, config); // once: signature and code
  if (!kernel.ok())
    return kernel.status();
  kernels::KernelSignature signature = kernels::signatureOf(*kernel);
  StatusOr<std::string> code = source_(*kernel, config);
  if (!code.ok())
    return code.status();
  void *module = nullptr;
  const std::string call = fmt::format("module load of {} ({})", kernels::kernelName(kind), config.str());
  M3IDX_RETURN_IF_ERROR(api_->check(api_->loadModule(&module, code->c_str()), call.c_str()));
  void *fn = nullptr;
  M3IDX_RETURN_IF_ERROR(api_->check(api_->getFunction(&fn, module, kernels::kernelName(kind)),
                                    "function lookup"));
  loaded_.push_back(fmt::format("{} ({})", kernels::kernelName(kind), config.str()));
  return &(functions_[key] = Function{fn, std::move(signature)});
}

GpuBackend::~GpuBackend() {
  stepOrder_.drain(); // the scratch is freed after this: the last step must not still read it
  for (void *e : events_)
    api_->eventDestroy(e);
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
  int64_t n = 0;
  for (const DeviceScratch *s : {&scores_, &partial_, &arrivals_, &metadata_, &stepFlags_, &status_})
    n += s->allocations();
  return n;
}

StatusOr<uint64_t> GpuBackend::statusWords() {
  const size_t bytes = kernels::kStatusWords * 8;
  if (status_.ptr())
    return status_.ptr();
  StatusOr<uint64_t> p = status_.ensure(bytes);
  if (!p.ok())
    return p.status();
  M3IDX_RETURN_IF_ERROR(clearStatus(*p));
  return p;
}

Status GpuBackend::clearStatus(uint64_t words) {
  const int64_t zero[kernels::kStatusWords] = {};
  return api_->check(api_->upload(words, zero, sizeof zero), "host-to-device copy");
}

Status GpuBackend::readStatus(void *stream, int64_t *words, bool clear) {
  StatusOr<uint64_t> p = statusWords();
  if (!p.ok())
    return p.status();
  M3IDX_RETURN_IF_ERROR(api_->check(api_->streamSynchronize(stream), "stream synchronize"));
  const size_t bytes = kernels::kStatusWords * 8;
  M3IDX_RETURN_IF_ERROR(api_->check(api_->download(words, *p, bytes), "device-to-host copy"));
  return clear ? clearStatus(*p) : Status();
}

Status GpuBackend::reserveDeviceDecode() {
  StatusOr<uint64_t> p = statusWords();
  return p.ok() ? Status() : p.status();
}

Status GpuBackend::refuseSetupInCapture(const kernels::StepPlan &plan, void *stream) {
  std::vector<std::string> setup;
  for (const kernels::Launch &l : plan.launches)
    if (!functions_.count({static_cast<int>(l.kind), l.config}))
      setup.push_back(fmt::format("load {} ({})", kernels::kernelName(l.kind), l.config.str()));
  if (!status_.ptr())
    setup.push_back("allocate its status words");
  if (setup.empty() || !api_->streamIsCapturing)
    return Status();
  bool capturing = false;
  M3IDX_RETURN_IF_ERROR(api_->check(api_->streamIsCapturing(stream, &capturing), "stream capture query"));
  if (!capturing)
    return Status();
  return Status::error(fmt::format(
      "decode inside a graph capture would {} (calls that invalidate the capture): before capturing, "
      "run one decode() of this shape, or warm it up (this decode_query_len in "
      "IndexerConfig::decodeQueryLens, then Indexer::warmup())",
      fmt::join(setup, ", ")));
}

StatusOr<GpuBackend::BoundPlan> GpuBackend::bindPlan(const kernels::StepPlan &plan) {
  using kernels::StepBuffer;
  BoundPlan bound;
  bound.needs = kernels::workspaceNeeds(plan);
  for (const kernels::Launch &launch : plan.launches) {
    auto fn = function(launch.kind, launch.config);
    if (!fn.ok())
      return fn.status();
    BoundLaunch l;
    l.name = kernels::kernelName(launch.kind);
    l.fn = (*fn)->fn;
    l.programs = static_cast<unsigned>(launch.programs);
    l.threads = threads_ * static_cast<unsigned>(launch.config.warps);
    l.afterPrevious = (*fn)->signature.awaitsEarlierGrids && !bound.launches.empty();
    M3IDX_RETURN_IF_ERROR(kernels::bindLaunch(
        (*fn)->signature, launch,
        // Kernel parameters as convert-gpu-to-nvvm / -rocdl lay them out: per buffer its memref
        // descriptor (allocated, aligned, offset, size, stride; the addresses filled per step),
        // then the scalars.
        [&](StepBuffer role, int64_t elements) {
          l.slots.push_back({l.values.size(), role});
          for (uint64_t v : {uint64_t{0}, uint64_t{0}, uint64_t{0}, static_cast<uint64_t>(elements), uint64_t{1}})
            l.values.push_back(v);
        },
        [&](int64_t v) { l.values.push_back(static_cast<uint64_t>(v)); }));
    for (uint64_t &v : l.values)
      l.params.push_back(&v);
    bound.launches.push_back(std::move(l));
  }
  return bound;
}

template <typename Key>
StatusOr<GpuBackend::BoundPlan *> GpuBackend::keptPlan(std::map<Key, BoundPlan> &kept, const Key &key, void *stream,
                                                       const std::function<StatusOr<kernels::StepPlan>()> &plan) {
  if (auto found = kept.find(key); found != kept.end())
    return &found->second;
  StatusOr<kernels::StepPlan> made = plan();
  if (!made.ok())
    return made.status();
  M3IDX_RETURN_IF_ERROR(refuseSetupInCapture(*made, stream));
  StatusOr<BoundPlan> bound = bindPlan(*made);
  if (!bound.ok())
    return bound.status();
  if (kept.size() >= kMaxDecodePlans)
    kept.clear();
  return &kept.emplace(key, std::move(*bound)).first->second;
}

Status GpuBackend::enqueueDeviceDecode(const BatchView &shape, int64_t W, int64_t maxSeqLen,
                                       const DeviceTensors &io, const DeviceWorkspace &ws, void *stream) {
  const IndexerParams &p = shape.params;
  const std::array<int64_t, 10> key = {p.numHeads, p.decodeQueryLen, p.numDecodes,  shape.numRows, shape.maxBlocks,
                                       shape.numPages, W, maxSeqLen, p.initBlocks, p.localBlocks};
  StatusOr<BoundPlan *> kept = keptPlan(decodePlans_, key, stream, [&] {
    return kernels::planDeviceDecode(shape, W, maxSeqLen, tuning_.forStep(p.numHeads, p.decodeQueryLen, p.numDecodes));
  });
  if (!kept.ok())
    return kept.status();
  BoundPlan &plan = **kept;
  // A kept plan may meet a workspace laid out for other capacities: checked every call (5 compares).
  M3IDX_RETURN_IF_ERROR(kernels::fitsWorkspace(plan.needs, ws.layout, io.topk == 0));
  StatusOr<uint64_t> status = statusWords();
  if (!status.ok())
    return status.status();
  uint64_t address[kernels::kStepBufferCount] = {};
  bindDeviceDecode(io, ws, *status, address);
  return launchPlan(plan, address, stream, /*timed=*/false, nullptr);
}

Status GpuBackend::enqueueDeviceDecodeShare(const BatchView &shape, int64_t W, int64_t maxSeqLen, int rank, int ranks,
                                            const GroupArray &array, unsigned part, const DeviceTensors &io,
                                            const DeviceWorkspace &ws, void *stream) {
  using kernels::StepBuffer;
  const bool score = part == kernels::kScoreDecode;
  if (!score && part != kernels::kTopkDecode)
    return invalidArgument("decode CP part", "kScoreDecode or kTopkDecode", part);
  const int64_t rowBytes = W * 4;
  if (array.partStride % rowBytes != 0 || array.flagsOffset % 4 != 0 ||
      static_cast<int64_t>(array.flagsOffset) < shape.numRows * rowBytes || array.flagsOffset >= array.partStride)
    return invalidArgument("decode CP array", fmt::format("parts of whole {}-byte score rows, flags 4-aligned past the "
                                                          "step's {} rows and inside the part", rowBytes, shape.numRows),
                           fmt::format("part stride {}, flags at {}", array.partStride, array.flagsOffset));
  const kernels::DecodeShare share{rank, ranks, static_cast<int64_t>(array.partStride) / rowBytes,
                                   static_cast<int64_t>(array.partStride / 4)};
  const IndexerParams &p = shape.params;
  const std::array<int64_t, 15> key = {p.numHeads,  p.decodeQueryLen, p.numDecodes,    shape.numRows,
                                       shape.maxBlocks, shape.numPages, W,            maxSeqLen,
                                       p.initBlocks, p.localBlocks,   rank,           ranks,
                                       static_cast<int64_t>(array.partStride), static_cast<int64_t>(array.flagsOffset),
                                       score};
  StatusOr<BoundPlan *> kept = keptPlan(sharePlans_, key, stream, [&]() -> StatusOr<kernels::StepPlan> {
    StatusOr<kernels::SharePlans> plans = kernels::planDeviceDecodeShare(
        shape, W, maxSeqLen, tuning_.forStep(ranks, p.decodeQueryLen, p.numDecodes),
        tuning_.forStep(p.numHeads, p.decodeQueryLen, p.numDecodes), share);
    if (!plans.ok())
      return plans.status();
    const int64_t flags = plans->score.elementsOf(StepBuffer::ProgramFlags);
    if (static_cast<int64_t>(array.flagsOffset) + flags * 4 > static_cast<int64_t>(array.partStride))
      return invalidArgument("decode CP array", "room for a rank's flags after the flags offset",
                             fmt::format("{} flags at {} in parts of {} bytes", flags, array.flagsOffset,
                                         array.partStride));
    return std::move(score ? plans->score : plans->topk);
  });
  if (!kept.ok())
    return kept.status();
  BoundPlan &plan = **kept;
  // The scores and flags are the array's: the workspace holds the top-k's segment keys, arrival
  // counts and (without io.topk) the top-k.
  kernels::WorkspaceNeeds needs = plan.needs;
  needs.scores = needs.flags = 0;
  M3IDX_RETURN_IF_ERROR(kernels::fitsWorkspace(needs, ws.layout, io.topk == 0));
  StatusOr<uint64_t> status = statusWords();
  if (!status.ok())
    return status.status();
  const uint64_t own = array.base + static_cast<uint64_t>(rank) * array.partStride;
  uint64_t address[kernels::kStepBufferCount] = {};
  bindDeviceDecode(io, ws, *status, address);
  address[static_cast<int>(StepBuffer::Scores)] = score ? array.base : own;
  address[static_cast<int>(StepBuffer::ProgramFlags)] = (score ? own : array.base) + array.flagsOffset;
  return launchPlan(plan, address, stream, /*timed=*/false, nullptr);
}

Status GpuBackend::enqueue(const BatchView &b, int64_t W, const DeviceTensors &io,
                           const RunOptions &options, bool timed) {
  StatusOr<PlannedStep> step = prepareStep(b, W, io.blockTable, nullptr, options.stream,
                                           {options.decodeBlockBegin, options.decodeBlockStep});
  if (!step.ok())
    return step.status();
  return enqueuePlanned(*step, io, options, timed);
}

StatusOr<GpuBackend::PlannedStep> GpuBackend::prepareStep(const BatchView &b, int64_t W, uint64_t deviceBlockTable,
                                                          DeviceScratch *metadata, void *stream,
                                                          kernels::DecodeBlocks blocks) {
  using kernels::StepBuffer;
  const int H = b.params.numHeads, Q = b.params.decodeQueryLen;
  const kernels::StepTuning stepTuning = tuning_.forStep(H, Q, b.params.numDecodes);
  // A CP share runs the score kernels only: the exchange completes the rows before any top-k.
  const bool cpShare = blocks.step > 1;
  StatusOr<kernels::StepPlan> plan = kernels::planStep(
      b, W, stepTuning, cpShare ? kernels::kScoreDecode | kernels::kScorePrefill : kernels::kAllParts, blocks);
  if (!plan.ok())
    return plan.status();
  // Every function first (a compile or module load), so nothing below waits on the host.
  for (KernelKind k : kernels::allKernels())
    M3IDX_RETURN_IF_ERROR(prepare(k, stepTuning.config(k)));
  for (const kernels::Launch &launch : plan->launches) // a step's own form (a fused top-k)
    M3IDX_RETURN_IF_ERROR(prepare(launch.kind, launch.config));

  // Metadata: one host staging array of int32 sections, each 16 bytes aligned, one upload.
  int64_t at[kernels::kStepBufferCount] = {}, total = 0;
  for (StepBuffer role : kMetadataRoles) {
    if (role == StepBuffer::BlockTable && deviceBlockTable)
      continue;
    at[static_cast<int>(role)] = total;
    total = (total + plan->elementsOf(role) + 3) / 4 * 4;
  }
  int32_t *host = staging_.ensure(std::max<int64_t>(total, 1));
  auto sectionOf = [&](StepBuffer role) { return host + at[static_cast<int>(role)]; };
  if (!deviceBlockTable)
    std::copy_n(b.blockTable, plan->elementsOf(StepBuffer::BlockTable), sectionOf(StepBuffer::BlockTable));
  std::copy_n(b.seqLens, plan->elementsOf(StepBuffer::SeqLens), sectionOf(StepBuffer::SeqLens));
  std::copy_n(b.queryStartLoc, plan->elementsOf(StepBuffer::QueryStartLoc), sectionOf(StepBuffer::QueryStartLoc));
  if (plan->prefillTiles > 0)
    kernels::fillPrefillTiles(b, plan->rowTile, sectionOf(StepBuffer::TileRequest),
                              sectionOf(StepBuffer::TileRowBegin));
  if (plan->imageBlocks > 0)
    kernels::fillKeyImage(b, sectionOf(StepBuffer::ImageBase), sectionOf(StepBuffer::ImagePages));
  if (plan->elementsOf(StepBuffer::RowBlocks) > 0) {
    std::fill_n(sectionOf(StepBuffer::RowBlocks), b.numRows, 0);
    kernels::fillPrefillRowBlocks(b, sectionOf(StepBuffer::RowBlocks));
  }
  StatusOr<uint64_t> meta = (metadata ? *metadata : metadata_).ensure(std::max<int64_t>(total, 1) * 4);
  if (!meta.ok())
    return meta.status();
  PlannedStep step;
  for (StepBuffer role : kMetadataRoles)
    step.address[static_cast<int>(role)] = *meta + 4 * at[static_cast<int>(role)];
  if (deviceBlockTable)
    step.address[static_cast<int>(StepBuffer::BlockTable)] = deviceBlockTable;
  step.scores = plan->elementsOf(StepBuffer::Scores);
  step.partial = plan->elementsOf(StepBuffer::Partial);
  step.arrivals = plan->elementsOf(StepBuffer::Arrivals);
  step.flags = plan->elementsOf(StepBuffer::ProgramFlags);
  step.image = plan->elementsOf(StepBuffer::KeyImage);
  StatusOr<BoundPlan> bound = bindPlan(*plan);
  if (!bound.ok())
    return bound.status();
  step.bound = std::move(*bound);
  M3IDX_RETURN_IF_ERROR(stepOrder_.before(stream));
  M3IDX_RETURN_IF_ERROR(api_->check(api_->uploadAsync(*meta, host, total * 4, stream), "host-to-device copy"));
  M3IDX_RETURN_IF_ERROR(stepOrder_.after(stream));
  return step;
}

Status GpuBackend::enqueuePlanned(PlannedStep &step, const DeviceTensors &io, const RunOptions &options, bool timed) {
  using kernels::StepBuffer;
  StatusOr<uint64_t> scores = scores_.ensure(step.scores * 4),
                     partial = partial_.ensure(8 * std::max<int64_t>(step.partial, 1)),
                     arrivals = arrivals_.ensureZeroed(4 * std::max<int64_t>(step.arrivals, 1)),
                     flags = stepFlags_.ensure(4 * std::max<int64_t>(step.flags, 1)),
                     image = keyImage_.ensure(std::max<int64_t>(step.image, 1)), status = statusWords();
  for (const StatusOr<uint64_t> *p : {&scores, &partial, &arrivals, &flags, &image, &status})
    if (!p->ok())
      return p->status();
  uint64_t address[kernels::kStepBufferCount];
  std::copy_n(step.address, kernels::kStepBufferCount, address);
  address[static_cast<int>(StepBuffer::Q)] = io.q;
  address[static_cast<int>(StepBuffer::Kv)] = io.kv;
  address[static_cast<int>(StepBuffer::Scores)] = *scores;
  address[static_cast<int>(StepBuffer::Topk)] = io.topk;
  address[static_cast<int>(StepBuffer::Partial)] = *partial;
  address[static_cast<int>(StepBuffer::Arrivals)] = *arrivals;
  address[static_cast<int>(StepBuffer::Status)] = *status;
  address[static_cast<int>(StepBuffer::ProgramFlags)] = *flags;
  address[static_cast<int>(StepBuffer::KeyImage)] = *image;
  void *stream = options.stream;
  M3IDX_RETURN_IF_ERROR(stepOrder_.before(stream));
  M3IDX_RETURN_IF_ERROR(launchPlan(step.bound, address, stream, timed, options.beforeLaunches));
  return stepOrder_.after(stream);
}

Status GpuBackend::launchPlan(BoundPlan &plan, const uint64_t *address, void *stream, bool timed,
                              const std::function<Status(void *)> &beforeLaunches) {
  if (timed) {
    launched_.clear();
    if (beforeLaunches)
      M3IDX_RETURN_IF_ERROR(beforeLaunches(stream));
    auto first = event(0);
    if (!first.ok())
      return first.status();
    M3IDX_RETURN_IF_ERROR(api_->check(api_->eventRecord(*first, stream), "event record"));
  }
  for (BoundLaunch &l : plan.launches) {
    for (auto [at, role] : l.slots)
      l.values[at] = l.values[at + 1] = address[static_cast<int>(role)]; // allocated, aligned
    // timed: the events between launches order them as usual
    M3IDX_RETURN_IF_ERROR(api_->check(
        api_->launch(l.fn, l.programs, l.threads, stream, l.params.data(), l.afterPrevious && !timed), l.name));
    if (!timed)
      continue;
    launched_.push_back(l.name);
    auto after = event(launched_.size());
    if (!after.ok())
      return after.status();
    M3IDX_RETURN_IF_ERROR(api_->check(api_->eventRecord(*after, stream), "event record"));
  }
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
    kernelMs_[launched_[i]] += *ms;
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
