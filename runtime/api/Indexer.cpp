#include "m3idx/Indexer.h"

#include <algorithm>
#include <cstring>
#include <iostream>
#include <set>

#include "core/DecodeCpPolicy.h"
#include "core/Spec.h"
#include "runtime/GrowBuffer.h"
#include "runtime/HostBackend.h"

namespace m3idx {

using runtime::GrowBuffer;

namespace {

Status expectTensor(const TensorView &t, const std::string &name, DType dtype, int ndim,
                    Device device) {
  if (t.dtype != dtype)
    return invalidArgument(name, fmt::format("dtype {}", dtypeName(dtype)), dtypeName(t.dtype));
  if (t.ndim != ndim)
    return invalidArgument(name, fmt::format("{} dimensions", ndim), t.ndim);
  for (int d = 0; d < ndim; ++d)
    if (t.shape[d] < 0)
      return invalidArgument(name, "non-negative sizes", t.shapeString());
  if (!t.isContiguous())
    return invalidArgument(name, "contiguous strides", "a strided view");
  if (t.device.kind != device.kind || t.device.index != device.index)
    return invalidArgument(name, fmt::format("device {}:{}", deviceName(device.kind), device.index),
                           fmt::format("{}:{}", deviceName(t.device.kind), t.device.index));
  if (!t.data && t.numel() > 0)
    return invalidArgument(name, "a data pointer", "null");
  return Status();
}

Status expectDim(const TensorView &t, const std::string &name, int dim, int64_t want,
                 const std::string &what) {
  if (t.shape[dim] != want)
    return invalidArgument(name, fmt::format("shape[{}] == {} ({})", dim, want, what), t.shapeString());
  return Status();
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

// Copies `rows` rows of every head from a [H, rows, 16] buffer into rows [first, first + rows) of
// the [H, T, 16] output.
void copyHeadRows(int32_t *topk, int64_t T, int64_t first, const int32_t *src, int64_t rows, int H) {
  for (int h = 0; h < H; ++h)
    std::memcpy(topk + (h * T + first) * spec::kTopkBlocks, src + h * rows * spec::kTopkBlocks,
                rows * spec::kTopkBlocks * sizeof(int32_t));
}

// A part of the step (decode or prefill) as the backend sees it.
BatchView partView(const IndexerParams &params, const uint8_t *q, int64_t rows,
                   const TensorView &kv, const TensorView &blockTable, const TensorView &seqLens,
                   const int32_t *queryStartLoc) {
  BatchView v;
  v.params = params;
  v.q = q;
  v.numRows = rows;
  v.kv = static_cast<const uint8_t *>(kv.data);
  v.numPages = kv.shape[0];
  v.blockTable = static_cast<const int32_t *>(blockTable.data);
  v.numRequests = seqLens.shape[0];
  v.maxBlocks = blockTable.shape[1];
  v.seqLens = static_cast<const int32_t *>(seqLens.data);
  v.queryStartLoc = queryStartLoc;
  return v;
}

void warnOnce(std::set<std::string> &warned, const std::string &message) {
  if (warned.insert(message).second)
    std::cerr << "m3idx: warning: " << message << "\n";
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
  const int64_t maxTokens = int64_t{spec::kMaxBlocksPerRow} * spec::kSparseBlockSize;
  if (c.maxModelLen < 1 || c.maxModelLen > maxTokens)
    return fmt::format("max_model_len must be in [1, {}] ({} blocks of {}), got {}", maxTokens,
                       spec::kMaxBlocksPerRow, spec::kSparseBlockSize, c.maxModelLen);
  for (int q : c.decodeQueryLens)
    if (q < 1 || q > 64)
      return fmt::format("decode_query_len must be in [1, 64], got {}", q);
  if (target != DeviceKind::Host)
    return fmt::format("device {} is not served by this build: only the host backend exists "
                       "(the Indexer API runs on the host backend; sm_90 is not wired into it yet and gfx950 is "
                       "not built)",
                       deviceName(target));
  return "";
}

class IndexerImpl {
public:
  IndexerConfig config;
  Device device;
  runtime::HostBackend backend;
  int64_t compilesAtWarmup = -1;
  int64_t reportedCompiles = 0;
  std::shared_ptr<Communicator> communicator;
  bool lastCp = false;
  std::set<std::string> warned;
  GrowBuffer<int32_t> decodeQsl, decodeTopk, prefillTopk, ownTopk;
  GrowBuffer<float> scores, cpSend, cpRecv, cpMerged;
  GrowBuffer<uint8_t> cpGathered, cpQuery;

  IndexerParams params(int numDecodes, int decodeQueryLen, int heads) const {
    return IndexerParams{heads, config.initBlocks, config.localBlocks, numDecodes, decodeQueryLen};
  }
  void reportLateCompiles();
  Status decodeLocal(const BatchView &v, int64_t width, int32_t *topk);
  Status decodeCp(const BatchView &v, int64_t width, int32_t *topk, Stream stream);
};

void IndexerImpl::reportLateCompiles() {
  const auto &records = backend.kernelRecords();
  if (compilesAtWarmup < 0)
    return;
  for (size_t i = std::max<int64_t>(compilesAtWarmup, reportedCompiles); i < records.size(); ++i)
    std::cerr << fmt::format("m3idx: warning: JIT compile after warm-up: {} ({}) from {}, {:.1f} "
                             "ms\n",
                             records[i].kernel, records[i].config, runtime::sourceName(records[i].source),
                             records[i].compile.totalMs() + records[i].loadMs);
  reportedCompiles = static_cast<int64_t>(records.size());
}

Status IndexerImpl::decodeLocal(const BatchView &v, int64_t width, int32_t *topk) {
  float *s = scores.ensure(std::max<int64_t>(1, v.params.numHeads * v.numRows * width));
  M3IDX_RETURN_IF_ERROR(backend.scoreDecode(v, width, s));
  return backend.topkDecode(v, width, s, topk);
}

// SPEC §6 on one rank: all-gather the group's decode queries, score blocks b % world == rank for
// every head with the ordinary score kernel, all-to-all the head slices, top-k on the received
// scores of this rank's head.
Status IndexerImpl::decodeCp(const BatchView &v, int64_t width, int32_t *topk, Stream stream) {
  const int world = communicator->worldSize(), rank = communicator->rank();
  const int64_t rows = v.numRows;
  const size_t qBytes = static_cast<size_t>(rows) * spec::kIndexHeadDim;
  uint8_t *gathered = cpGathered.ensure(std::max<int64_t>(1, world * qBytes));
  M3IDX_RETURN_IF_ERROR(communicator->allGather(v.q, gathered, qBytes, stream));
  uint8_t *q = cpQuery.ensure(std::max<int64_t>(1, world * qBytes)); // [rows, world, 128]
  for (int h = 0; h < world; ++h)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(q + (r * world + h) * spec::kIndexHeadDim,
                  gathered + h * qBytes + r * spec::kIndexHeadDim, spec::kIndexHeadDim);
  BatchView all = v;
  all.q = q;
  all.params.numHeads = world;
  const int64_t slice = rows * width; // one head's [rows, W]
  float *send = cpSend.ensure(std::max<int64_t>(1, world * slice));
  M3IDX_RETURN_IF_ERROR(backend.scoreDecode(all, width, send, /*blockBegin=*/rank, /*step=*/world));
  float *recv = cpRecv.ensure(std::max<int64_t>(1, world * slice));
  M3IDX_RETURN_IF_ERROR(communicator->allToAll(send, recv, slice * sizeof(float), stream));
  float *merged = cpMerged.ensure(std::max<int64_t>(1, slice)); // this rank's head, [rows, W]
  const int Q = v.params.decodeQueryLen;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t nblk = spec::blocksFor(spec::causalLen(v.seqLens[r / Q], Q, r % Q));
    for (int64_t b = 0; b < nblk; ++b)
      merged[r * width + b] = recv[(b % world) * slice + r * width + b];
  }
  return backend.topkDecode(v, width, merged, topk);
}

Indexer::Indexer(std::unique_ptr<IndexerImpl> impl) : impl_(std::move(impl)) {}
Indexer::~Indexer() = default;

StatusOr<std::unique_ptr<Indexer>> Indexer::create(const IndexerConfig &config, Device device) {
  std::string reason = unsupportedReason(config, device.kind);
  if (!reason.empty())
    return Status::error("unsupported indexer config: " + reason);
  auto impl = std::make_unique<IndexerImpl>();
  impl->config = config;
  impl->device = device;
  return std::unique_ptr<Indexer>(new Indexer(std::move(impl)));
}

const IndexerConfig &Indexer::config() const { return impl_->config; }
bool Indexer::decodeCpActive() const { return impl_->lastCp; }

int64_t Indexer::compilesAfterWarmup() const {
  if (impl_->compilesAtWarmup < 0)
    return static_cast<int64_t>(impl_->backend.kernelRecords().size());
  return static_cast<int64_t>(impl_->backend.kernelRecords().size()) - impl_->compilesAtWarmup;
}

int64_t Indexer::scratchAllocations() const {
  const IndexerImpl &i = *impl_;
  return i.decodeQsl.allocations() + i.decodeTopk.allocations() + i.prefillTopk.allocations() +
         i.ownTopk.allocations() + i.scores.allocations() + i.cpSend.allocations() +
         i.cpRecv.allocations() + i.cpMerged.allocations() + i.cpGathered.allocations() +
         i.cpQuery.allocations();
}

Status Indexer::warmup() {
  using kernels::KernelKind;
  const int H = impl_->config.numIndexHeads;
  std::vector<std::pair<KernelKind, kernels::KernelConfig>> needed;
  for (int q : impl_->config.decodeQueryLens) {
    needed.push_back({KernelKind::ScoreDecode, kernels::configFor(KernelKind::ScoreDecode, H, q)});
    needed.push_back({KernelKind::TopkDecode, kernels::configFor(KernelKind::TopkDecode, H, q)});
  }
  needed.push_back({KernelKind::ScorePrefill, kernels::configFor(KernelKind::ScorePrefill, H, 4)});
  needed.push_back({KernelKind::TopkPrefill, kernels::configFor(KernelKind::TopkPrefill, H, 4)});
  needed.push_back({KernelKind::TopkMerge, kernels::configFor(KernelKind::TopkMerge, H, 4)});
  if (impl_->communicator) // CP ranks score all heads of the group
    needed.push_back({KernelKind::ScoreDecode,
                      kernels::configFor(KernelKind::ScoreDecode, impl_->communicator->worldSize() * H,
                                         spec::kCpQueryLen)});
  for (const auto &[kind, cfg] : needed) {
    if (!spec::isSupportedHeadCount(cfg.numHeads))
      continue; // a group whose heads CP cannot serve falls back to local scoring
    auto k = impl_->backend.kernel(kind, cfg);
    if (!k.ok())
      return k.status();
  }
  impl_->compilesAtWarmup = static_cast<int64_t>(impl_->backend.kernelRecords().size());
  impl_->reportedCompiles = impl_->compilesAtWarmup;
  return Status();
}

Status Indexer::initDecodeCp(std::shared_ptr<Communicator> communicator) {
  if (!communicator)
    return invalidArgument("communicator", "a communicator", "null");
  impl_->communicator = std::move(communicator);
  if (impl_->compilesAtWarmup >= 0) // already warmed up: add the CP kernel to the warm set
    return warmup();
  return Status();
}

StatusOr<ForwardResult> Indexer::forward(const TensorView &q, const TensorView &kv,
                                         const IndexerMetadata &md, Stream stream,
                                         const TensorView *topkOut) {
  IndexerImpl &im = *impl_;
  const int H = im.config.numIndexHeads;
  const Device dev = im.device;
  M3IDX_RETURN_IF_ERROR(expectTensor(q, "index_query", DType::U8, 3, dev));
  M3IDX_RETURN_IF_ERROR(expectDim(q, "index_query", 1, H, "num_index_heads"));
  M3IDX_RETURN_IF_ERROR(expectDim(q, "index_query", 2, spec::kIndexHeadDim, "index_head_dim"));
  M3IDX_RETURN_IF_ERROR(expectTensor(kv, "kv_cache", DType::U8, 2, dev));
  M3IDX_RETURN_IF_ERROR(expectDim(kv, "kv_cache", 1, spec::kPageBytes, "bytes per page"));
  const int64_t T = q.shape[0];

  BatchView decode, prefill;
  int64_t decodeWidth = 64, prefillWidth = 64;
  if (const DecodeMetadata *d = md.decode) {
    M3IDX_RETURN_IF_ERROR(expectTensor(d->seqLens, "decode.seq_lens", DType::I32, 1, dev));
    M3IDX_RETURN_IF_ERROR(expectTensor(d->blockTable, "decode.block_table", DType::I32, 2, dev));
    const int64_t D = d->seqLens.shape[0];
    M3IDX_RETURN_IF_ERROR(expectDim(d->blockTable, "decode.block_table", 0, D, "num_decodes"));
    if (d->decodeQueryLen < 1)
      return invalidArgument("decode.decode_query_len", ">= 1", d->decodeQueryLen);
    if (D * d->decodeQueryLen > T)
      return invalidArgument("index_query", fmt::format("at least {} rows ({} decodes x {})",
                                                        D * d->decodeQueryLen, D, d->decodeQueryLen),
                             q.shapeString());
    int32_t *qsl = im.decodeQsl.ensure(D + 1);
    for (int64_t i = 0; i <= D; ++i)
      qsl[i] = static_cast<int32_t>(i * d->decodeQueryLen);
    decode = partView(im.params(static_cast<int>(D), d->decodeQueryLen, H),
                      static_cast<const uint8_t *>(q.data), D * d->decodeQueryLen, kv,
                      d->blockTable, d->seqLens, qsl);
    M3IDX_RETURN_IF_ERROR(prefixed("decode.", validateBatch(decode)));
    M3IDX_RETURN_IF_ERROR(
        checkMaxSeqLen("decode.", decode.seqLens, D, d->maxSeqLen, im.config.maxModelLen));
    decodeWidth = spec::scoreWidth(spec::blocksFor(d->maxSeqLen));
  }
  const int64_t decodeRows = decode.numRows;
  if (const PrefillMetadata *p = md.prefill) {
    M3IDX_RETURN_IF_ERROR(expectTensor(p->seqLens, "prefill.seq_lens", DType::I32, 1, dev));
    const int64_t P = p->seqLens.shape[0];
    M3IDX_RETURN_IF_ERROR(expectTensor(p->blockTable, "prefill.block_table", DType::I32, 2, dev));
    M3IDX_RETURN_IF_ERROR(expectDim(p->blockTable, "prefill.block_table", 0, P, "num_prefills"));
    M3IDX_RETURN_IF_ERROR(
        expectTensor(p->queryStartLoc, "prefill.query_start_loc", DType::I32, 1, dev));
    M3IDX_RETURN_IF_ERROR(
        expectDim(p->queryStartLoc, "prefill.query_start_loc", 0, P + 1, "num_prefills + 1"));
    prefill = partView(im.params(0, 4, H),
                       static_cast<const uint8_t *>(q.data) + decodeRows * H * spec::kIndexHeadDim,
                       T - decodeRows, kv, p->blockTable, p->seqLens,
                       static_cast<const int32_t *>(p->queryStartLoc.data));
    M3IDX_RETURN_IF_ERROR(prefixed("prefill.", validateBatch(prefill)));
    for (int64_t i = 0; i < P; ++i) {
      const int64_t qLen = prefill.queryStartLoc[i + 1] - prefill.queryStartLoc[i];
      if (qLen > p->maxQueryLen)
        return invalidArgument("prefill.max_query_len",
                               fmt::format(">= the q_len of request {} = {}", i, qLen),
                               p->maxQueryLen);
    }
    M3IDX_RETURN_IF_ERROR(
        checkMaxSeqLen("prefill.", prefill.seqLens, P, p->maxSeqLen, im.config.maxModelLen));
    prefillWidth = spec::scoreWidth(spec::blocksFor(p->maxSeqLen));
  } else if (T != decodeRows) {
    return invalidArgument("index_query", fmt::format("{} rows (the decode rows; no prefill "
                                                      "metadata)",
                                                      decodeRows),
                           q.shapeString());
  }

  int32_t *topk;
  if (topkOut) {
    M3IDX_RETURN_IF_ERROR(expectTensor(*topkOut, "topk_out", DType::I32, 3, dev));
    if (topkOut->shape[0] != H || topkOut->shape[1] != T || topkOut->shape[2] != spec::kTopkBlocks)
      return invalidArgument("topk_out", fmt::format("shape [{}, {}, {}]", H, T, spec::kTopkBlocks),
                             topkOut->shapeString());
    topk = static_cast<int32_t *>(topkOut->data);
  } else {
    topk = im.ownTopk.ensure(std::max<int64_t>(1, H * T * spec::kTopkBlocks));
  }

  im.lastCp = false;
  if (decodeRows > 0) {
    int32_t *tmp = im.decodeTopk.ensure(H * decodeRows * spec::kTopkBlocks);
    bool cp = false;
    if (im.communicator) {
      IndexerParams group = decode.params;
      group.numHeads = H * im.communicator->worldSize();
      CpDecision gate = decideDecodeCp(group, im.communicator->worldSize(), md.dualBatchOverlap);
      if (!gate.useCp)
        warnOnce(im.warned, gate.fallbackReason + "; scoring decode rows locally");
      cp = gate.useCp;
    }
    M3IDX_RETURN_IF_ERROR(cp ? im.decodeCp(decode, decodeWidth, tmp, stream)
                             : im.decodeLocal(decode, decodeWidth, tmp));
    im.lastCp = cp;
    copyHeadRows(topk, T, 0, tmp, decodeRows, H);
  }
  const int64_t prefillRows = T - decodeRows;
  if (prefillRows > 0) {
    float *s = im.scores.ensure(std::max<int64_t>(1, H * prefillRows * prefillWidth));
    int32_t *tmp = im.prefillTopk.ensure(H * prefillRows * spec::kTopkBlocks);
    M3IDX_RETURN_IF_ERROR(im.backend.scorePrefill(prefill, prefillWidth, s));
    M3IDX_RETURN_IF_ERROR(im.backend.topkPrefill(prefill, prefillWidth, s, tmp));
    copyHeadRows(topk, T, decodeRows, tmp, prefillRows, H);
  }
  im.reportLateCompiles();

  ForwardResult r;
  r.topk = TensorView::contiguous(topk, DType::I32, {H, T, spec::kTopkBlocks}, dev);
  r.decodeTopk = r.topk;
  r.decodeTopk.shape[1] = decodeRows;
  r.prefillTopk = r.topk;
  r.prefillTopk.data = topk + decodeRows * spec::kTopkBlocks;
  r.prefillTopk.shape[1] = prefillRows;
  return r;
}

} // namespace m3idx
