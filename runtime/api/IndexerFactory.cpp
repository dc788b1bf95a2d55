// Indexer::create: the engine for a device, over the in-process compiler and the kernel caches.
// Kept apart from Indexer.cpp, which needs no LLVM (m3idx_api).
#include "lowering/Target.h"
#include "lowering/nvvm/PtxAssembler.h"
#include "runtime/GpuCodeCache.h"
#include "runtime/api/IndexerEngine.h"
#include "runtime/cuda/CudaBackend.h"

namespace m3idx {

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

} // namespace m3idx
