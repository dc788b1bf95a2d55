// DecodeCp's inside (include/m3idx/Indexer.h): the group's PeerDecodeStep, laid out for SPEC §6's
// most rows and the group's max_model_len, shared by the process's indexers, and the order of
// their steps on the device. GPU engines call enqueue; nothing else does.
#pragma once

#include <memory>
#include <mutex>

#include "m3idx/Indexer.h"
#include "runtime/gpu/GpuBackend.h"
#include "runtime/gpu/PeerDecodeStep.h"
#include "runtime/gpu/StreamOrder.h"

namespace m3idx {

class DecodeCp::Impl {
public:
  Impl(DecodeCpGroup group, Device device, const runtime::DeviceApi &api, std::unique_ptr<runtime::PeerDecodeStep> step)
      : group_(std::move(group)), device_(device), api_(api), step_(std::move(step)), order_(&api) {}
  ~Impl();

  // Queues a CP step (PeerDecodeStep::enqueue) of one of the joined indexers. Calls from several
  // indexers' threads take turns; an eager step on another stream than the last waits for it
  // first; `capturing` steps wait for nothing (a capture cannot).
  Status enqueue(runtime::GpuBackend &backend, const BatchView &shape, int64_t width, int64_t maxSeqLen,
                 const runtime::DeviceTensors &io, const runtime::DeviceWorkspace &ws, void *stream, bool capturing);

  const DecodeCpGroup &group() const { return group_; }
  Device device() const { return device_; }
  const runtime::DeviceApi &api() const { return api_; }
  int ranks() const { return step_->ranks(); }
  int departed() const { return step_->departed(); }
  const runtime::PeerDecodeStep::Capacity &capacity() const { return step_->capacity(); }

private:
  const DecodeCpGroup group_;
  const Device device_;
  const runtime::DeviceApi &api_;
  std::mutex mutex_; // guards the step and its order
  std::unique_ptr<runtime::PeerDecodeStep> step_;
  runtime::StreamOrder order_; // eager CP steps across streams
};

} // namespace m3idx
