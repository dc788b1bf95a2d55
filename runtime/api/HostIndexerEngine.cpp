// The Indexer's host engine: the host backend's kernels on host buffers, decode CP over a
// Communicator (SPEC §6), decode and prefill parts run one after the other.
#include <cstring>
#include <iostream>
#include <set>

#include "core/DecodeCpPolicy.h"
#include "core/Spec.h"
#include "runtime/GrowBuffer.h"
#include "runtime/HostBackend.h"
#include "runtime/api/IndexerEngine.h"

namespace m3idx {

using runtime::GrowBuffer;

namespace {

// Copies `rows` rows of every head from a [H, rows, 16] buffer into rows [first, first + rows) of
// the [H, T, 16] output.
void copyHeadRows(int32_t *topk, int64_t T, int64_t first, const int32_t *src, int64_t rows, int H) {
  for (int h = 0; h < H; ++h)
    std::memcpy(topk + (h * T + first) * spec::kTopkBlocks, src + h * rows * spec::kTopkBlocks,
                rows * spec::kTopkBlocks * sizeof(int32_t));
}

// A step's launches, each part's own (a part without rows has none). Its metadata arrays are the
// step's, which the Indexer keeps while the plan lives.
struct HostPlan final : EnginePlan {
  kernels::StepPlan decode, prefill;
};

class HostIndexerEngine final : public IndexerEngine {
public:
  explicit HostIndexerEngine(const IndexerConfig &config)
      : config_(config), layout_(decodeWorkspaceFor(config, backend_.tuning())) {}

  const tuning::TargetTuning &tuning() const override { return backend_.tuning(); }
  Status prepare(kernels::KernelKind kind, const kernels::KernelConfig &config) override {
    auto k = backend_.kernel(kind, config);
    return k.ok() ? Status() : k.status();
  }
  int64_t kernelsObtained() const override {
    return static_cast<int64_t>(backend_.kernelRecords().size());
  }
  std::vector<std::string> kernelNotes(int64_t from) const override {
    std::vector<std::string> notes;
    const auto &records = backend_.kernelRecords();
    for (size_t i = from; i < records.size(); ++i)
      notes.push_back(fmt::format("{} ({}) from {}, {:.1f} ms", records[i].kernel, records[i].config,
                                  runtime::sourceName(records[i].source),
                                  records[i].compile.totalMs() + records[i].loadMs));
    return notes;
  }
  int64_t scratchAllocations() const override {
    return decodeTopk_.allocations() + prefillTopk_.allocations() + ownTopk_.allocations() +
           scores_.allocations() + ownWorkspace_.allocations() + cpSend_.allocations() + cpRecv_.allocations() +
           cpMerged_.allocations() + cpGathered_.allocations() + cpQuery_.allocations();
  }
  Status setCommunicator(std::shared_ptr<Communicator> communicator) override {
    communicator_ = std::move(communicator);
    return Status();
  }
  std::vector<std::pair<kernels::KernelKind, kernels::KernelConfig>> cpKernels() const override {
    if (!communicator_) // CP ranks score all heads of the group
      return {};
    std::vector<std::pair<kernels::KernelKind, kernels::KernelConfig>> all;
    for (const kernels::KernelConfig &c : tuning().configsFor(
             kernels::KernelKind::ScoreDecode, communicator_->worldSize() * config_.numIndexHeads, spec::kCpQueryLen))
      all.push_back({kernels::KernelKind::ScoreDecode, c});
    return all;
  }
  StatusOr<std::unique_ptr<EnginePlan>> plan(const IndexerStep &step, Stream, bool) override;
  StatusOr<int32_t *> run(const EnginePlan &plan, const IndexerStep &step, int32_t *topk, Stream stream,
                          bool *usedCp) override;
  int64_t decodeWorkspaceBytes() const override { return layout_.bytes; }
  Status reserveDecode() override {
    if (config_.reserveDecodeWorkspace)
      ownWorkspace_.ensureZeroed(layout_.bytes);
    return Status();
  }
  Status joinPeerGroup(std::shared_ptr<DecodeCp>) override {
    return Status::error("decode CP across processes: GPU indexers only (the host backend's CP runs over a "
                         "Communicator: initDecodeCp)");
  }
  StatusOr<int32_t *> runDecode(const BatchView &shape, int64_t width, int64_t maxSeqLen, int32_t *topk,
                                void *workspace, Stream, bool *usedCp) override {
    *usedCp = false;
    const kernels::DecodeWorkspaceLayout &l = layout_;
    uint8_t *ws = workspace ? static_cast<uint8_t *>(workspace) : ownWorkspace_.ensureZeroed(l.bytes);
    M3IDX_RETURN_IF_ERROR(backend_.executeDeviceDecode(shape, width, maxSeqLen, l, ws, topk));
    return topk ? topk : reinterpret_cast<int32_t *>(ws + l.topk);
  }
  Status readStatus(Stream, int64_t *words, bool clear) override {
    std::copy_n(backend_.status(), kernels::kStatusWords, words);
    if (clear)
      backend_.clearStatus();
    return Status();
  }
  StatusOr<bool> capturing(Stream) override { return false; }

private:
  Status decodeCp(const BatchView &v, int64_t width, int32_t *topk, Stream stream);

