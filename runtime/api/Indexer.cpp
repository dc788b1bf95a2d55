#include "m3idx/Indexer.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <mutex>
#include <tuple>

#include "core/Spec.h"
#include "kernels_src/DecodeWorkspace.h"
#include "kernels_src/LaunchPlan.h"
#include "lowering/Target.h"
#include "lowering/nvvm/PtxAssembler.h"
#include "runtime/GpuCodeCache.h"
#include "runtime/GrowBuffer.h"
#include "runtime/api/IndexerEngine.h"
#include "runtime/cuda/CudaBackend.h"

namespace m3idx {

using runtime::GrowBuffer;

namespace {

// The device-metadata decode's capacity limits (vLLM's CP_MAX_REQS; speculative decoding's rows).
constexpr int kMaxNumDecodes = 256, kMaxDecodeQueryLen = 8;
static_assert(spec::kMaxIndexHeads * kMaxNumDecodes * kMaxDecodeQueryLen <= kernels::kMostDecodeHeadRows,
              "a decode workspace's arrival counts hold every step's (head, row) pairs");

Status expectDevice(const TensorView &t, const std::string &name, Device device) {
  if (t.device.kind != device.kind || t.device.index != device.index)
    return invalidArgument(name, fmt::format("device {}:{}", deviceName(device.kind), device.index),
                           fmt::format("{}:{}", deviceName(t.device.kind), t.device.index));
  return Status();
}

// Sizes and strides come from the caller: before numel(), isContiguous() or an offset multiplies
// them, every partial product of the sizes and the farthest element the view reaches must fit in
// int64_t bytes (a 0 size after sizes whose product overflows is refused too: the products are
// formed left to right). Checked on t.ndim dimensions, which the caller has checked is in [0, 4].
Status expectAddressable(const TensorView &t, const std::string &name) {
  const int64_t item = t.dtype == DType::U8 ? 1 : 4;
  int64_t bytes = item, last = 0; // last: the farthest element's offset, in elements
  bool overflow = false;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0)
      return invalidArgument(name, "non-negative sizes", t.shapeString());
    overflow |= __builtin_mul_overflow(bytes, t.shape[d], &bytes);
    if (t.shape[d] > 1) {
      if (t.strides[d] < 0)
        return invalidArgument(name, "non-negative strides", fmt::format("stride {} in dimension {}", t.strides[d], d));
      int64_t span = 0;
      overflow |= __builtin_mul_overflow(t.shape[d] - 1, t.strides[d], &span);
      overflow |= __builtin_add_overflow(last, span, &last);
    }
  }
  int64_t reach = 0;
  overflow |= __builtin_mul_overflow(last, item, &reach);
  if (overflow)
    return invalidArgument(name, "sizes and strides whose bytes fit in 64 bits",
                           fmt::format("shape {}", t.shapeString()));
  return Status();
}

Status expectTensor(const TensorView &t, const std::string &name, DType dtype, int ndim,
                    Device device) {
  if (t.dtype != dtype)
    return invalidArgument(name, fmt::format("dtype {}", dtypeName(dtype)), dtypeName(t.dtype));
  if (t.ndim != ndim)
    return invalidArgument(name, fmt::format("{} dimensions", ndim), t.ndim);
  M3IDX_RETURN_IF_ERROR(expectAddressable(t, name));
  if (!t.isContiguous())
    return invalidArgument(name, "contiguous strides", "a strided view");
  M3IDX_RETURN_IF_ERROR(expectDevice(t, name, device));
  if (!t.data && t.numel() > 0)
    return invalidArgument(name, "a data pointer", "null");
  return Status();
}

// The caller's int32 [H, T, 16] top-k buffer on `device`, or null (the indexer's own) without one.
StatusOr<int32_t *> topkBuffer(const TensorView *out, int H, int64_t T, Device device) {
  if (!out)
    return static_cast<int32_t *>(nullptr);
  M3IDX_RETURN_IF_ERROR(expectTensor(*out, "topk_out", DType::I32, 3, device));
  if (out->shape[0] != H || out->shape[1] != T || out->shape[2] != spec::kTopkBlocks)
    return invalidArgument("topk_out", fmt::format("shape [{}, {}, {}]", H, T, spec::kTopkBlocks), out->shapeString());
  return static_cast<int32_t *>(out->data);
}

Status expectDim(const TensorView &t, const std::string &name, int dim, int64_t want,
                 const std::string &what) {
  if (t.shape[dim] != want)
    return invalidArgument(name, fmt::format("shape[{}] == {} ({})", dim, want, what), t.shapeString());
  return Status();
}

