// The order of eager steps that share one resource (scratch, a workspace, decode CP's array)
// across streams: a step queued on another stream than the last first waits for the last (an
// event recorded after it), so they are correct, not overlapped. Steps on one stream are ordered
// already. Captured steps call neither: a graph can wait for nothing outside it.
#pragma once

#include "core/Status.h"
#include "runtime/gpu/DeviceApi.h"

namespace m3idx::runtime {

class StreamOrder {
public:
  explicit StreamOrder(const DeviceApi *api) : api_(api) {}
  ~StreamOrder() {
    if (done_)
      api_->eventDestroy(done_);
  }
  StreamOrder(const StreamOrder &) = delete;
  StreamOrder &operator=(const StreamOrder &) = delete;

  // Before a step's first use of the resource on `stream`. Once `stream` has waited it is the one
  // ordered after the last step, so a second call before after() waits for nothing more.
  Status before(void *stream) {
    if (!any_ || stream == last_)
      return Status();
    M3IDX_RETURN_IF_ERROR(api_->check(api_->streamWaitEvent(stream, done_), "stream wait"));
    last_ = stream;
    return Status();
  }
  // After the step's last use, on the same stream.
  Status after(void *stream) {
    if (!done_)
      M3IDX_RETURN_IF_ERROR(api_->check(api_->eventCreate(&done_), "event creation"));
    M3IDX_RETURN_IF_ERROR(api_->check(api_->eventRecord(done_, stream), "event record"));
    last_ = stream;
    any_ = true;
    return Status();
  }
  // Waits on the host for the last step (before the resource is freed).
  void drain() {
    if (any_)
      api_->eventSynchronize(done_);
  }

private:
  const DeviceApi *api_;
  void *done_ = nullptr; // recorded after the last step, on last_
  void *last_ = nullptr;
  bool any_ = false;
};

} // namespace m3idx::runtime