  IndexerConfig config_;
  runtime::HostBackend backend_;
  const kernels::DecodeWorkspaceLayout layout_; // for config_'s capacities (after backend_: its tuning)
  GrowBuffer<uint8_t> ownWorkspace_; // 16-byte aligned (operator new[]); regions at 256-byte offsets
  std::shared_ptr<Communicator> communicator_;
  std::set<std::string> warned_;
  GrowBuffer<int32_t> decodeTopk_, prefillTopk_, ownTopk_;
  GrowBuffer<float> scores_, cpSend_, cpRecv_, cpMerged_;
  GrowBuffer<uint8_t> cpGathered_, cpQuery_;
};

// SPEC §6 on one rank: all-gather the group's decode queries, score blocks b % world == rank for
// every head with the ordinary score kernel, all-to-all the head slices, top-k on the received
// scores of this rank's head.
Status HostIndexerEngine::decodeCp(const BatchView &v, int64_t width, int32_t *topk, Stream stream) {
  const int world = communicator_->worldSize(), rank = communicator_->rank();
  const int64_t rows = v.numRows;
  const size_t qBytes = static_cast<size_t>(rows) * spec::kIndexHeadDim;
  uint8_t *gathered = cpGathered_.ensure(std::max<int64_t>(1, world * qBytes));
  M3IDX_RETURN_IF_ERROR(communicator_->allGather(v.q, gathered, qBytes, stream));
  uint8_t *q = cpQuery_.ensure(std::max<int64_t>(1, world * qBytes)); // [rows, world, 128]
  for (int h = 0; h < world; ++h)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(q + (r * world + h) * spec::kIndexHeadDim,
                  gathered + h * qBytes + r * spec::kIndexHeadDim, spec::kIndexHeadDim);
  BatchView all = v;
  all.q = q;
  all.params.numHeads = world;
  const int64_t slice = rows * width; // one head's [rows, W]
  float *send = cpSend_.ensure(std::max<int64_t>(1, world * slice));
  M3IDX_RETURN_IF_ERROR(backend_.execute(all, width, send, nullptr, kernels::kScoreDecode, {rank, world}));
  float *recv = cpRecv_.ensure(std::max<int64_t>(1, world * slice));
  M3IDX_RETURN_IF_ERROR(communicator_->allToAll(send, recv, slice * sizeof(float), stream));
  float *merged = cpMerged_.ensure(std::max<int64_t>(1, slice)); // this rank's head, [rows, W]
  const int Q = v.params.decodeQueryLen;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t nblk = spec::blocksFor(spec::causalLen(v.seqLens[r / Q], Q, r % Q));
    for (int64_t b = 0; b < nblk; ++b)
      merged[r * width + b] = recv[(b % world) * slice + r * width + b];
  }
  return backend_.execute(v, width, merged, topk, kernels::kTopkDecode);
}

StatusOr<std::unique_ptr<EnginePlan>> HostIndexerEngine::plan(const IndexerStep &step, Stream, bool) {
  auto plan = std::make_unique<HostPlan>();
  if (step.decode.numRows > 0) {
    StatusOr<kernels::StepPlan> d =
        backend_.plan(step.decode, step.decodeWidth, kernels::kScoreDecode | kernels::kTopkDecode);
    if (!d.ok())
      return d.status();
    plan->decode = std::move(*d);
  }
  if (step.prefill.numRows > 0) {
    StatusOr<kernels::StepPlan> p =
        backend_.plan(step.prefill, step.prefillWidth, kernels::kScorePrefill | kernels::kTopkPrefill);
    if (!p.ok())
      return p.status();
    plan->prefill = std::move(*p);
  }
  return std::unique_ptr<EnginePlan>(std::move(plan));
}

StatusOr<int32_t *> HostIndexerEngine::run(const EnginePlan &planned, const IndexerStep &step, int32_t *topk,
                                           Stream stream, bool *usedCp) {
  const HostPlan &plan = static_cast<const HostPlan &>(planned);
  auto execute = [&](const kernels::StepPlan &p, const BatchView &v, int32_t *out) {
    float *s = scores_.ensure(std::max<int64_t>(1, p.elementsOf(kernels::StepBuffer::Scores)));
    return backend_.executePlanned(p, v, s, out);
  };
  const int H = config_.numIndexHeads;
  const int64_t T = step.rows, decodeRows = step.decode.numRows, prefillRows = step.prefill.numRows;
  if (!topk)
    topk = ownTopk_.ensure(std::max<int64_t>(1, H * T * spec::kTopkBlocks));
  *usedCp = false;
  if (decodeRows > 0) {
    int32_t *tmp = decodeTopk_.ensure(H * decodeRows * spec::kTopkBlocks);
    bool cp = false;
    if (communicator_) {
      IndexerParams group = step.decode.params;
      group.numHeads = H * communicator_->worldSize();
      CpDecision gate = decideDecodeCp(group, communicator_->worldSize(), step.dualBatchOverlap);
      const std::string warning = gate.fallbackReason + "; scoring decode rows locally";
      if (!gate.useCp && warned_.insert(warning).second)
        std::cerr << "m3idx: warning: " << warning << "\n";
      cp = gate.useCp;
    }
    M3IDX_RETURN_IF_ERROR(cp ? decodeCp(step.decode, step.decodeWidth, tmp, stream)
                             : execute(plan.decode, step.decode, tmp));
    *usedCp = cp;
    copyHeadRows(topk, T, 0, tmp, decodeRows, H);
  }
  if (prefillRows > 0) {
    int32_t *tmp = prefillTopk_.ensure(H * prefillRows * spec::kTopkBlocks);
    M3IDX_RETURN_IF_ERROR(execute(plan.prefill, step.prefill, tmp));
    copyHeadRows(topk, T, decodeRows, tmp, prefillRows, H);
  }
  return topk;
}

} // namespace

std::unique_ptr<IndexerEngine> makeHostIndexerEngine(const IndexerConfig &config) {
  return std::make_unique<HostIndexerEngine>(config);
}

} // namespace m3idx