// An optional device copy of a host block table: absent (null data), or int32 of the same shape
// on the indexer's device, which must be a GPU.
StatusOr<const int32_t *> deviceTable(const TensorView &t, const std::string &name,
                                      const TensorView &hostTable, Device device) {
  if (!t.data)
    return static_cast<const int32_t *>(nullptr);
  if (device.kind == DeviceKind::Host)
    return invalidArgument(name, "no table (a device copy is for GPU indexers)", "a table");
  M3IDX_RETURN_IF_ERROR(expectTensor(t, name, DType::I32, 2, device));
  if (t.shape[0] != hostTable.shape[0] || t.shape[1] != hostTable.shape[1])
    return invalidArgument(name, "the block table's shape " + hostTable.shapeString(), t.shapeString());
  return static_cast<const int32_t *>(t.data);
}

Status prefixed(const std::string &prefix, Status s) {
  return s.ok() ? s : Status::error(prefix + s.message());
}

// max_seq_len must bound every seq_len (it sizes scratch without reading device memory) and the
// model's length.
Status checkMaxSeqLen(const std::string &prefix, const int32_t *seqLens, int64_t count,
                      int64_t maxSeqLen, int64_t maxModelLen) {
  for (int64_t i = 0; i < count; ++i)
    if (seqLens[i] > maxSeqLen)
      return invalidArgument(prefix + "max_seq_len", fmt::format(">= seq_lens[{}] = {}", i, seqLens[i]),
                             maxSeqLen);
  if (maxSeqLen > maxModelLen)
    return invalidArgument(prefix + "max_seq_len", fmt::format("<= max_model_len {}", maxModelLen),
                           maxSeqLen);
  return Status();
}

// A part of the step (decode or prefill) over its metadata arrays; q and kv are bound per run
// (bindTensors).
BatchView partView(const IndexerParams &params, int64_t rows, const TensorView &blockTable,
                   const TensorView &seqLens, const int32_t *queryStartLoc) {
  BatchView v;
  v.params = params;
  v.numRows = rows;
  v.blockTable = static_cast<const int32_t *>(blockTable.data);
  v.numRequests = seqLens.shape[0];
  v.maxBlocks = blockTable.shape[1];
  v.seqLens = static_cast<const int32_t *>(seqLens.data);
  v.queryStartLoc = queryStartLoc;
  return v;
}

// The largest page id a row of validated `b` reads (-1: none), for a plan's O(1) check of
// kv_cache at each run.
int64_t largestPage(const BatchView &b) {
  int64_t most = -1;
  for (int64_t i = 0; i < b.numRequests; ++i) {
    const int32_t *row = b.blockTable + i * b.maxBlocks;
    const int64_t nblk = spec::blocksFor(b.seqLens[i]); // the last row's: every row's are among them
    for (int64_t blk = 0; blk < nblk; ++blk)
      most = std::max<int64_t>(most, row[blk]);
  }
  return most;
}

// A step's parts over index_query and kv_cache.
void bindTensors(IndexerStep &step, const TensorView &q, const TensorView &kv, int H) {
  step.q = static_cast<const uint8_t *>(q.data);
  step.kv = static_cast<const uint8_t *>(kv.data);
  for (BatchView *v : {&step.decode, &step.prefill}) {
    v->kv = step.kv;
    v->numPages = kv.shape[0];
  }
  step.decode.q = step.q;
  step.prefill.q = step.q + step.decode.numRows * H * spec::kIndexHeadDim;
}

ForwardResult resultOf(int32_t *topk, int H, int64_t T, int64_t decodeRows, Device dev) {
  ForwardResult r;
  r.topk = TensorView::contiguous(topk, DType::I32, {H, T, spec::kTopkBlocks}, dev);
  r.decodeTopk = r.topk;
  r.decodeTopk.shape[1] = decodeRows;
  r.prefillTopk = r.topk;
  r.prefillTopk.data = topk + decodeRows * spec::kTopkBlocks;
  r.prefillTopk.shape[1] = T - decodeRows;
  return r;
}

} // namespace

