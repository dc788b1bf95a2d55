// A case held on a GPU device as an inference engine holds a step: q and kv in device buffers,
// the batch split into the API's decode / prefill metadata (host arrays), forward() on a stream,
// the top-k downloaded, every top-k buffer poisoned before a step may write it. For the CLI's
// Indexer runs and benchmarks (m3idx run/bench --indexer) and the GPU tests (CudaIndexerTest).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/Batch.h"
#include "m3idx/Indexer.h"
#include "runtime/api/BatchMetadata.h"
#include "runtime/gpu/DeviceApi.h"
#include "runtime/gpu/DeviceScratch.h"

namespace m3idx::bench {

using runtime::BatchMetadata;
using runtime::DeviceApi;
using runtime::DeviceScratch;

class DeviceCase {
public:
  // Uploads `batch`'s q and kv to `device` (its host arrays must outlive this object). With
  // `deviceTables`, also its block table, given to forward() as the parts' deviceBlockTable (one
  // table: decode rows, then prefill rows).
  static StatusOr<std::unique_ptr<DeviceCase>> upload(const DeviceApi &api, Device device,
                                                      const BatchView &batch, bool deviceTables);
  // forward() on `stream`, returning at once. `callerTopk`: into this case's own [H, T, 16] buffer
  // (poisoned first; checked to be the one the result names) instead of the indexer's.
  StatusOr<ForwardResult> forward(Indexer &indexer, Stream stream, bool callerTopk);
  // Waits for the device, copies the result's top-k to the host, then poisons that buffer (so the
  // indexer's own one is poisoned before every step but its first).
  StatusOr<std::vector<int32_t>> download(const ForwardResult &result) const;

private:
  DeviceCase(const DeviceApi &api, Device device, const BatchView &batch)
      : api_(api), device_(device), batch_(batch), q_(&api), kv_(&api), topk_(&api), table_(&api) {}

  const DeviceApi &api_;
  Device device_;
  BatchView batch_;
  BatchMetadata split_;
  DeviceScratch q_, kv_, topk_, table_;
};

} // namespace m3idx::bench
