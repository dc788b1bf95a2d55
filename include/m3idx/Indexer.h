// The host-app API, shaped like vLLM's MiniMaxM3IndexerRocmNvfp4Impl: construct once from the
// model config (rejecting what cannot be served, with the reason), warm up, then forward() once
// per layer and step on device buffers and a stream, with no compile or allocation in steady state.
//
// Threads and streams. An Indexer may be called from several threads at once: its calls take
// turns on the host (a lock held while a call validates and queues its step, microseconds on a
// GPU), and each gets its own step's answer. On the device:
// - forward() steps share the indexer's scratch; one queued on another stream than the last first
//   waits for the last (correct, not overlapped). run() steps likewise, in the scratch of their
//   plan's maker (IndexerPlan).
// - decode() steps work in a decode workspace (decodeWorkspaceBytes(); caller-owned device
//   memory, zeroed once). Steps given different workspaces are independent and overlap across
//   streams; steps that share one must be ordered, as steps on one stream are: so one workspace
//   can serve every layer of a step (layers run one after another), and each stream that runs
//   decode steps at the same time (dual-batch overlap) needs its own. A graph keeps the workspace
//   it was captured with: graphs that may replay at the same time need different workspaces.
// - Without a workspace, decode() uses the indexer's own (reserved by warmup() unless
//   reserveDecodeWorkspace is false): an eager step on another stream than the last first waits
//   for the last; inside a capture nothing can wait, and the rule above applies to it.
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
  // Capacities of the device-metadata decode (Indexer::decode), fixed at creation: a decode
  // workspace is laid out for them (mostly H x maxNumDecodes x maxDecodeQueryLen x W floats of
  // scores, W = max_model_len's blocks rounded up: 32 MiB at the defaults), and its grids depend
  // on them and the step's shapes only.
  int maxNumDecodes = 256;      // 1..256
  int maxDecodeQueryLen = 4;    // 1..8 (speculative decoding verifies up to 8 rows)
  int64_t maxModelLen = 1 << 20; // tokens, <= 2^20: fixes W
  std::vector<int> decodeQueryLens = {4}; // decode shapes compiled by warmup()
  // decode() then waits for its stream and fails with the first bad value the device found
  // (a debug setting: it cannot run inside graph capture). Also on with M3IDX_CHECK_DECODE=1.
  bool checkDecodeSync = false;
  // warmup() allocates the indexer's own decode workspace. An engine that passes one workspace
  // to every layer's decode() turns this off and saves decodeWorkspaceBytes() per layer.
  bool reserveDecodeWorkspace = true;
};

// What decode()'s device-side checks found since the status words were last cleared: each word is
// 0, or bit 62 set with the request (bits 32+; 45+ for a page) and the bad value (low 32 bits; a
// page's block in bits 32-44). Words keep the first-seen kind of problem until cleared.
struct DeviceStatus {
  int64_t seqLens = 0;    // a seq_len outside [0, min(max_model_len, block table columns x 128)]
  int64_t blockTable = 0; // a page id a visible row reads outside [0, kv_cache pages)
  bool ok() const { return seqLens == 0 && blockTable == 0; }
  // One line naming each problem ("decode.seq_lens[3] = -5: ..."); "" when ok().
  std::string message() const;
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

// A decode-CP group across processes on one host (DecodeCp::create): `name` the same on every
// rank and unique on the host (1-64 of [A-Za-z0-9_.-]: a caller all-gathers one rank's random
// bytes), this process's `rank` of `world`. maxModelLen sizes the receive buffers (as vLLM's
// init_rocm_nvfp4_indexer_decode_cp(max_model_len) does): a joining indexer's must not exceed it.
struct DecodeCpGroup {
  std::string name;
  int rank = 0;
  int world = 4;
  int timeoutMs = 60000; // for every rank to join
  int64_t maxModelLen = 1 << 20;
};

// Decode CP across processes on one host (SPEC §6): one per process, shared by the process's
// indexers (an engine's one per layer). Its device memory -- receive buffers of SPEC §6's most
// rows (256 requests x 4) by max_model_len's W, f32, 32 MiB at 1M tokens, and the gathered
// queries -- is one array over the group's processes (driver shareable memory, descriptors passed
// over Unix sockets). CUDA only (no Indexer serves HIP yet; the transport's HIP side is built).
//
// Order: every CP step of every indexer that joined it goes through the one array, so a rank's CP
// steps run one after another on the device and every rank runs the same steps in the same order
// (an engine's layers do). Eager steps queued on another stream than the last first wait for the
// last (correct, not overlapped); captured steps cannot wait outside their graph: graphs holding
// CP steps must not replay at the same time. A rank whose process ends is named by the others'
// next CP step (an error); results since are not to be trusted: make a new DecodeCp.
class DecodeCp {
public:
  // Collective: every rank's process calls it with the same name, world and maxModelLen, within
  // group.timeoutMs; `device` is this process's GPU (ranks may share one).
  static StatusOr<std::shared_ptr<DecodeCp>> create(const DecodeCpGroup &group, Device device);
  ~DecodeCp(); // waits for the device: no queued step may still use the array
  const DecodeCpGroup &group() const;
  Device device() const;
  int departedRank() const; // the first peer seen to leave, or -1