std::string unsupportedReason(const IndexerConfig &c, DeviceKind target) {
  if (!spec::isSupportedHeadCount(c.numIndexHeads))
    return fmt::format("num_index_heads must be 1, 2 or 4 per rank, got {}", c.numIndexHeads);
  if (c.indexHeadDim != spec::kIndexHeadDim)
    return fmt::format("index_head_dim must be {}, got {}", spec::kIndexHeadDim, c.indexHeadDim);
  if (c.sparseBlockSize != spec::kSparseBlockSize)
    return fmt::format("sparse_block_size must be {}, got {}", spec::kSparseBlockSize,
                       c.sparseBlockSize);
  if (c.topkBlocks != spec::kTopkBlocks)
    return fmt::format("topk_blocks must be {}, got {}", spec::kTopkBlocks, c.topkBlocks);
  if (c.scoreType != "max")
    return fmt::format("score_type must be \"max\", got \"{}\"", c.scoreType);
  if (c.kvDtype != "nvfp4")
    return fmt::format("kv_dtype must be \"nvfp4\", got \"{}\"", c.kvDtype);
  if (c.initBlocks < 0)
    return fmt::format("init_blocks must be >= 0, got {}", c.initBlocks);
  if (c.localBlocks < 0)
    return fmt::format("local_blocks must be >= 0, got {}", c.localBlocks);
  const int64_t maxTokens = spec::kMaxTokensPerRow;
  if (c.maxModelLen < 1 || c.maxModelLen > maxTokens)
    return fmt::format("max_model_len must be in [1, {}] ({} blocks of {}), got {}", maxTokens,
                       spec::kMaxBlocksPerRow, spec::kSparseBlockSize, c.maxModelLen);
  for (int q : c.decodeQueryLens)
    if (q < 1 || q > 64)
      return fmt::format("decode_query_len must be in [1, 64], got {}", q);
  if (c.maxNumDecodes < 1 || c.maxNumDecodes > kMaxNumDecodes)
    return fmt::format("max_num_decodes must be in [1, {}], got {}", kMaxNumDecodes, c.maxNumDecodes);
  if (c.maxDecodeQueryLen < 1 || c.maxDecodeQueryLen > kMaxDecodeQueryLen)
    return fmt::format("max_decode_query_len must be in [1, {}], got {}", kMaxDecodeQueryLen, c.maxDecodeQueryLen);
  if (target == DeviceKind::Hip)
    return "device hip is not served by the Indexer API in this build: the HIP backend runs "
           "through `m3idx run --backend hip` only (no AMD GPU was at hand to prove the API's "
           "stream-ordered path on it)";
  return "";
}

// An indexer's engine with the lock every call that touches it holds: calls from several threads
// take turns (Indexer.h's thread rule); a GPU step's device work is not waited for under it. Its
// plans hold it too, so a plan's runs -- from any indexer of the same configuration, even after
// its maker is gone -- go through the engine and the memory it was made with, in turn.
class EngineCore {
public:
  std::mutex mutex;
  std::unique_ptr<IndexerEngine> engine;
  int64_t compilesAtWarmup = -1; // kernels obtained by warmup() (-1: not warmed up)
  int64_t reportedCompiles = 0;
  void reportLateCompiles(); // under `mutex`
};

class IndexerImpl {
public:
  IndexerConfig config;
  Device device;
  std::shared_ptr<EngineCore> core = std::make_shared<EngineCore>();
  std::mutex &mutex = core->mutex; // guards the core and the fields below
  std::unique_ptr<IndexerEngine> &engine = core->engine;
  int64_t &compilesAtWarmup = core->compilesAtWarmup;
  int64_t &reportedCompiles = core->reportedCompiles;
  std::atomic<bool> lastCp{false}; // set by this indexer's runs of a plan under the plan's maker's lock
  GrowBuffer<int32_t> decodeQsl;

  IndexerParams params(int numDecodes, int decodeQueryLen, int heads) const {
    return IndexerParams{heads, config.initBlocks, config.localBlocks, numDecodes, decodeQueryLen};
  }
  // The device decode's score width: max_model_len's blocks (SPEC §4's W).
  int64_t decodeWidth() const { return spec::scoreWidth(spec::blocksFor(config.maxModelLen)); }
  bool checkDecodeSync() const {
    const char *env = std::getenv("M3IDX_CHECK_DECODE");
    return config.checkDecodeSync || (env && std::string(env) == "1");
  }
  void reportLateCompiles() { core->reportLateCompiles(); }
  StatusOr<DeviceStatus> readStatus(Stream stream, bool clear); // under `mutex`
  // The metadata checked (SPEC §7) and viewed as the step's parts (q and kv not bound). `rows`:
  // index_query's (forward), or -1: the metadata's own (plan); `pages`: kv_cache's, or -1: any
  // page id >= 0 (plan; run checks the plan's largest). `qsl(n)`: room for the decode part's n
  // query_start_loc entries.
  StatusOr<IndexerStep> checkMetadata(const IndexerMetadata &md, int64_t rows, int64_t pages,
                                      const std::function<int32_t *(int64_t)> &qsl);
  // Runs a plan made on `core` (this indexer's, or another's of the same configuration) on checked
  // tensors, under core.mutex.
  StatusOr<ForwardResult> run(EngineCore &core, const EnginePlan &plan, IndexerStep step, const TensorView &q,
                              const TensorView &kv, Stream stream, const TensorView *topkOut);
};

class IndexerPlan::Impl {
public:
  std::shared_ptr<EngineCore> core; // the maker's engine, which runs it
  IndexerParams params;             // the maker's heads, init_blocks and local_blocks
  Device device;
  IndexerStep step;   // over the arrays below; q and kv unbound
  int64_t largestPage = -1;
  std::vector<int32_t> decodeTable, decodeLens, decodeQsl, prefillTable, prefillLens, prefillQsl;
  std::unique_ptr<EnginePlan> engine; // after the arrays: dropped first
};

IndexerPlan::IndexerPlan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IndexerPlan::~IndexerPlan() = default;
int64_t IndexerPlan::rows() const { return impl_->step.rows; }
int64_t IndexerPlan::decodeRows() const { return impl_->step.decode.numRows; }

