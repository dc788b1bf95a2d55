// A GPU backend over a DeviceApi (the CUDA driver or the HIP runtime): the DSL kernels' code
// objects (sm_90 PTX, gfx950 HSACO) loaded with the platform's module loader and launched one
// program per block of the target's warp / wavefront, on the caller's stream. It needs no LLVM:
// code comes from a CodeSource (the in-process compiler, or files made elsewhere).
#pragma once

#include <functional>
#include <array>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "kernels_src/DecodeWorkspace.h"
#include "kernels_src/KernelCatalog.h"
#include "kernels_src/LaunchPlan.h"
#include "runtime/Backend.h"
#include "runtime/GrowBuffer.h"
#include "runtime/gpu/DeviceApi.h"
#include "runtime/gpu/DeviceScratch.h"
#include "runtime/gpu/StreamOrder.h"
#include "tuning/TargetTuning.h"

namespace m3idx::runtime {

// The code object of a kernel (built once by the backend, for its signature too) and its config.
using CodeSource = std::function<StatusOr<std::string>(const dsl::Kernel &, const kernels::KernelConfig &)>;

// A decode workspace on the device: `base` laid out as `layout`.
struct DeviceWorkspace {
  uint64_t base = 0;
  kernels::DecodeWorkspaceLayout layout;
};

// Device addresses of a step's caller-held tensors (SPEC §3 shapes).
struct DeviceTensors {
  uint64_t q = 0;    // uint8 [T, H, 128]
  uint64_t kv = 0;   // uint8 [numPages, 9216]
  uint64_t topk = 0; // int32 [H, T, 16]; not written by a decode-CP share
  uint64_t blockTable = 0; // int32 [R, maxBlocks] equal to the batch's; 0: uploaded from it
  uint64_t seqLens = 0;    // int32 [R]: enqueueDeviceDecode only
};

class GpuBackend final : public Backend {
public:
  // `threads` per warp of a program: 32 for sm_90, 64 for gfx950 (lowering::GpuForm; a kernel
  // config's `warps` multiplies it); `tuning`: the target's table, which gives each step's
  // configs and grids.
  // `arch`: the architecture the code source makes code for ("sm_90"); a device the API reports
  // as another is refused with both named ("": not checked).
  static StatusOr<std::unique_ptr<GpuBackend>> create(const DeviceApi *api, std::string name,
                                                      int device, unsigned threads,
                                                      CodeSource source,
                                                      const tuning::TargetTuning &tuning,
                                                      const std::string &arch = "");
  ~GpuBackend() override;
  std::string name() const override { return name_; }
  std::string deviceName() const { return deviceName_; }
  int device() const { return device_; } // the ordinal it was created on
  // Uploads the batch, enqueues it, waits, and downloads the results (tests, CLI, benchmarks).
  StatusOr<IndexerOutput> run(const BatchView &batch, const RunOptions &options) override;

