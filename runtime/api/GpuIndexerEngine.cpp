// The Indexer's GPU engine: a step's plan is one GpuBackend::prepareStep (its metadata uploaded in
// one copy on the plan's stream), each run one enqueuePlanned on the caller's stream (the score
// and top-k kernels), and forward() (both) returns without waiting. Decode and prefill parts go
// as one batch, so every kernel writes its rows of the [H, T, 16] output in place; a mixed step
// first joins the parts' block tables on the host.
#include <algorithm>
#include <iostream>
#include <mutex>

#include "core/DecodeCpPolicy.h"
#include "core/Spec.h"
#include "runtime/GrowBuffer.h"
#include "runtime/api/IndexerEngine.h"
#include "runtime/gpu/GpuBackend.h"
#include "runtime/api/DecodeCpImpl.h"

namespace m3idx {

using runtime::GrowBuffer;

namespace {

// The device memory of the persistent plans alive (Indexer::plan): a slot a plan, back in the pool
// when the plan is dropped (from any thread), kept for the next. A slot's next upload waits for the
// runs of the plan that held it: both are in the backend's step order.
class PlanSlots {
public:
  explicit PlanSlots(const runtime::DeviceApi *api) : api_(api) {}
  // A slot held until the lease is dropped; the pool may be gone by then.
  class Lease {
  public:
    Lease(std::weak_ptr<PlanSlots> pool, size_t index, runtime::DeviceScratch *memory)
        : pool_(std::move(pool)), index_(index), memory_(memory) {}
    ~Lease() {
      if (auto pool = pool_.lock()) {
        std::lock_guard<std::mutex> lock(pool->mutex_);
        pool->busy_[index_] = false;
      }
    }
    runtime::DeviceScratch &memory() const { return *memory_; }

  private:
    std::weak_ptr<PlanSlots> pool_;
    size_t index_;
    runtime::DeviceScratch *memory_;
  };
  static std::unique_ptr<Lease> take(const std::shared_ptr<PlanSlots> &pool) {
    std::lock_guard<std::mutex> lock(pool->mutex_);
    size_t i = 0;
    while (i < pool->busy_.size() && pool->busy_[i])
      ++i;
    if (i == pool->busy_.size()) {
      pool->slots_.push_back(std::make_unique<runtime::DeviceScratch>(pool->api_));
      pool->busy_.push_back(false);
    }
    pool->busy_[i] = true;
    return std::make_unique<Lease>(pool, i, pool->slots_[i].get());
  }
  int64_t allocations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t n = 0;
    for (const auto &s : slots_)
      n += s->allocations();
    return n;
  }

private:
  const runtime::DeviceApi *api_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<runtime::DeviceScratch>> slots_;
  std::vector<bool> busy_;
};

// A step planned on the GPU: its launches bound, its metadata on the device (a persistent plan's in
// its own slot). Decode rows decode CP serves are planned per run instead (runWithCpDecode).
struct GpuPlan final : EnginePlan {
  bool cpDecode = false;
  std::unique_ptr<PlanSlots::Lease> slot;
  // Each run fills its addresses into the bound launches: runs go one at a time (the Indexer's lock).
  mutable runtime::GpuBackend::PlannedStep step;
};

class GpuIndexerEngine final : public IndexerEngine {
public:
  GpuIndexerEngine(const IndexerConfig &config, std::unique_ptr<runtime::GpuBackend> backend)
      : config_(config), layout_(decodeWorkspaceFor(config, backend->tuning())),
        planSlots_(std::make_shared<PlanSlots>(&backend->api())), ownTopk_(&backend->api()),
        ownWorkspace_(&backend->api()), cpMetadata_(&backend->api()), ownOrder_(&backend->api()),
        backend_(std::move(backend)) {}
  ~GpuIndexerEngine() override {
    ownOrder_.drain(); // the own buffers are freed after this: the last step must not still use them
  }