void EngineCore::reportLateCompiles() {
  if (compilesAtWarmup < 0)
    return;
  for (const std::string &note : engine->kernelNotes(std::max(compilesAtWarmup, reportedCompiles)))
    std::cerr << "m3idx: warning: JIT compile after warm-up: " << note << "\n";
  reportedCompiles = engine->kernelsObtained();
}

Indexer::Indexer(std::unique_ptr<IndexerImpl> impl) : impl_(std::move(impl)) {}
Indexer::~Indexer() = default;

// The engine for a device, over the in-process compiler and the kernel caches.
StatusOr<std::unique_ptr<Indexer>> Indexer::create(const IndexerConfig &config, Device device) {
  if (std::string reason = unsupportedReason(config, device.kind); !reason.empty())
    return Status::error("unsupported indexer config: " + reason);
  if (device.kind == DeviceKind::Host)
    return createIndexer(config, device, makeHostIndexerEngine(config));
  // Cuda (unsupportedReason turned the others away): PTX from the compiler, assembled to a cubin
  // when ptxas is installed, through the disk cache -- as `--backend cuda` does.
  auto ptxas = lowering::findPtxas();
  if (!ptxas.ok())
    return ptxas.status();
  auto backend = cuda::createCudaBackend(device.index,
                                         runtime::cachedGpuCode(lowering::makeSm90Target, *ptxas));
  if (!backend.ok())
    return backend.status();
  return createIndexer(config, device, makeGpuIndexerEngine(config, std::move(backend).value()));
}

StatusOr<std::unique_ptr<Indexer>> createIndexer(const IndexerConfig &config, Device device,
                                                 std::unique_ptr<IndexerEngine> engine) {
  std::string reason = unsupportedReason(config, device.kind);
  if (!reason.empty())
    return Status::error("unsupported indexer config: " + reason);
  auto impl = std::make_unique<IndexerImpl>();
  impl->config = config;
  impl->device = device;
  impl->engine = std::move(engine);
  return std::make_unique<Indexer>(std::move(impl));
}

const IndexerConfig &Indexer::config() const { return impl_->config; }
bool Indexer::decodeCpActive() const { return impl_->lastCp; }

int64_t Indexer::compilesAfterWarmup() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const int64_t obtained = impl_->engine->kernelsObtained();
  return impl_->compilesAtWarmup < 0 ? obtained : obtained - impl_->compilesAtWarmup;
}

int64_t Indexer::scratchAllocations() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->decodeQsl.allocations() + impl_->engine->scratchAllocations();
}

Status Indexer::warmup() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  using kernels::KernelKind;
  const int H = impl_->config.numIndexHeads;
  const tuning::TargetTuning &tuning = impl_->engine->tuning();
  std::vector<std::pair<KernelKind, kernels::KernelConfig>> needed;
  for (int q : impl_->config.decodeQueryLens) {
    for (KernelKind k : {KernelKind::ScoreDecode, KernelKind::TopkDecode})
      for (const kernels::KernelConfig &c : tuning.configsFor(k, H, q)) // a small step's form too
        needed.push_back({k, c});
  }
  // Every form a prompt step may take (its fused top-k, its key image and decode_keys)
  for (KernelKind k : {KernelKind::ScorePrefill, KernelKind::TopkPrefill, KernelKind::DecodeKeys})
    for (const kernels::KernelConfig &c : tuning.configsFor(k, H, 4))
      needed.push_back({k, c});
  for (const auto &k : impl_->engine->cpKernels())
    needed.push_back(k);
  for (const auto &[kind, cfg] : needed) {
    if (!spec::isSupportedHeadCount(cfg.numHeads))
      continue; // a group whose heads CP cannot serve falls back to local scoring
    M3IDX_RETURN_IF_ERROR(impl_->engine->prepare(kind, cfg));
  }
  M3IDX_RETURN_IF_ERROR(impl_->engine->reserveDecode());
  impl_->compilesAtWarmup = impl_->engine->kernelsObtained();
  impl_->reportedCompiles = impl_->compilesAtWarmup;
  return Status();
}

Status Indexer::initDecodeCp(std::shared_ptr<Communicator> communicator) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (!communicator)
    return invalidArgument("communicator", "a communicator", "null");
  M3IDX_RETURN_IF_ERROR(impl_->engine->setCommunicator(std::move(communicator)));
  if (impl_->compilesAtWarmup >= 0) // already warmed up: add the CP kernel to the warm set
    return warmup();
  return Status();
}

Status Indexer::joinDecodeCp(std::shared_ptr<DecodeCp> cp) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (!cp)
    return invalidArgument("decode CP", "a DecodeCp (DecodeCp::create)", "null");
  M3IDX_RETURN_IF_ERROR(impl_->engine->joinPeerGroup(std::move(cp)));
  if (impl_->compilesAtWarmup >= 0) { // already warmed up: add the CP kernels to the warm set
    for (const auto &[kind, cfg] : impl_->engine->cpKernels())
      M3IDX_RETURN_IF_ERROR(impl_->engine->prepare(kind, cfg));
    impl_->compilesAtWarmup = impl_->engine->kernelsObtained();
  }
  return Status();
}