  // Enqueues a validated step on options.stream and returns without waiting: the batch's metadata
  // (its host arrays; its q and kv pointers are not read) goes up in one copy into this backend's
  // scratch, then the kernels read `io`. Scores are [H, T, width] in scratch (width >= the
  // batch's score width). Steps share the scratch: one on another stream than the last first
  // waits for it. With `timed`, events between launches time each kernel (lastKernelMs()).
  Status enqueue(const BatchView &batch, int64_t width, const DeviceTensors &io,
                 const RunOptions &options, bool timed = false);
  // Enqueues a decode step whose seq_lens and block table stay on the device (io.seqLens,
  // io.blockTable; `shape` gives only sizes) and whose scratch is the caller's workspace `ws`
  // (io.topk 0: the top-k goes into the workspace too): no host read, wait, allocation or copy,
  // so it can be captured into a graph (kernels::planDeviceDecode). Steps that share a
  // workspace must be ordered by the caller (one stream, or events); steps on different
  // workspaces are independent. Bad values are recorded in the status words (readStatus).
  Status enqueueDeviceDecode(const BatchView &shape, int64_t width, int64_t maxSeqLen,
                             const DeviceTensors &io, const DeviceWorkspace &ws, void *stream);
  // Decode CP across processes (SPEC §6): one rank's part of a step whose metadata stays on the
  // device (kernels::planDeviceDecodeShare), over the group's memory as one array
  // (gpu/PeerArray.h): part k, `partStride` bytes after part k - 1, holds head k's scores
  // [partStride / (width x 4), width] from its start and rank k's score programs' flags at
  // `flagsOffset` (past the rows a step writes). `part` kScoreDecode: io.q is the group's q
  // [T, ranks, 128] and the scores go to their heads' owners; kTopkDecode: this rank's top-k from
  // its own part and every rank's flags, into io.topk (0: the workspace's), its segment keys and
  // arrival counts in `ws`. The caller orders the two parts against its peers' (gpu/PeerStepOrder);
  // no host read, wait, allocation or copy, as enqueueDeviceDecode.
  struct GroupArray {
    uint64_t base = 0;
    size_t partStride = 0, flagsOffset = 0;
  };
  Status enqueueDeviceDecodeShare(const BatchView &shape, int64_t width, int64_t maxSeqLen, int rank, int ranks,
                                  const GroupArray &array, unsigned part, const DeviceTensors &io,
                                  const DeviceWorkspace &ws, void *stream);
  // Allocates the status words now (not inside a step that may be captured).
  Status reserveDeviceDecode();
  // Waits for `stream`, reads the status words (kernels::kStatusWords), and zeroes them if asked.
  Status readStatus(void *stream, int64_t *words, bool clear);
  // Obtains (compiles or loads) a kernel's function now, so that enqueue() needs none.
  Status prepare(kernels::KernelKind kind, const kernels::KernelConfig &config);
  // "kernel (config)" of every function obtained, in order.
  const std::vector<std::string> &functionsLoaded() const { return loaded_; }
  int64_t scratchAllocations() const;
  const DeviceApi &api() const { return *api_; }
  const tuning::TargetTuning &tuning() const { return tuning_; }
  // Another table for the steps from now on (benchmarks measure variants of the target's).
  void setTuning(const tuning::TargetTuning &t) {
    tuning_ = t;
    decodePlans_.clear();
  }
  // Milliseconds of the last run()'s launches, first to last, from events recorded on its stream.
  double lastKernelMs() const { return lastKernelMs_; }
  // Milliseconds of each kernel of the last run (events between consecutive launches), by name.
  const std::map<std::string, double> &lastKernelBreakdown() const { return kernelMs_; }

private:
  GpuBackend(const DeviceApi *api, std::string name, std::string deviceName, int device, unsigned threads,
             CodeSource source, const tuning::TargetTuning &tuning)
      : api_(api), name_(std::move(name)), deviceName_(std::move(deviceName)), device_(device), threads_(threads),
        tuning_(tuning), source_(std::move(source)), scores_(api), partial_(api), arrivals_(api),
        metadata_(api), stepFlags_(api), keyImage_(api), status_(api), stepOrder_(api) {}
  struct Function {
    void *fn = nullptr;
    kernels::KernelSignature signature;
  };
  StatusOr<const Function *> function(kernels::KernelKind kind, const kernels::KernelConfig &config);
  StatusOr<uint64_t> statusWords(); // allocated and zeroed on first use

