// Decode-CP transport over NCCL (NVIDIA) or RCCL (AMD), loaded with dlopen at run time so no GPU
// SDK is needed to build. Buffers handed to it must be device memory of the rank's GPU.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "m3idx/Communicator.h"

namespace m3idx {

enum class CollectiveLibrary { Nccl, Rccl };

// The library names tried, in order; M3IDX_NCCL_LIBRARY / M3IDX_RCCL_LIBRARY, when set, is the
// only one.
std::vector<std::string> collectiveLibraryNames(CollectiveLibrary library);

// ncclUniqueId: made on one rank, shared out of band (e.g. by the engine's process group).
using CollectiveUniqueId = std::array<char, 128>;
StatusOr<CollectiveUniqueId> collectiveUniqueId(CollectiveLibrary library);

// Collective over `world` ranks (ncclCommInitRank): every rank calls it with the same id.
StatusOr<std::shared_ptr<Communicator>> makeCollectiveCommunicator(CollectiveLibrary library,
                                                                   const CollectiveUniqueId &id,
                                                                   int rank, int world);

} // namespace m3idx