StatusOr<IndexerStep> IndexerImpl::checkMetadata(const IndexerMetadata &md, int64_t rows, int64_t pages,
                                                 const std::function<int32_t *(int64_t)> &qslOf) {
  const int H = config.numIndexHeads;
  const Device dev = device;
  // Metadata is read on the host (validation, launch planning), whatever the device.
  const Device host;
  const int64_t numPages = pages < 0 ? int64_t{INT32_MAX} + 1 : pages;
  IndexerStep step;
  step.dualBatchOverlap = md.dualBatchOverlap;
  BatchView &decode = step.decode, &prefill = step.prefill;
  if (const DecodeMetadata *d = md.decode) {
    M3IDX_RETURN_IF_ERROR(expectTensor(d->seqLens, "decode.seq_lens", DType::I32, 1, host));
    M3IDX_RETURN_IF_ERROR(expectTensor(d->blockTable, "decode.block_table", DType::I32, 2, host));
    const int64_t D = d->seqLens.shape[0];
    M3IDX_RETURN_IF_ERROR(expectDim(d->blockTable, "decode.block_table", 0, D, "num_decodes"));
    auto table = deviceTable(d->deviceBlockTable, "decode.device_block_table", d->blockTable, dev);
    if (!table.ok())
      return table.status();
    step.decodeDeviceTable = *table;
    if (d->decodeQueryLen < 1)
      return invalidArgument("decode.decode_query_len", ">= 1", d->decodeQueryLen);
    // D <= T first: then D x decode_query_len (< 2^31 x 2^31) cannot overflow.
    if (rows >= 0 && (D > rows || D * d->decodeQueryLen > rows))
      return invalidArgument("index_query", fmt::format("at least {} rows ({} decodes x {})",
                                                        D * d->decodeQueryLen, D, d->decodeQueryLen),
                             fmt::format("[{}, {}, {}]", rows, H, spec::kIndexHeadDim));
    int32_t *qsl = qslOf(D + 1);
    for (int64_t i = 0; i <= D; ++i)
      qsl[i] = static_cast<int32_t>(i * d->decodeQueryLen);
    decode = partView(params(static_cast<int>(D), d->decodeQueryLen, H), D * d->decodeQueryLen, d->blockTable,
                      d->seqLens, qsl);
    decode.numPages = numPages;
    M3IDX_RETURN_IF_ERROR(prefixed("decode.", validateBatch(decode)));
    M3IDX_RETURN_IF_ERROR(checkMaxSeqLen("decode.", decode.seqLens, D, d->maxSeqLen, config.maxModelLen));
    step.decodeWidth = spec::scoreWidth(spec::blocksFor(d->maxSeqLen));
  }
  const int64_t decodeRows = decode.numRows;
  if (const PrefillMetadata *p = md.prefill) {
    M3IDX_RETURN_IF_ERROR(expectTensor(p->seqLens, "prefill.seq_lens", DType::I32, 1, host));
    const int64_t P = p->seqLens.shape[0];
    M3IDX_RETURN_IF_ERROR(expectTensor(p->blockTable, "prefill.block_table", DType::I32, 2, host));
    M3IDX_RETURN_IF_ERROR(expectDim(p->blockTable, "prefill.block_table", 0, P, "num_prefills"));
    auto table = deviceTable(p->deviceBlockTable, "prefill.device_block_table", p->blockTable, dev);
    if (!table.ok())
      return table.status();
    step.prefillDeviceTable = *table;
    M3IDX_RETURN_IF_ERROR(expectTensor(p->queryStartLoc, "prefill.query_start_loc", DType::I32, 1, host));
    M3IDX_RETURN_IF_ERROR(expectDim(p->queryStartLoc, "prefill.query_start_loc", 0, P + 1, "num_prefills + 1"));
    const auto *qsl = static_cast<const int32_t *>(p->queryStartLoc.data);
    // Without index_query the metadata's last offset is the part's rows (validateBatch checks it
    // as it checks every offset).
    prefill = partView(params(0, 4, H), rows >= 0 ? rows - decodeRows : qsl[P], p->blockTable, p->seqLens, qsl);
    prefill.numPages = numPages;
    M3IDX_RETURN_IF_ERROR(prefixed("prefill.", validateBatch(prefill)));
    for (int64_t i = 0; i < P; ++i) {
      const int64_t qLen = prefill.queryStartLoc[i + 1] - prefill.queryStartLoc[i];
      if (qLen > p->maxQueryLen)
        return invalidArgument("prefill.max_query_len",
                               fmt::format(">= the q_len of request {} = {}", i, qLen),
                               p->maxQueryLen);
    }
    M3IDX_RETURN_IF_ERROR(checkMaxSeqLen("prefill.", prefill.seqLens, P, p->maxSeqLen, config.maxModelLen));
    step.prefillWidth = spec::scoreWidth(spec::blocksFor(p->maxSeqLen));
  } else if (rows >= 0 && rows != decodeRows) {
    return invalidArgument("index_query", fmt::format("{} rows (the decode rows; no prefill "
                                                      "metadata)",
                                                      decodeRows),
                           fmt::format("[{}, {}, {}]", rows, H, spec::kIndexHeadDim));
  }
  step.rows = decodeRows + prefill.numRows;
  // Row offsets are int32 (query_start_loc, and the decode offsets made above).
  if (step.rows > INT32_MAX)
    return invalidArgument("index_query", fmt::format("at most {} rows", INT32_MAX), step.rows);
  return step;
}