  // A plan's launches with functions and argument values bound, each buffer a slot that a step
  // fills with its address: the device decode keeps them by shape (up to kMaxDecodePlans), so
  // that a step whose shapes repeat (every step of an engine, also when two streams alternate
  // two shapes) only fills addresses and launches.
  struct BoundLaunch {
    const char *name = "";
    void *fn = nullptr;
    unsigned programs = 0, threads = 0;
    // The kernel awaits the earlier ones itself and follows another launch of its plan: it may
    // start before that one ends. Never a plan's first launch, whose early reads (metadata) could
    // meet a caller's kernel still writing them.
    bool afterPrevious = false;
    std::vector<uint64_t> values;
    std::vector<std::pair<size_t, kernels::StepBuffer>> slots; // a descriptor's first value, its role
    std::vector<void *> params;                                 // into values
  };
  struct BoundPlan {
    kernels::WorkspaceNeeds needs; // of a device decode's workspace
    std::vector<BoundLaunch> launches;
  };
  StatusOr<BoundPlan> bindPlan(const kernels::StepPlan &plan);

public:
  // enqueue() in two halves, for a step planned once and run many times (Indexer::plan): the
  // plan of a validated step, its metadata uploaded on `stream` into `metadata` (null: this
  // backend's scratch, which the next step's plan reuses) and its launches bound; then runs of it
  // on the step's q, kv and top-k, on any stream. Both halves take part in the step order (a step
  // on another stream than the last first waits for the last), so a run on another stream than
  // its plan's upload waits for it, and an upload into memory a former plan's runs read waits
  // for them. Runs fill their addresses into the plan's bound launches (one run at a time).
  // `blocks`: a decode-CP share's blocks (RunOptions::decodeBlockBegin / Step; its score kernels
  // only).
  struct PlannedStep {
    BoundPlan bound;
    uint64_t address[kernels::kStepBufferCount] = {}; // the metadata's roles
    int64_t scores = 0, partial = 0, arrivals = 0, flags = 0, image = 0; // scratch elements its runs need
  };
  StatusOr<PlannedStep> prepareStep(const BatchView &batch, int64_t width, uint64_t deviceBlockTable,
                                    DeviceScratch *metadata, void *stream, kernels::DecodeBlocks blocks = {});
  Status enqueuePlanned(PlannedStep &step, const DeviceTensors &io, const RunOptions &options, bool timed = false);

private:
  // The bound plan kept under `key` in `kept`, else one made by `plan()`, refused inside a capture
  // where it would set up (refuseSetupInCapture), bound and kept (up to kMaxDecodePlans: an
  // engine's shapes repeat, a sweep's need not). The device decodes' plan caches.
  template <typename Key>
  StatusOr<BoundPlan *> keptPlan(std::map<Key, BoundPlan> &kept, const Key &key, void *stream,
                                 const std::function<StatusOr<kernels::StepPlan>()> &plan);
  // What a device decode of `plan` would do on the host besides launching (load a kernel,
  // allocate scratch), as an error if `stream` is capturing a graph: such calls invalidate the
  // caller's capture. Nothing is queried when there is nothing to do.
  Status refuseSetupInCapture(const kernels::StepPlan &plan, void *stream);
  // The bound launches with buffers at `address` (by role), on `stream` (timed: events between
  // them, after beforeLaunches).
  Status launchPlan(BoundPlan &plan, const uint64_t *address, void *stream, bool timed,
                    const std::function<Status(void *)> &beforeLaunches);
  Status clearStatus(uint64_t words); // zeroes the status words at `words`
  StatusOr<void *> event(size_t i); // the i-th timing event, created on first use
  Status collectTimes(); // after a timed enqueue: waits for it, fills the times below

  const DeviceApi *api_;
  std::string name_, deviceName_;
  int device_;
  unsigned threads_;
  tuning::TargetTuning tuning_;
  CodeSource source_;
  std::map<std::pair<int, kernels::KernelConfig>, Function> functions_;
  std::vector<std::string> loaded_;
  std::vector<void *> events_;
  double lastKernelMs_ = 0;
  std::map<std::string, double> kernelMs_;
  std::vector<std::string> launched_; // kernels of the last timed enqueue, in order
  // enqueue()'s scratch; arrivals_ (the top-k's per-row counts) is zeroed when it grows, and the
  // kernels leave it zero. The device decode works in its caller's workspace instead. keyImage_:
  // a prefill step's decode_keys output, read by its score_prefill.
  DeviceScratch scores_, partial_, arrivals_, metadata_, stepFlags_, keyImage_;
  DeviceScratch status_;
  static constexpr size_t kMaxDecodePlans = 64;
  std::map<std::array<int64_t, 10>, BoundPlan> decodePlans_;
  std::map<std::array<int64_t, 15>, BoundPlan> sharePlans_; // enqueueDeviceDecodeShare's, as decodePlans_
  GrowBuffer<int32_t> staging_; // the metadata's host side, one upload per step
  StreamOrder stepOrder_;       // enqueue()'s scratch is the last step's until it is done
};

} // namespace m3idx::runtime