  const tuning::TargetTuning &tuning() const override { return backend_->tuning(); }
  Status prepare(kernels::KernelKind kind, const kernels::KernelConfig &config) override {
    return backend_->prepare(kind, config);
  }
  int64_t kernelsObtained() const override {
    return static_cast<int64_t>(backend_->functionsLoaded().size());
  }
  std::vector<std::string> kernelNotes(int64_t from) const override {
    const auto &loaded = backend_->functionsLoaded();
    std::vector<std::string> notes;
    for (size_t i = from; i < loaded.size(); ++i)
      notes.push_back(fmt::format("{} on {}", loaded[i], backend_->name()));
    return notes;
  }
  int64_t scratchAllocations() const override {
    return backend_->scratchAllocations() + ownTopk_.allocations() + ownWorkspace_.allocations() +
           cpMetadata_.allocations() + joined_.allocations() + planSlots_->allocations();
  }
  Status setCommunicator(std::shared_ptr<Communicator>) override {
    return Status::error(fmt::format(
        "decode CP over a Communicator: not served on {} devices (the host backend's; GPU ranks "
        "join a group of processes instead: Indexer::joinDecodeCp)",
        backend_->name()));
  }
  Status joinPeerGroup(std::shared_ptr<DecodeCp> cp) override {
    if (cp_)
      return Status::error("decode CP: this indexer has joined a group already");
    const DecodeCp::Impl &group = cp->impl();
    if (group.device().kind != DeviceKind::Cuda || group.device().index != backend_->device() ||
        &group.api() != &backend_->api())
      return invalidArgument("decode CP group's device", fmt::format("this indexer's ({} device {})", backend_->name(),
                                                                     backend_->device()),
                             fmt::format("device {} of {}", group.device().index, group.api().library));
    if (config_.maxModelLen > group.group().maxModelLen)
      return invalidArgument("indexer max_model_len", fmt::format("<= the decode CP group's ({})", group.group().maxModelLen),
                             config_.maxModelLen);
    // The group is laid out for sm_90's tuning table (DecodeCp::create): the flags of this
    // engine's largest score grid must fit it.
    if (tuning().mostDecodeScorePrograms() + group.capacity().maxRows > group.capacity().mostFlags)
      return Status::error(fmt::format("decode CP: this indexer's score grids need {} program flags, the group has {}",
                                       tuning().mostDecodeScorePrograms() + group.capacity().maxRows,
                                       group.capacity().mostFlags));
    cp_ = std::move(cp);
    return Status();
  }
  std::vector<std::pair<kernels::KernelKind, kernels::KernelConfig>> cpKernels() const override {
    std::vector<std::pair<kernels::KernelKind, kernels::KernelConfig>> all;
    if (cp_) // a CP step's score kernel scores the group's heads
      for (const kernels::KernelConfig &c :
           tuning().configsFor(kernels::KernelKind::ScoreDecode, cp_->impl().ranks() * config_.numIndexHeads, spec::kCpQueryLen))
        all.push_back({kernels::KernelKind::ScoreDecode, c});
    return all;
  }
  StatusOr<std::unique_ptr<EnginePlan>> plan(const IndexerStep &step, Stream stream, bool persistent) override;
  StatusOr<int32_t *> run(const EnginePlan &plan, const IndexerStep &step, int32_t *topk, Stream stream,
                          bool *usedCp) override;
  int64_t decodeWorkspaceBytes() const override { return layout_.bytes; }
  Status reserveDecode() override {
    M3IDX_RETURN_IF_ERROR(backend_->reserveDeviceDecode());
    if (!config_.reserveDecodeWorkspace)
      return Status();
    StatusOr<uint64_t> own = ownWorkspace_.ensureZeroed(layout_.bytes);
    return own.ok() ? Status() : own.status();
  }
  StatusOr<int32_t *> runDecode(const BatchView &shape, int64_t width, int64_t maxSeqLen, int32_t *topk,
                                void *workspace, Stream stream, bool *usedCp) override;
  Status readStatus(Stream stream, int64_t *words, bool clear) override {
    return backend_->readStatus(stream, words, clear);
  }
  StatusOr<bool> capturing(Stream stream) override {
    bool on = false;
    if (!backend_->api().streamIsCapturing) // a platform without graphs
      return false;
    M3IDX_RETURN_IF_ERROR(backend_->api().check(backend_->api().streamIsCapturing(stream, &on), "stream capture query"));
    return on;
  }

private:
  // The step as one batch: decode requests, then prefill requests.
  BatchView joined(const IndexerStep &step);
  // The joined batch's block table on the device, if the caller's device tables are it.
  static const int32_t *deviceTable(const IndexerStep &step);