StatusOr<ForwardResult> IndexerImpl::run(EngineCore &on, const EnginePlan &plan, IndexerStep step, const TensorView &q,
                                         const TensorView &kv, Stream stream, const TensorView *topkOut) {
  const int H = config.numIndexHeads;
  StatusOr<int32_t *> out = topkBuffer(topkOut, H, step.rows, device);
  if (!out.ok())
    return out.status();
  bindTensors(step, q, kv, H);
  lastCp = false;
  bool usedCp = false;
  StatusOr<int32_t *> written = on.engine->run(plan, step, *out, stream, &usedCp);
  if (!written.ok())
    return written.status();
  lastCp = usedCp;
  on.reportLateCompiles();
  return resultOf(*written, H, step.rows, step.decode.numRows, device);
}

namespace {

// index_query [T, H, 128] and kv_cache [pages, 9216] on the indexer's device.
Status checkTensors(const TensorView &q, const TensorView &kv, int H, Device dev) {
  M3IDX_RETURN_IF_ERROR(expectTensor(q, "index_query", DType::U8, 3, dev));
  M3IDX_RETURN_IF_ERROR(expectDim(q, "index_query", 1, H, "num_index_heads"));
  M3IDX_RETURN_IF_ERROR(expectDim(q, "index_query", 2, spec::kIndexHeadDim, "index_head_dim"));
  M3IDX_RETURN_IF_ERROR(expectTensor(kv, "kv_cache", DType::U8, 2, dev));
  M3IDX_RETURN_IF_ERROR(expectDim(kv, "kv_cache", 1, spec::kPageBytes, "bytes per page"));
  // Row offsets are int32 (query_start_loc, and the decode offsets).
  if (q.shape[0] > INT32_MAX)
    return invalidArgument("index_query", fmt::format("at most {} rows", INT32_MAX), q.shapeString());
  return Status();
}

} // namespace

StatusOr<ForwardResult> Indexer::forward(const TensorView &q, const TensorView &kv,
                                         const IndexerMetadata &md, Stream stream,
                                         const TensorView *topkOut) {
  IndexerImpl &im = *impl_;
  std::lock_guard<std::mutex> lock(im.mutex);
  M3IDX_RETURN_IF_ERROR(checkTensors(q, kv, im.config.numIndexHeads, im.device));
  // The metadata's arrays are the caller's for the call: the plan reads them in place.
  StatusOr<IndexerStep> step =
      im.checkMetadata(md, q.shape[0], kv.shape[0], [&](int64_t n) { return im.decodeQsl.ensure(n); });
  if (!step.ok())
    return step.status();
  StatusOr<std::unique_ptr<EnginePlan>> plan = im.engine->plan(*step, stream, /*persistent=*/false);
  if (!plan.ok())
    return plan.status();
  return im.run(*im.core, **plan, *step, q, kv, stream, topkOut);
}

StatusOr<std::shared_ptr<const IndexerPlan>> Indexer::plan(const IndexerMetadata &md, Stream stream) {
  IndexerImpl &im = *impl_;
  std::lock_guard<std::mutex> lock(im.mutex);
  auto p = std::make_unique<IndexerPlan::Impl>();
  p->core = im.core;
  p->params = im.params(0, 1, im.config.numIndexHeads);
  p->device = im.device;
  StatusOr<IndexerStep> checked = im.checkMetadata(md, -1, -1, [&](int64_t n) {
    p->decodeQsl.assign(n, 0);
    return p->decodeQsl.data();
  });
  if (!checked.ok())
    return checked.status();
  // The plan's own copies of the checked arrays (contiguous: checkMetadata required it).
  IndexerStep &step = p->step = *checked;
  auto keep = [](std::vector<int32_t> &own, const int32_t *from, int64_t n) {
    own.assign(from, from + n);
    return own.data();
  };
  // Every part's, also one without rows, so that no view of the plan points at the caller's arrays.
  for (auto [part, table, lens] : {std::tuple{&step.decode, &p->decodeTable, &p->decodeLens},
                                   std::tuple{&step.prefill, &p->prefillTable, &p->prefillLens}}) {
    part->blockTable = keep(*table, part->blockTable, part->numRequests * part->maxBlocks);
    part->seqLens = keep(*lens, part->seqLens, part->numRequests);
    p->largestPage = std::max(p->largestPage, largestPage(*part));
  }
  if (md.prefill)
    step.prefill.queryStartLoc = keep(p->prefillQsl, step.prefill.queryStartLoc, step.prefill.numRequests + 1);
  StatusOr<std::unique_ptr<EnginePlan>> engine = im.engine->plan(step, stream, /*persistent=*/true);
  if (!engine.ok())
    return engine.status();
  p->engine = std::move(*engine);
  return std::shared_ptr<const IndexerPlan>(std::make_shared<IndexerPlan>(std::move(p)));
}