  class Impl; // runtime/api/DecodeCpImpl.h
  Impl &impl() { return *impl_; }
  explicit DecodeCp(std::unique_ptr<Impl> impl);

private:
  std::unique_ptr<Impl> impl_;
};

class IndexerImpl;

// One step's metadata, checked and planned once by Indexer::plan and run for every layer by
// Indexer::run (as FlashInfer's plan / run). It holds copies of the host arrays it was made from
// (the caller may reuse them at once) and, on a GPU, its own device copy of them; a device block
// table given in the metadata is read in place by every run, so it must keep its values while the
// plan is run. Any Indexer of the maker's configuration (heads, init_blocks, local_blocks, device)
// runs it, so an engine's layers share one plan a step: runs go through the maker's engine and
// scratch (kept alive by the plan, also past the maker), taking turns under its lock, so the
// maker's thread and stream rules apply to them. Immutable: one plan may be run from several
// threads and streams at once.
class IndexerPlan {
public:
  int64_t rows() const;        // index_query rows a run takes: decode rows, then prefill rows
  int64_t decodeRows() const;

  class Impl; // runtime/api/Indexer.cpp
  explicit IndexerPlan(std::unique_ptr<Impl> impl);
  ~IndexerPlan();
  const Impl &impl() const { return *impl_; }

private:
  std::unique_ptr<Impl> impl_;
};

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

  // Decode CP across processes on one host (SPEC §6; CUDA, one head): joins this process's
  // DecodeCp (not collective; an indexer joins one, once). decode() steps, and forward()'s decode
  // rows, that meet SPEC §6 (4 ranks, one head a rank, decode_query_len 4, at most 256 requests,
  // no dual-batch overlap) are then scored context-parallel, graph-capturable (decode()),
  // bit-identical to local scoring; others locally (one warning). DecodeCp's comment says how
  // steps must be ordered. The config's maxModelLen must not exceed the group's.
  Status joinDecodeCp(std::shared_ptr<DecodeCp> cp);

  // topkOut: optional caller buffer int32 [H, tokens, 16]; else the indexer's own. On a GPU the
  // call returns once the step is queued on `stream`; the top-k is there when the stream gets there.
  StatusOr<ForwardResult> forward(const TensorView &indexQuery, const TensorView &kvCache,
                                  const IndexerMetadata &metadata, Stream stream = nullptr,
                                  const TensorView *topkOut = nullptr);

  // forward() in two halves, so that a step's host work is done once for all its layers:
  // plan() checks the metadata (everything forward() checks of it; page ids against kv_cache at
  // each run, in O(1)), plans the launches and, on a GPU, uploads the metadata on `stream` (runs
  // on other streams wait for it); run() checks index_query, kv_cache and topkOut against the
  // plan, then only binds and launches. forward() is plan() then run(). Errors name the argument.
  // Without topkOut the top-k lies in the plan's maker's own buffer, until that indexer's next step.
  StatusOr<std::shared_ptr<const IndexerPlan>> plan(const IndexerMetadata &metadata, Stream stream = nullptr);
  StatusOr<ForwardResult> run(const IndexerPlan &plan, const TensorView &indexQuery, const TensorView &kvCache,
                              Stream stream = nullptr, const TensorView *topkOut = nullptr);

  // A decode step whose metadata stays on the indexer's device, as a CUDA graph needs: seqLens
  // int32 [D] and blockTable int32 [D, M] (rows may be strided, columns contiguous), q
  // [D x Q, H, 128] (Q = rows / D <= maxDecodeQueryLen), D <= maxNumDecodes. Only shapes, dtypes,
  // devices and strides are checked here (never a device read); no host synchronisation,
  // allocation or copy happens, so the call can be captured with stream capture and replayed.
  // Values are checked on the device: a request with seq_len 0 (padding) gets all -1, and one
  // with a bad seq_len or page id gets all -1 and is recorded in the status words
  // (readDeviceStatus); no out-of-range page is read. `workspace`: uint8 [>= decodeWorkspaceBytes()]
  // on the indexer's device, zeroed before its first step (null: the indexer's own; the
  // stream rules are in this file's first comment). topkOut as forward's ([H, D x Q, 16]);
  // without it the result lies in the workspace (valid until its next decode step). D == 0
  // queues nothing. Inside a capture, a call that would first have to load kernels (a
  // decode_query_len not in decodeQueryLens at warmup()) or allocate (its own workspace before
  // warmup()) fails naming the fix instead: those calls would invalidate the capture.
  StatusOr<TensorView> decode(const TensorView &indexQuery, const TensorView &kvCache,
                              const TensorView &blockTable, const TensorView &seqLens,
                              Stream stream = nullptr, const TensorView *topkOut = nullptr,
                              const TensorView *workspace = nullptr);
  // Bytes of a decode workspace for this indexer's capacities. Indexers of one config need the
  // same; one of them serves several configs when it is at least each one's size.
  int64_t decodeWorkspaceBytes() const;
  // Waits for `stream`, reads the status words, and clears them if asked.
  StatusOr<DeviceStatus> readDeviceStatus(Stream stream = nullptr, bool clear = true);

  const IndexerConfig &config() const;
  // Kernels forward() had to obtain (compile, or read and link) after warmup(): 0 once warm.
  int64_t compilesAfterWarmup() const;
  int64_t scratchAllocations() const;  // grow-only buffers; constant once shapes stop growing
  bool decodeCpActive() const;         // whether the last forward() or decode() used decode CP

private:
  std::unique_ptr<IndexerImpl> impl_;
};

} // namespace m3idx
