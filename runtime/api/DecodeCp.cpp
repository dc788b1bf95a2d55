// DecodeCp::create and the order of the joined indexers' CP steps (runtime/api/DecodeCpImpl.h).
#include <fmt/format.h>

#include "core/Spec.h"
#include "runtime/api/DecodeCpImpl.h"
#include "runtime/cuda/CudaDriver.h"
#include "tuning/TargetTuning.h"

namespace m3idx {

StatusOr<std::shared_ptr<DecodeCp>> DecodeCp::create(const DecodeCpGroup &group, Device device) {
  if (group.world < 2 || group.rank < 0 || group.rank >= group.world)
    return invalidArgument("decode CP group", "0 <= rank < world, world >= 2",
                           fmt::format("rank {} of {}", group.rank, group.world));
  if (group.timeoutMs < 1)
    return invalidArgument("decode CP group timeout", ">= 1 ms", group.timeoutMs);
  if (group.maxModelLen < 1 || group.maxModelLen > spec::kMaxTokensPerRow)
    return invalidArgument("decode CP max_model_len", fmt::format("in [1, {}]", spec::kMaxTokensPerRow),
                           group.maxModelLen);
  if (device.kind != DeviceKind::Cuda || device.index < 0)
    return invalidArgument("decode CP device", "a CUDA device (cuda:N): the Indexer serves decode CP on CUDA only",
                           fmt::format("kind {} index {}", static_cast<int>(device.kind), device.index));
  StatusOr<const runtime::DeviceApi *> api = cuda::loadDriver();
  if (!api.ok())
    return api.status();
  std::string name;
  M3IDX_RETURN_IF_ERROR((*api)->check((*api)->openDevice(device.index, &name), "open device"));
  // SPEC §6's most rows, whatever the joining indexers' capacities: one group serves them all.
  const int64_t maxRows = int64_t{spec::kCpMaxRequests} * spec::kCpQueryLen;
  StatusOr<const tuning::TargetTuning *> sm90 = tuning::tuningFor("sm_90");
  if (!sm90.ok())
    return sm90.status();
  const runtime::PeerDecodeStep::Capacity capacity{maxRows, spec::scoreWidth(spec::blocksFor(group.maxModelLen)),
                                                   (*sm90)->mostDecodeScorePrograms() + maxRows};
  StatusOr<std::unique_ptr<runtime::PeerDecodeStep>> step =
      runtime::PeerDecodeStep::create(**api, device.index, group.name, group.rank, group.world, capacity,
                                      std::chrono::milliseconds(group.timeoutMs));
  if (!step.ok())
    return step.status();
  return std::make_shared<DecodeCp>(std::make_unique<Impl>(group, device, **api, std::move(*step)));
}

DecodeCp::DecodeCp(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DecodeCp::~DecodeCp() = default;
const DecodeCpGroup &DecodeCp::group() const { return impl_->group(); }
Device DecodeCp::device() const { return impl_->device(); }
int DecodeCp::departedRank() const { return impl_->departed(); }

DecodeCp::Impl::~Impl() {
  // The array is unmapped with step_: no queued step may still use it. The device's context is
  // made current first: the last holder may be another thread than the one that created it.
  std::string name;
  if (api_.openDevice(device_.index, &name) == 0)
    (void)api_.synchronize();
}

Status DecodeCp::Impl::enqueue(runtime::GpuBackend &backend, const BatchView &shape, int64_t width, int64_t maxSeqLen,
                               const runtime::DeviceTensors &io, const runtime::DeviceWorkspace &ws, void *stream,
                               bool capturing) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!capturing)
    M3IDX_RETURN_IF_ERROR(order_.before(stream));
  M3IDX_RETURN_IF_ERROR(step_->enqueue(backend, shape, width, maxSeqLen, io, ws, stream));
  return capturing ? Status() : order_.after(stream);
}

} // namespace m3idx