StatusOr<ForwardResult> Indexer::run(const IndexerPlan &plan, const TensorView &q, const TensorView &kv,
                                     Stream stream, const TensorView *topkOut) {
  IndexerImpl &im = *impl_;
  const IndexerPlan::Impl &p = plan.impl();
  const IndexerParams own = im.params(0, 1, im.config.numIndexHeads);
  if (p.params.numHeads != own.numHeads || p.params.initBlocks != own.initBlocks ||
      p.params.localBlocks != own.localBlocks || p.device.kind != im.device.kind || p.device.index != im.device.index)
    return invalidArgument(
        "plan", "a plan of an indexer of this configuration (heads, init_blocks, local_blocks, device)",
        fmt::format("one of {} heads, init_blocks {}, local_blocks {} on {}:{}", p.params.numHeads, p.params.initBlocks,
                    p.params.localBlocks, deviceName(p.device.kind), p.device.index));
  // The plan's maker's engine runs it (its lock; this indexer's own config and device are equal).
  std::lock_guard<std::mutex> lock(p.core->mutex);
  M3IDX_RETURN_IF_ERROR(checkTensors(q, kv, im.config.numIndexHeads, im.device));
  if (q.shape[0] != p.step.rows)
    return invalidArgument("index_query", fmt::format("{} rows (the plan's: {} decode, {} prefill)", p.step.rows,
                                                      p.step.decode.numRows, p.step.prefill.numRows),
                           q.shapeString());
  if (p.largestPage >= kv.shape[0]) { // name the first page id kv_cache lacks, as forward() does
    for (auto [part, prefix] : {std::pair{p.step.decode, "decode."}, std::pair{p.step.prefill, "prefill."}}) {
      part.numPages = kv.shape[0];
      if (part.numRows > 0)
        M3IDX_RETURN_IF_ERROR(prefixed(prefix, validateBatch(part)));
    }
  }
  return im.run(*p.core, *p.engine, p.step, q, kv, stream, topkOut);
}

int64_t Indexer::decodeWorkspaceBytes() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->engine->decodeWorkspaceBytes();
}