  // Whether the group serves decode rows of `params` (SPEC §6), warning once of each reason it does not.
  bool cpServes(const IndexerParams &params, bool dualBatchOverlap);
  // forward() with decode rows the group serves: they go as a device decode step (their metadata
  // uploaded into cpMetadata_, in the own workspace), the prefill rows as a step of their own.
  StatusOr<int32_t *> runWithCpDecode(const IndexerStep &step, int32_t *topk, Stream stream, bool *usedCp);


  IndexerConfig config_;
  const kernels::DecodeWorkspaceLayout layout_; // for config_'s capacities
  // Before backend_, so destroyed after it: the backend waits for its last step on the way out,
  // and only then is the memory that step may write freed.
  std::shared_ptr<PlanSlots> planSlots_; // plans hold it weakly: their slots go with the engine
  runtime::DeviceScratch ownTopk_, ownWorkspace_;
  runtime::DeviceScratch cpMetadata_; // forward()'s CP decode rows' seq_lens and block table
  // Eager steps in ownWorkspace_ (and cpMetadata_) across streams; a capture waits for nothing
  // outside it: graphs follow the workspace rule of Indexer.h.
  runtime::StreamOrder ownOrder_;
  std::unique_ptr<runtime::GpuBackend> backend_;
  GrowBuffer<int32_t> joined_; // a mixed step's block table, seq_lens and query_start_loc
  // Decode CP across processes, once joined (after backend_: dropped before the backend; the
  // group's array lives while any of the process's indexers, or its creator, holds it)
  std::shared_ptr<DecodeCp> cp_; // the process's group, shared with its other indexers
  std::string cpWarned_; // the last fallback reason warned of
};

bool GpuIndexerEngine::cpServes(const IndexerParams &params, bool dualBatchOverlap) {
  if (!cp_)
    return false;
  IndexerParams group = params;
  group.numHeads = params.numHeads * cp_->impl().ranks();
  const CpDecision gate = decideDecodeCp(group, cp_->impl().ranks(), dualBatchOverlap);
  if (!gate.useCp && gate.fallbackReason != cpWarned_) {
    std::cerr << "m3idx: warning: " << gate.fallbackReason << "; scoring decode rows locally\n";
    cpWarned_ = gate.fallbackReason;
  }
  return gate.useCp;
}

StatusOr<int32_t *> GpuIndexerEngine::runDecode(const BatchView &shape, int64_t width, int64_t maxSeqLen,
                                                int32_t *topk, void *workspace, Stream stream, bool *usedCp) {
  *usedCp = false;
  runtime::DeviceWorkspace ws{reinterpret_cast<uintptr_t>(workspace), layout_};
  const bool cp = cpServes(shape.params, false);
  // The own workspace's order and the group's: nothing is waited for inside a capture.
  bool capturing = false;
  if (!workspace || cp) {
    StatusOr<bool> inCapture = this->capturing(stream);
    if (!inCapture.ok())
      return inCapture.status();
    capturing = *inCapture;
  }
  if (!workspace) {
    if (!ownWorkspace_.holds(ws.layout.bytes) && capturing)
      return Status::error("decode inside a graph capture would allocate the indexer's own workspace (a call that "
                           "invalidates the capture): call Indexer::warmup() first (with reserveDecodeWorkspace), "
                           "or pass a workspace");
    StatusOr<uint64_t> own = ownWorkspace_.ensureZeroed(ws.layout.bytes);
    if (!own.ok())
      return own.status();
    ws.base = *own;
    if (!capturing) // the workspace is the last eager step's until it is done
      M3IDX_RETURN_IF_ERROR(ownOrder_.before(stream));
  }
  runtime::DeviceTensors io;
  io.q = reinterpret_cast<uintptr_t>(shape.q);
  io.kv = reinterpret_cast<uintptr_t>(shape.kv);
  io.topk = reinterpret_cast<uintptr_t>(topk);
  io.blockTable = reinterpret_cast<uintptr_t>(shape.blockTable);
  io.seqLens = reinterpret_cast<uintptr_t>(shape.seqLens);
  if (cp)
    M3IDX_RETURN_IF_ERROR(cp_->impl().enqueue(*backend_, shape, width, maxSeqLen, io, ws, stream, capturing));
  else
    M3IDX_RETURN_IF_ERROR(backend_->enqueueDeviceDecode(shape, width, maxSeqLen, io, ws, stream));
  *usedCp = cp;
  if (!workspace && !capturing)
    M3IDX_RETURN_IF_ERROR(ownOrder_.after(stream));
  return topk ? topk : reinterpret_cast<int32_t *>(static_cast<uintptr_t>(ws.base + ws.layout.topk));
}

BatchView GpuIndexerEngine::joined(const IndexerStep &step) {
  const BatchView &d = step.decode, &p = step.prefill;
  if (p.numRows == 0)
    return d;
  if (d.numRows == 0)
    return p;
  const int64_t R = d.numRequests + p.numRequests, M = std::max(d.maxBlocks, p.maxBlocks);
  int32_t *table = joined_.ensure(R * M + R + R + 1);
  int32_t *seqLens = table + R * M, *qsl = seqLens + R;
  // Columns past a part's own width are never read (no row sees those blocks).
  for (int64_t i = 0; i < d.numRequests; ++i)
    std::copy_n(d.blockTable + i * d.maxBlocks, d.maxBlocks, table + i * M);
  for (int64_t i = 0; i < p.numRequests; ++i)
    std::copy_n(p.blockTable + i * p.maxBlocks, p.maxBlocks, table + (d.numRequests + i) * M);
  std::copy_n(d.seqLens, d.numRequests, seqLens);
  std::copy_n(p.seqLens, p.numRequests, seqLens + d.numRequests);
  std::copy_n(d.queryStartLoc, d.numRequests + 1, qsl);
  for (int64_t i = 1; i <= p.numRequests; ++i)
    qsl[d.numRequests + i] = static_cast<int32_t>(d.numRows + p.queryStartLoc[i]);
  BatchView b = d;
  b.numRows = step.rows;
  b.blockTable = table;
  b.numRequests = R;
  b.maxBlocks = M;
  b.seqLens = seqLens;
  b.queryStartLoc = qsl;
  return b;
}

const int32_t *GpuIndexerEngine::deviceTable(const IndexerStep &step) {
  const BatchView &d = step.decode, &p = step.prefill;
  if (p.numRows == 0)
    return step.decodeDeviceTable;
  if (d.numRows == 0)
    return step.prefillDeviceTable;
  // Mixed: only as rows of one table (decode requests first), else the host tables are joined.
  const bool oneTable = step.decodeDeviceTable && d.maxBlocks == p.maxBlocks &&
                        step.prefillDeviceTable == step.decodeDeviceTable + d.numRequests * d.maxBlocks;
  return oneTable ? step.decodeDeviceTable : nullptr;
}

StatusOr<std::unique_ptr<EnginePlan>> GpuIndexerEngine::plan(const IndexerStep &step, Stream stream,
                                                              bool persistent) {
  auto plan = std::make_unique<GpuPlan>();
  const BatchView &d = step.decode;
  // The CP decode rows run in the own decode workspace: within its capacities only.
  plan->cpDecode = d.numRows > 0 && d.numRequests <= config_.maxNumDecodes &&
                   d.params.decodeQueryLen <= config_.maxDecodeQueryLen && cpServes(d.params, step.dualBatchOverlap);
  if (plan->cpDecode || step.rows == 0)
    return std::unique_ptr<EnginePlan>(std::move(plan));
  if (persistent)
    plan->slot = PlanSlots::take(planSlots_);
  StatusOr<runtime::GpuBackend::PlannedStep> planned =
      backend_->prepareStep(joined(step), std::max(step.decodeWidth, step.prefillWidth),
                            reinterpret_cast<uintptr_t>(deviceTable(step)),
                            plan->slot ? &plan->slot->memory() : nullptr, stream);
  if (!planned.ok())
    return planned.status();
  plan->step = std::move(*planned);
  return std::unique_ptr<EnginePlan>(std::move(plan));
}

StatusOr<int32_t *> GpuIndexerEngine::run(const EnginePlan &planned, const IndexerStep &step, int32_t *topk,
                                          Stream stream, bool *usedCp) {
  const GpuPlan &plan = static_cast<const GpuPlan &>(planned);
  *usedCp = false;
  const int64_t topkBytes = config_.numIndexHeads * step.rows * spec::kTopkBlocks * 4;
  if (!topk) {
    StatusOr<uint64_t> own = ownTopk_.ensure(topkBytes);
    if (!own.ok())
      return own.status();
    topk = reinterpret_cast<int32_t *>(static_cast<uintptr_t>(*own));
  }
  if (step.rows == 0)
    return topk;
  if (plan.cpDecode)
    return runWithCpDecode(step, topk, stream, usedCp);
  runtime::RunOptions options;
  options.stream = stream;
  runtime::DeviceTensors io;
  io.q = reinterpret_cast<uintptr_t>(step.q);
  io.kv = reinterpret_cast<uintptr_t>(step.kv);
  io.topk = reinterpret_cast<uintptr_t>(topk);
  M3IDX_RETURN_IF_ERROR(backend_->enqueuePlanned(plan.step, io, options));
  return topk;
}

StatusOr<int32_t *> GpuIndexerEngine::runWithCpDecode(const IndexerStep &step, int32_t *topk, Stream stream,
                                                      bool *usedCp) {
  const runtime::DeviceApi &api = backend_->api();
  const BatchView &d = step.decode;
  // cpMetadata_ is the last eager step's until it is done, as the own workspace is (forward()
  // is never captured; runDecode's own wait then finds the stream ordered already).
  M3IDX_RETURN_IF_ERROR(ownOrder_.before(stream));
  const size_t lensBytes = d.numRequests * 4, tableBytes = d.numRequests * d.maxBlocks * 4;
  StatusOr<uint64_t> meta = cpMetadata_.ensure(lensBytes + (step.decodeDeviceTable ? 0 : tableBytes));
  if (!meta.ok())
    return meta.status();
  // From pageable memory the copies are staged before they return (DeviceApi::uploadAsync).
  M3IDX_RETURN_IF_ERROR(api.check(api.uploadAsync(*meta, d.seqLens, lensBytes, stream), "upload decode seq_lens"));
  if (!step.decodeDeviceTable)
    M3IDX_RETURN_IF_ERROR(
        api.check(api.uploadAsync(*meta + lensBytes, d.blockTable, tableBytes, stream), "upload decode block table"));
  BatchView shape = d;
  shape.seqLens = reinterpret_cast<const int32_t *>(static_cast<uintptr_t>(*meta));
  shape.blockTable = step.decodeDeviceTable ? step.decodeDeviceTable
                                            : reinterpret_cast<const int32_t *>(static_cast<uintptr_t>(*meta + lensBytes));
  // decodeWidth covers the part's max_seq_len, which is at least every seq_len (validated).
  const int64_t maxSeqLen = std::min(config_.maxModelLen, step.decodeWidth * spec::kSparseBlockSize);
  StatusOr<int32_t *> decoded = runDecode(shape, step.decodeWidth, maxSeqLen, topk, nullptr, stream, usedCp);
  if (!decoded.ok())
    return decoded.status();
  if (step.prefill.numRows == 0)
    return topk;
  // The prefill rows follow the decode rows in [1, rows, 16] (CP serves one head a rank).
  runtime::RunOptions options;
  options.stream = stream;
  runtime::DeviceTensors io;
  io.q = reinterpret_cast<uintptr_t>(step.prefill.q);
  io.kv = reinterpret_cast<uintptr_t>(step.kv);
  io.topk = reinterpret_cast<uintptr_t>(topk + d.numRows * spec::kTopkBlocks);
  io.blockTable = reinterpret_cast<uintptr_t>(step.prefillDeviceTable);
  M3IDX_RETURN_IF_ERROR(backend_->enqueue(step.prefill, step.prefillWidth, io, options));
  return topk;
}

} // namespace

std::unique_ptr<IndexerEngine> makeGpuIndexerEngine(const IndexerConfig &config,
                                                    std::unique_ptr<runtime::GpuBackend> backend) {
  return std::make_unique<GpuIndexerEngine>(config, std::move(backend));
}

} // namespace m3idx
