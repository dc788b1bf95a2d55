// The host-app API, shaped like vLLM's MiniMaxM3IndexerRocmNvfp4Impl: construct once from the
// model config (rejecting what cannot be served, with the reason), warm up, then forward() once
// per layer and step on device buffers and a stream, with no compile or allocation in steady state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "m3idx/Status.h"
#include "m3idx/Communicator.h"
#include "m3idx/Tensor.h"

namespace m3idx {

struct IndexerConfig {
  int numIndexHeads = 1; // per rank: 1, 2 or 4
  int indexHeadDim = 128;
  int sparseBlockSize = 128;
  int topkBlocks = 16;
  std::string scoreType = "max";
  std::string kvDtype = "nvfp4";
  int initBlocks = 0;
  int localBlocks = 1;
  int64_t maxModelLen = 1 << 20;
  std::vector<int> decodeQueryLens = {4}; // decode shapes compiled by warmup()
};

// Empty when `target` can serve `config`; else one sentence naming the field, the expected and
// the actual value (as vLLM's rocm_nvfp4_indexer_unsupported_reason does).
std::string unsupportedReason(const IndexerConfig &config, DeviceKind target);

// vLLM's metadata split. Decode rows come first in index_query: num_decodes x decode_query_len.
// Metadata tensors are host arrays on every device: the indexer validates them (SPEC §7) and
// plans the launches from them. On a GPU they go up in one stream-ordered copy per step, unless
// a block table is also given on the device (deviceBlockTable: the same values, int32, same shape,
// on the indexer's device): kernels then read that one and only the small arrays go up.
struct DecodeMetadata {
  TensorView blockTable; // int32 [num_decodes, max_blocks]
  TensorView seqLens;    // int32 [num_decodes]
  int decodeQueryLen = 4;
  int64_t maxSeqLen = 0; // >= every seq_len (sizes the score scratch without a device read)
  TensorView deviceBlockTable; // optional (data null: absent), GPU indexers only
};

struct PrefillMetadata {
  TensorView blockTable;    // int32 [num_prefills, max_blocks]
  TensorView queryStartLoc; // int32 [num_prefills + 1], from 0 (prefill rows only)
  TensorView seqLens;       // int32 [num_prefills]
  int64_t maxQueryLen = 0;
  int64_t maxSeqLen = 0;
  // Optional, as DecodeMetadata's; a mixed step reads it in place when it directly follows the
  // decode one (rows of one table, decode requests first), else the host tables go up joined.
  TensorView deviceBlockTable;
};

struct IndexerMetadata {
  const DecodeMetadata *decode = nullptr;   // null: no decode rows
  const PrefillMetadata *prefill = nullptr; // null: no prefill rows
  bool dualBatchOverlap = false;            // decode CP is off under DBO (SPEC §6)
};

// Views into the [H, tokens, 16] top-k buffer: decode rows, then prefill rows. Valid until the
// next forward() when the buffer is the indexer's own.
struct ForwardResult {
  TensorView topk;        // int32 [H, tokens, 16]
  TensorView decodeTopk;  // int32 [H, decode tokens, 16] (strided)
  TensorView prefillTopk; // int32 [H, prefill tokens, 16] (strided)
};

class IndexerImpl;

class Indexer {
public:
  // Host: the host JIT backend on host buffers. Cuda: the sm_90 kernels (compiled in process,
  // through the disk cache) launched on the caller's stream; q, kv and topk_out are device
  // buffers, the metadata stays on the host (it is validated and planned there) and goes up in one
  // stream-ordered copy per step.
  static StatusOr<std::unique_ptr<Indexer>> create(const IndexerConfig &config, Device device);
  explicit Indexer(std::unique_ptr<IndexerImpl> impl); // the runtime's factories make IndexerImpl
  ~Indexer();

  // Compiles (or loads) every kernel the configured shapes need; forward() then never compiles.
  Status warmup();

  // Collective over the tensor-parallel group (every rank calls it): enables decode CP when the
  // group and config allow it (SPEC §6); otherwise steps are scored locally with a warning.
  Status initDecodeCp(std::shared_ptr<Communicator> communicator);

  // topkOut: optional caller buffer int32 [H, tokens, 16]; else the indexer's own. On a GPU the
  // call returns once the step is queued on `stream`; the top-k is there when the stream gets there.
  StatusOr<ForwardResult> forward(const TensorView &indexQuery, const TensorView &kvCache,
                                  const IndexerMetadata &metadata, Stream stream = nullptr,
                                  const TensorView *topkOut = nullptr);

  const IndexerConfig &config() const;
  // Kernels forward() had to obtain (compile, or read and link) after warmup(): 0 once warm.
  int64_t compilesAfterWarmup() const;
  int64_t scratchAllocations() const;  // grow-only buffers; constant once shapes stop growing
  bool decodeCpActive() const;         // whether the last forward() used decode CP

private:
  std::unique_ptr<IndexerImpl> impl_;
};

} // namespace m3idx