StatusOr<TensorView> Indexer::decode(const TensorView &q, const TensorView &kv, const TensorView &blockTable,
                                     const TensorView &seqLens, Stream stream, const TensorView *topkOut,
                                     const TensorView *workspace) {
  IndexerImpl &im = *impl_;
  std::lock_guard<std::mutex> lock(im.mutex);
  const IndexerConfig &c = im.config;
  const int H = c.numIndexHeads;
  const Device dev = im.device;
  M3IDX_RETURN_IF_ERROR(expectTensor(seqLens, "seq_lens", DType::I32, 1, dev));
  const int64_t D = seqLens.shape[0];
  if (D > c.maxNumDecodes)
    return invalidArgument("seq_lens", fmt::format("at most max_num_decodes = {} requests", c.maxNumDecodes),
                           seqLens.shapeString());
  M3IDX_RETURN_IF_ERROR(expectTensor(q, "index_query", DType::U8, 3, dev));
  M3IDX_RETURN_IF_ERROR(expectDim(q, "index_query", 1, H, "num_index_heads"));
  M3IDX_RETURN_IF_ERROR(expectDim(q, "index_query", 2, spec::kIndexHeadDim, "index_head_dim"));
  const int64_t T = q.shape[0];
  if (D == 0 ? T != 0 : T % D != 0 || T / D < 1 || T / D > c.maxDecodeQueryLen)
    return invalidArgument("index_query",
                           fmt::format("num_decodes x decode_query_len rows ({} requests, decode_query_len "
                                       "in [1, max_decode_query_len = {}])",
                                       D, c.maxDecodeQueryLen),
                           q.shapeString());
  M3IDX_RETURN_IF_ERROR(expectTensor(kv, "kv_cache", DType::U8, 2, dev));
  M3IDX_RETURN_IF_ERROR(expectDim(kv, "kv_cache", 1, spec::kPageBytes, "bytes per page"));
  // The block table's rows may be strided (a slice of the engine's persistent table): the kernels
  // step rows by stride[0] and read columns below seq_len's blocks only.
  if (blockTable.dtype != DType::I32 || blockTable.ndim != 2)
    return invalidArgument("block_table", "int32 [num_decodes, max_blocks]",
                           fmt::format("{} {}", dtypeName(blockTable.dtype), blockTable.shapeString()));
  M3IDX_RETURN_IF_ERROR(expectAddressable(blockTable, "block_table"));
  if (blockTable.shape[0] != D || blockTable.shape[1] < 1)
    return invalidArgument("block_table", fmt::format("shape [{}, >= 1] (one row per request)", D),
                           blockTable.shapeString());
  if (blockTable.strides[1] != 1 || blockTable.strides[0] < blockTable.shape[1])
    return invalidArgument("block_table", "contiguous columns and a row stride >= its columns",
                           fmt::format("strides [{}, {}]", blockTable.strides[0], blockTable.strides[1]));
  M3IDX_RETURN_IF_ERROR(expectDevice(blockTable, "block_table", dev));
  if (!blockTable.data || (!seqLens.data && D > 0))
    return invalidArgument(blockTable.data ? "seq_lens" : "block_table", "a data pointer", "null");
  StatusOr<int32_t *> out = topkBuffer(topkOut, H, T, dev);
  if (!out.ok())
    return out.status();
  int32_t *topk = *out;
  void *ws = nullptr;
  if (workspace) {
    M3IDX_RETURN_IF_ERROR(expectTensor(*workspace, "workspace", DType::U8, 1, dev));
    const int64_t need = im.engine->decodeWorkspaceBytes();
    if (workspace->shape[0] < need)
      return invalidArgument("workspace", fmt::format("at least {} bytes (decode_workspace_bytes)", need),
                             workspace->shapeString());
    if (reinterpret_cast<uintptr_t>(workspace->data) % 16 != 0)
      return invalidArgument("workspace", "a 16-byte aligned address", "a misaligned one");
    ws = workspace->data;
  }
  const bool syncCheck = im.checkDecodeSync();
  if (syncCheck) {
    StatusOr<bool> capturing = im.engine->capturing(stream);
    if (!capturing.ok())
      return capturing.status();
    if (*capturing)
      return Status::error("decode: the synchronous value check (check_decode_sync / M3IDX_CHECK_DECODE=1) "
                           "waits for the stream, which cannot happen inside a graph capture; turn it off "
                           "to capture");
  }
  TensorView result;
  if (D > 0) {
    BatchView shape;
    shape.params = im.params(static_cast<int>(D), static_cast<int>(T / D), H);
    shape.q = static_cast<const uint8_t *>(q.data);
    shape.numRows = T;
    shape.kv = static_cast<const uint8_t *>(kv.data);
    shape.numPages = kv.shape[0];
    shape.blockTable = static_cast<const int32_t *>(blockTable.data);
    shape.numRequests = D;
    shape.maxBlocks = blockTable.strides[0];
    shape.seqLens = static_cast<const int32_t *>(seqLens.data);
    // Columns past the most a row can have are never read (and would overflow the product).
    const int64_t columns = std::min<int64_t>(blockTable.shape[1], spec::kMaxBlocksPerRow);
    const int64_t maxSeqLen = std::min(c.maxModelLen, columns * spec::kSparseBlockSize);
    bool usedCp = false;
    StatusOr<int32_t *> written = im.engine->runDecode(shape, im.decodeWidth(), maxSeqLen, topk, ws, stream, &usedCp);
    im.lastCp = usedCp;
    if (!written.ok())
      return written.status();
    topk = *written;
    im.reportLateCompiles();
    if (syncCheck) {
      StatusOr<DeviceStatus> found = im.readStatus(stream, true);
      if (!found.ok())
        return found.status();
      if (!found->ok())
        return Status::error(found->message());
    }
  }
  return TensorView::contiguous(topk, DType::I32, {H, T, spec::kTopkBlocks}, dev);
}

StatusOr<DeviceStatus> Indexer::readDeviceStatus(Stream stream, bool clear) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->readStatus(stream, clear);
}

StatusOr<DeviceStatus> IndexerImpl::readStatus(Stream stream, bool clear) {
  int64_t words[kernels::kStatusWords] = {};
  M3IDX_RETURN_IF_ERROR(engine->readStatus(stream, words, clear));
  DeviceStatus s;
  s.seqLens = words[0];
  s.blockTable = words[1];
  return s;
}

std::string DeviceStatus::message() const {
  std::vector<std::string> parts;
  if (seqLens != 0)
    parts.push_back(fmt::format("decode.seq_lens[{}] = {} is outside [0, min(max_model_len, block_table "
                                "columns x 128)]",
                                (seqLens >> 32) & 0x3FFFFFFF, static_cast<int32_t>(seqLens & 0xFFFFFFFF)));
  if (blockTable != 0)
    parts.push_back(fmt::format("decode.block_table[{}][{}] = {} is not a page of kv_cache",
                                (blockTable >> 45) & 0x1FFFF, (blockTable >> 32) & 0x1FFF,
                                static_cast<int32_t>(blockTable & 0xFFFFFFFF)));
  if (parts.empty())
    return "";
  return fmt::format("{} (found on the device; the request's rows got no blocks)", fmt::join(parts, "; "));
}

} // namespace m3idx
