// One array over the device memory of a group's ranks on one host (decode context parallelism
// across processes, SPEC §6): each rank's part is an allocation of its own, shared with the others
// as a file descriptor (comm::FdExchange), and every rank maps all the parts back to back, in rank
// order, in one address range of its own. Part p lies in rank p's memory at base() + p * stride()
// in every rank, so a kernel that writes a [ranks, ...] array with a part's stride between ranks
// writes each part into its owner's memory, and reads the same way. Measured with four processes
// on one GPU, eager and graph-replayed: bench/ipc_push_probe.cu (bench/RESULTS.md, 2026-12-05 (8)).
//
// Every rank of the exchange's group creates its array with the same `bytes`, in the same order
// of calls on the exchange. Destroying it unmaps the parts and releases this rank's handles; a
// part's memory lives until every rank that mapped it has released it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/Status.h"
#include "runtime/comm/FdExchange.h"
#include "runtime/gpu/DeviceApi.h"

namespace m3idx::runtime {

class PeerArray {
public:
  static StatusOr<std::unique_ptr<PeerArray>> create(const DeviceApi &api, int device, comm::FdExchange &exchange,
                                                     size_t bytes, std::chrono::milliseconds timeout);
  ~PeerArray();
  PeerArray(const PeerArray &) = delete;
  PeerArray &operator=(const PeerArray &) = delete;

  uint64_t base() const { return base_; }
  size_t stride() const { return stride_; } // `bytes` rounded up to the driver's granularity
  uint64_t part(int rank) const { return base_ + static_cast<uint64_t>(rank) * stride_; }
  int ranks() const { return static_cast<int>(handles_.size()); }

private:
  explicit PeerArray(const DeviceApi &api) : api_(api) {}
  const DeviceApi &api_;
  uint64_t base_ = 0;
  size_t stride_ = 0;
  std::vector<uint64_t> handles_; // per rank (0: none)
  std::vector<bool> mapped_;      // per rank
};

} // namespace m3idx::runtime
