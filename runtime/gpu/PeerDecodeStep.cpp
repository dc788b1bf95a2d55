#include "runtime/gpu/PeerDecodeStep.h"

#include <vector>

#include <fmt/format.h>

#include "core/Spec.h"
#include "kernels_src/LaunchPlan.h"

namespace m3idx::runtime {

namespace {

constexpr size_t kAlign = 256;
size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
constexpr auto kWatchEvery = std::chrono::milliseconds(50);

} // namespace

StatusOr<std::unique_ptr<PeerDecodeStep>> PeerDecodeStep::create(const DeviceApi &api, int device,
                                                                 const std::string &group, int rank, int ranks,
                                                                 const Capacity &capacity,
                                                                 std::chrono::milliseconds timeout) {
  if (capacity.maxRows < 1 || capacity.width < 64 || (capacity.width & (capacity.width - 1)) != 0 ||
      capacity.mostFlags < 1)
    return invalidArgument("decode CP capacity", "rows >= 1, a power-of-two width >= 64, flags >= 1",
                           fmt::format("{} rows, width {}, {} flags", capacity.maxRows, capacity.width,
                                       capacity.mostFlags));
  if (!api.copyRowsAsync)
    return Status::error(fmt::format("{} ({}) cannot copy rows between devices' memory: decode context "
                                     "parallelism across processes gathers the queries with it",
                                     api.platform, api.library));
  std::unique_ptr<PeerDecodeStep> s(new PeerDecodeStep());
  s->api_ = &api;
  s->capacity_ = capacity;
  const size_t rowBytes = static_cast<size_t>(capacity.width) * 4;
  s->flagsOffset_ = alignUp(static_cast<size_t>(capacity.maxRows) * rowBytes);
  s->queriesOffset_ = alignUp(s->flagsOffset_ + 4 * static_cast<size_t>(capacity.mostFlags));
  const size_t wordsOffset =
      alignUp(s->queriesOffset_ + static_cast<size_t>(capacity.maxRows) * ranks * spec::kIndexHeadDim);
  StatusOr<std::unique_ptr<comm::FdExchange>> exchange = comm::FdExchange::connect(group, rank, ranks, timeout);
  if (!exchange.ok())
    return exchange.status();
  s->exchange_ = std::move(*exchange);
  StatusOr<std::unique_ptr<PeerArray>> array =
      PeerArray::create(api, device, *s->exchange_, wordsOffset + PeerStepOrder::wordBytes(ranks), timeout);
  if (!array.ok())
    return array.status();
  s->array_ = std::move(*array);
  if (s->array_->stride() % rowBytes != 0) // the score kernel's head stride is whole rows
    return Status::error(fmt::format("decode CP: the driver's allocation granularity gives parts of {} bytes, not "
                                     "whole {}-byte score rows",
                                     s->array_->stride(), rowBytes));
  StatusOr<std::unique_ptr<PeerStepOrder>> order =
      PeerStepOrder::create(api, *s->array_, *s->exchange_, wordsOffset, timeout);
  if (!order.ok())
    return order.status();
  s->order_ = std::move(*order);
  s->watchdog_ = std::thread([p = s.get()] { p->watch(); });
  return s;
}

PeerDecodeStep::~PeerDecodeStep() {
  stop_ = true;
  if (watchdog_.joinable())
    watchdog_.join();
}

// Once a peer has left, every peer's waits are released, not only its own: a live peer that saw the
// departure first refuses its next step, and this rank's stream, which may have queued that step
// already, would otherwise wait for that peer's words forever (found on the GPU: two of three
// ranks hung, bench/RESULTS.md 2026-12-06 (2)).
void PeerDecodeStep::watch() {
  while (!stop_) {
    const std::vector<int> left = exchange_->departed();
    if (!left.empty()) {
      int none = -1;
      departed_.compare_exchange_strong(none, left.front());
      for (int peer = 0; peer < ranks(); ++peer)
        if (peer != rank() && !order_->gone(peer))
          (void)order_->releaseWaitsFor(peer); // best effort: a driver that fails here has failed the step too
    }
    std::this_thread::sleep_for(kWatchEvery);
  }
}

Status PeerDecodeStep::enqueue(GpuBackend &backend, const BatchView &shape, int64_t width, int64_t maxSeqLen,
                               const DeviceTensors &io, const DeviceWorkspace &ws, void *stream) {
  if (const int peer = departed_.load(); peer >= 0)
    return Status::error(fmt::format("decode CP: rank {} of the group has left (its process ended); this rank's "
                                     "steps since then are not to be trusted: make the group anew",
                                     peer));
  const int64_t T = shape.numRows;
  if (T > capacity_.maxRows || width > capacity_.width)
    return invalidArgument("decode CP step", fmt::format("at most {} rows of width {}", capacity_.maxRows, capacity_.width),
                           fmt::format("{} rows of width {}", T, width));
  const int r = rank(), R = ranks();
  const size_t rowBytes = spec::kIndexHeadDim, groupRowBytes = R * rowBytes;
  M3IDX_RETURN_IF_ERROR(order_->beforeWrites(stream));
  for (int p = 0; p < R; ++p) // this rank's head: column r of every part's [T, ranks, 128]
    M3IDX_RETURN_IF_ERROR(api_->check(api_->copyRowsAsync(array_->part(p) + queriesOffset_ + r * rowBytes, groupRowBytes,
                                                          io.q, rowBytes, rowBytes, T, stream),
                                      "push the query rows"));
  M3IDX_RETURN_IF_ERROR(order_->afterFirstWrites(stream));
  M3IDX_RETURN_IF_ERROR(order_->beforeFirstReads(stream));
  const GpuBackend::GroupArray array{array_->base(), array_->stride(), flagsOffset_};
  DeviceTensors scoreIo = io;
  scoreIo.q = array_->part(r) + queriesOffset_;
  M3IDX_RETURN_IF_ERROR(backend.enqueueDeviceDecodeShare(shape, width, maxSeqLen, r, R, array, kernels::kScoreDecode,
                                                         scoreIo, ws, stream));
  M3IDX_RETURN_IF_ERROR(order_->afterWrites(stream));
  M3IDX_RETURN_IF_ERROR(order_->beforeReads(stream));
  M3IDX_RETURN_IF_ERROR(
      backend.enqueueDeviceDecodeShare(shape, width, maxSeqLen, r, R, array, kernels::kTopkDecode, io, ws, stream));
  return order_->afterReads(stream);
}

} // namespace m3idx::runtime
