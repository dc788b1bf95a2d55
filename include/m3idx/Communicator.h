// The collectives decode context parallelism needs, behind one small interface: NCCL (NVIDIA) or
// RCCL (AMD) loaded at run time, or an in-process group of ranks for the host backend and tests.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "m3idx/Status.h"

namespace m3idx {

using Stream = void *; // cudaStream_t / hipStream_t; null on the host

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  // recv = the world's `bytes`-sized chunks, in rank order.
  virtual Status allGather(const void *send, void *recv, size_t bytes, Stream stream) = 0;
  // send holds one `bytes`-sized chunk per destination rank; recv receives one from each source.
  virtual Status allToAll(const void *send, void *recv, size_t bytes, Stream stream) = 0;
};

// `world` communicators sharing memory, one per rank; each rank calls from its own thread.
std::vector<std::shared_ptr<Communicator>> makeInProcessGroup(int world);

} // namespace m3idx
