// Indexer steps on a GPU beyond a backend's own run(): through the Indexer API on device buffers
// as an inference engine calls it (m3idx run/bench --indexer), and one decode-CP rank's share of a
// step (m3idx bench --cp-share).
#pragma once

#include <string>
#include <vector>

#include "core/Batch.h"
#include "core/Status.h"
#include "runtime/gpu/GpuBackend.h"

namespace m3idx::cli {

// One step of `batch` through Indexer::forward on device `backend` ("cuda" or "hip", device 0):
// q, kv and the top-k in device buffers, the metadata on the host, the block table also on the
// device with `deviceTables`. Returns the top-k [H, T, 16].
StatusOr<std::vector<int32_t>> runThroughIndexer(const std::string &backend, const BatchView &batch,
                                                 bool deviceTables);

// Prints the medians of `repeat` timed steps: the backend's launches alone, then Indexer::forward
// on the stream with the block table on the host and on the device, and forward()'s host time.
Status benchIndexer(runtime::GpuBackend &gpu, const std::string &backend, const BatchView &batch, int repeat);

// One rank's share of a decode-CP group of `world` ranks (SPEC §6) on this one GPU: `group` holds
// all world x H heads, `local` the same requests with one rank's H. Checks that the share's scores
// equal the full scoring's bit for bit on every rank's blocks, then prints the share's score kernel
// plus a local top-k against a local step, medians of `repeat`. An error when any score differs.
Status benchDecodeCpShare(runtime::GpuBackend &gpu, const BatchView &group, const BatchView &local, int world,
                          int repeat);

} // namespace m3idx::cli
