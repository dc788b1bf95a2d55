// What runs an Indexer's steps on its device: the host JIT kernels (HostIndexerEngine) or a GPU
// backend's launches on the caller's stream (GpuIndexerEngine). The Indexer checks every argument
// before a step reaches an engine, and calls an engine from one thread at a time (its lock);
// engines trust what they are given.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/Batch.h"
#include "core/Spec.h"
#include "core/Status.h"
#include "kernels_src/KernelCatalog.h"
#include "tuning/TargetTuning.h"
#include "m3idx/Indexer.h"

namespace m3idx::runtime {
class GpuBackend;
}

namespace m3idx {

// A validated step. Metadata arrays are on the host; q and kv on the engine's device.
struct IndexerStep {
  BatchView decode, prefill; // numRows == 0: the part is absent. Their q / kv point into q / kv.
  int64_t decodeWidth = 64, prefillWidth = 64; // score widths from the parts' max_seq_len
  int64_t rows = 0;                            // decode rows + prefill rows
  const uint8_t *q = nullptr;                  // [rows, H, 128]
  const uint8_t *kv = nullptr;                 // [numPages, 9216]
  // The parts' block tables on the device (GPU engines; null: absent), each [requests, maxBlocks].
  const int32_t *decodeDeviceTable = nullptr, *prefillDeviceTable = nullptr;
  bool dualBatchOverlap = false;
};

// A step as an engine planned it (IndexerEngine::plan): what each run of it reuses. Runs only
// read it; an engine's plans are used under the Indexer's lock.
class EnginePlan {
public:
  virtual ~EnginePlan() = default;
};

class IndexerEngine {
public:
  virtual ~IndexerEngine() = default;
  // The engine's target's tuning table: the configs its steps are built with.
  virtual const tuning::TargetTuning &tuning() const = 0;
  // Obtains a kernel's code now (warm-up), so that steps need none.
  virtual Status prepare(kernels::KernelKind kind, const kernels::KernelConfig &config) = 0;
  // Kernels obtained so far, and a line for each from the `from`-th on (late-compile warnings).
  virtual int64_t kernelsObtained() const = 0;
  virtual std::vector<std::string> kernelNotes(int64_t from) const = 0;
  virtual int64_t scratchAllocations() const = 0;
  // Decode CP (SPEC §6). An engine that cannot serve it says why.
  virtual Status setCommunicator(std::shared_ptr<Communicator> communicator) = 0;
  // Decode CP across processes (Indexer::joinDecodeCp): joins the process's group; runDecode,
  // and run's decode rows, are then served context-parallel where SPEC §6 allows. An engine that
  // cannot says why.
  virtual Status joinPeerGroup(std::shared_ptr<DecodeCp> cp) = 0;
  // Kernels a CP step needs besides the configured ones (none without CP).
  virtual std::vector<std::pair<kernels::KernelKind, kernels::KernelConfig>> cpKernels() const = 0;
  // Plans a step from its metadata (its q and kv are not read): the launches, grids and
  // arguments, and on a GPU the metadata uploaded on `stream`. `persistent` (Indexer::plan): the
  // plan outlives the call, runs any number of times from any stream, and owns what it uploaded;
  // else (forward) it runs once, next, and may use the engine's scratch.
  virtual StatusOr<std::unique_ptr<EnginePlan>> plan(const IndexerStep &step, Stream stream, bool persistent) = 0;
  // Runs `plan`, made by this engine from `step`'s metadata, on step's q and kv: writes every
  // row's top-k into `topk` ([H, rows, 16] on the device), or into the engine's own buffer when it
  // is null, and returns where. `usedCp` says whether decode CP served the step.
  virtual StatusOr<int32_t *> run(const EnginePlan &plan, const IndexerStep &step, int32_t *topk, Stream stream,
                                  bool *usedCp) = 0;

  // The device-metadata decode (Indexer::decode). Its scratch is a workspace laid out for the
  // config's capacities (kernels/DecodeWorkspace.h): decodeWorkspaceBytes() of it. reserveDecode
  // allocates what steps must not (status words; the engine's own workspace when the config
  // reserves it) at warm-up. runDecode queues a step planned from shapes
  // (kernels::planDeviceDecode) whose q, kv, block table and seq_lens are on the engine's device
  // (`shape`'s pointers; its maxBlocks is the table's row stride), in `workspace` (device memory
  // of at least decodeWorkspaceBytes(); null: the engine's own), and writes `topk`, or the
  // workspace's top-k region, and returns where.
  virtual int64_t decodeWorkspaceBytes() const = 0;
  virtual Status reserveDecode() = 0;
  // `usedCp`: whether the group's decode CP scored the step.
  virtual StatusOr<int32_t *> runDecode(const BatchView &shape, int64_t width, int64_t maxSeqLen,
                                        int32_t *topk, void *workspace, Stream stream, bool *usedCp) = 0;
  // Waits for `stream`, reads the kernels' status words (kernels::kStatusWords), clears if asked.
  virtual Status readStatus(Stream stream, int64_t *words, bool clear) = 0;
  // Whether `stream` is being captured into a graph (nothing may wait on it then).
  virtual StatusOr<bool> capturing(Stream stream) = 0;
};

// The decode workspace's layout on a target for the config's capacities: its heads, its most rows
// (max_num_decodes x max_decode_query_len) and max_model_len's score width (SPEC §4's W).
inline kernels::DecodeWorkspaceLayout decodeWorkspaceFor(const IndexerConfig &c, const tuning::TargetTuning &t) {
  return t.decodeWorkspace(c.numIndexHeads, int64_t{c.maxNumDecodes} * c.maxDecodeQueryLen,
                           spec::scoreWidth(spec::blocksFor(c.maxModelLen)));
}

std::unique_ptr<IndexerEngine> makeHostIndexerEngine(const IndexerConfig &config);
// Over a GPU backend for config's heads (no decode CP).
std::unique_ptr<IndexerEngine> makeGpuIndexerEngine(const IndexerConfig &config,
                                                    std::unique_ptr<runtime::GpuBackend> backend);

// An Indexer over `engine` (unsupportedReason is checked here too). Indexer::create picks the
// engine for a device; tests over a stand-in engine call this directly.
StatusOr<std::unique_ptr<Indexer>> createIndexer(const IndexerConfig &config, Device device,
                                                 std::unique_ptr<IndexerEngine> engine);

} // namespace m3idx
