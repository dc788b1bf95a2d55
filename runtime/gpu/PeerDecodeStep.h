// Decode context parallelism across processes on one host (SPEC §6, issue 39), one rank's side:
// the group's memory as one array (gpu/PeerArray), laid out for the Indexer's capacities, and a CP
// decode step queued on the rank's stream, ordered against its peers by gpu/PeerStepOrder:
//   beforeWrites; push this rank's query rows into every part ([rows, ranks, 128] each);
//   afterFirstWrites; beforeFirstReads; score_decode of the group's heads for blocks rank,
//   rank + ranks, ... (GpuBackend::enqueueDeviceDecodeShare), each head's scores into its owner's
//   part; afterWrites; beforeReads; topk_decode of this rank's head; afterReads.
// Every operation is stream-ordered and fixed by shapes, so a step can be captured into a graph.
// A watchdog thread watches the exchange: once a peer's process ends, every peer's waits are
// released (the stream moves on; that step's top-k, and every later one's until the group is made
// again, is not to be trusted) and departed() names it from then on.
//
// Part layout (bytes): scores [maxRows, width] f32 | every flag of a score grid | queries
// [maxRows, ranks, 128] | the step words; the stride a multiple of a score row (the driver's
// granularity is a power of two, as a row is).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "core/Status.h"
#include "runtime/comm/FdExchange.h"
#include "runtime/gpu/GpuBackend.h"
#include "runtime/gpu/PeerArray.h"
#include "runtime/gpu/PeerStepOrder.h"

namespace m3idx::runtime {

class PeerDecodeStep {
public:
  struct Capacity {
    int64_t maxRows = 0; // a step's most decode rows
    int64_t width = 0;   // score columns: max_model_len's (a power of two x 64)
    int64_t mostFlags = 0; // a rank's score grid's most programs
  };
  // Collective: every rank of `group` calls it with the same capacity, or all fail by `timeout`.
  static StatusOr<std::unique_ptr<PeerDecodeStep>> create(const DeviceApi &api, int device, const std::string &group,
                                                          int rank, int ranks, const Capacity &capacity,
                                                          std::chrono::milliseconds timeout);
  ~PeerDecodeStep();

  // Queues a CP step of this rank's head: io.q [T, 1, 128] contiguous, io.kv / blockTable / seqLens
  // as enqueueDeviceDecode's, the top-k into io.topk (0: the workspace's), segment keys and
  // arrival counts in `ws`. T must be at most the capacity's rows. Steps of one rank must be
  // ordered (one stream, as every rank's steps follow the group's order); an error once a peer
  // has departed (nothing queued).
  Status enqueue(GpuBackend &backend, const BatchView &shape, int64_t width, int64_t maxSeqLen,
                 const DeviceTensors &io, const DeviceWorkspace &ws, void *stream);
  // The first peer seen to leave, or -1.
  int departed() const { return departed_.load(); }
  // This rank's part's [rows, ranks, 128] of the group's queries (tests).
  uint64_t groupQueries() const { return array_->part(rank()) + queriesOffset_; }
  int rank() const { return exchange_->rank(); }
  int ranks() const { return exchange_->world(); }
  const Capacity &capacity() const { return capacity_; }

private:
  PeerDecodeStep() = default;
  void watch(); // the watchdog thread's loop

  const DeviceApi *api_ = nullptr;
  Capacity capacity_;
  size_t flagsOffset_ = 0, queriesOffset_ = 0;
  std::unique_ptr<comm::FdExchange> exchange_;
  std::unique_ptr<PeerArray> array_;
  std::unique_ptr<PeerStepOrder> order_;
  std::atomic<int> departed_{-1};
  std::atomic<bool> stop_{false};
  std::thread watchdog_;
};

} // namespace m3idx::runtime
