// NCCL's and RCCL's C API, declared here (the few entry points decode CP needs) so the build needs
// no SDK. all-gather is ncclAllGather; all-to-all is grouped ncclSend/ncclRecv, since NCCL has no
// all-to-all primitive.
#include "m3idx/NcclCommunicator.h"

#include "core/EnvTable.h"
#include "runtime/DynamicLibrary.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

namespace m3idx {

namespace {

using ncclComm_t = void *;
using ncclResult_t = int;
constexpr int kNcclUint8 = 1; // ncclDataType_t::ncclUint8
struct ncclUniqueId {
  char internal[128];
};

struct CollectiveApi {
  std::string path;
  ncclResult_t (*getUniqueId)(ncclUniqueId *) = nullptr;
  ncclResult_t (*commInitRank)(ncclComm_t *, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*allGather)(const void *, void *, size_t, int, ncclComm_t, void *) = nullptr;
  ncclResult_t (*send)(const void *, size_t, int, int, ncclComm_t, void *) = nullptr;
  ncclResult_t (*recv)(void *, size_t, int, int, ncclComm_t, void *) = nullptr;
  ncclResult_t (*groupStart)() = nullptr;
  ncclResult_t (*groupEnd)() = nullptr;
  const char *(*getErrorString)(ncclResult_t) = nullptr;

  Status check(ncclResult_t r, const char *call) const {
    if (r == 0)
      return Status();
    return Status::error(fmt::format("{}: {} failed: {} (code {})", path, call,
                                     getErrorString ? getErrorString(r) : "unknown error", r));
  }
};

const char *prefixOf(CollectiveLibrary l) { return l == CollectiveLibrary::Nccl ? "nccl" : "rccl"; }

using runtime::resolveSymbol;

StatusOr<const CollectiveApi *> loadApi(CollectiveLibrary library) {
  static std::mutex mutex;
  static std::unique_ptr<CollectiveApi> loaded[2];
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<CollectiveApi> &slot = loaded[static_cast<int>(library)];
  if (slot)
    return slot.get();
  std::vector<std::string> tried;
  void *handle = nullptr;
  std::string path;
  for (const std::string &name : collectiveLibraryNames(library)) {
    handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      path = name;
      break;
    }
    tried.push_back(name);
  }
  if (!handle)
    return Status::error(fmt::format("{}: library not found (tried {}): {}", prefixOf(library),
                                     fmt::join(tried, ", "), dlerror()));
  auto api = std::make_unique<CollectiveApi>();
  api->path = path;
  for (Status s : {resolveSymbol(handle, path, "ncclGetUniqueId", api->getUniqueId),
                   resolveSymbol(handle, path, "ncclCommInitRank", api->commInitRank),
                   resolveSymbol(handle, path, "ncclCommDestroy", api->commDestroy),
                   resolveSymbol(handle, path, "ncclAllGather", api->allGather),
                   resolveSymbol(handle, path, "ncclSend", api->send),
                   resolveSymbol(handle, path, "ncclRecv", api->recv),
                   resolveSymbol(handle, path, "ncclGroupStart", api->groupStart),
                   resolveSymbol(handle, path, "ncclGroupEnd", api->groupEnd),
                   resolveSymbol(handle, path, "ncclGetErrorString", api->getErrorString)})
    if (!s.ok()) {
      dlclose(handle);
      return s;
    }
  slot = std::move(api); // the library stays loaded for the process's life
  return slot.get();
}

class CollectiveCommunicator final : public Communicator {
public:
  CollectiveCommunicator(const CollectiveApi *api, ncclComm_t comm, int rank, int world)
      : api_(api), comm_(comm), rank_(rank), world_(world) {}
  ~CollectiveCommunicator() override { api_->commDestroy(comm_); }
  int rank() const override { return rank_; }
  int worldSize() const override { return world_; }

  Status allGather(const void *send, void *recv, size_t bytes, Stream stream) override {
    return api_->check(api_->allGather(send, recv, bytes, kNcclUint8, comm_, stream),
                       "ncclAllGather");
  }

  Status allToAll(const void *send, void *recv, size_t bytes, Stream stream) override {
    M3IDX_RETURN_IF_ERROR(api_->check(api_->groupStart(), "ncclGroupStart"));
    Status first;
    for (int peer = 0; peer < world_; ++peer) {
      Status s = api_->check(api_->send(static_cast<const char *>(send) + peer * bytes, bytes,
                                        kNcclUint8, peer, comm_, stream),
                             "ncclSend");
      Status r = api_->check(api_->recv(static_cast<char *>(recv) + peer * bytes, bytes,
                                        kNcclUint8, peer, comm_, stream),
                             "ncclRecv");
      if (first.ok())
        first = !s.ok() ? s : r;
    }
    Status end = api_->check(api_->groupEnd(), "ncclGroupEnd"); // always close the group
    return first.ok() ? end : first;
  }

private:
  const CollectiveApi *api_;
  ncclComm_t comm_;
  int rank_, world_;
};

} // namespace

std::vector<std::string> collectiveLibraryNames(CollectiveLibrary library) {
  std::vector<std::string> names;
  const std::string env = env::get(library == CollectiveLibrary::Nccl ? "M3IDX_NCCL_LIBRARY"
                                                                       : "M3IDX_RCCL_LIBRARY");
  if (!env.empty())
    return {env}; // an explicit choice: no silent fallback to another library
  if (library == CollectiveLibrary::Nccl)
    names.insert(names.end(), {"libnccl.so.2", "libnccl.so"});
  else
    names.insert(names.end(), {"librccl.so.1", "librccl.so"});
  return names;
}

StatusOr<CollectiveUniqueId> collectiveUniqueId(CollectiveLibrary library) {
  auto api = loadApi(library);
  if (!api.ok())
    return api.status();
  ncclUniqueId id;
  M3IDX_RETURN_IF_ERROR((*api)->check((*api)->getUniqueId(&id), "ncclGetUniqueId"));
  CollectiveUniqueId out;
  std::copy(id.internal, id.internal + sizeof id.internal, out.begin());
  return out;
}

StatusOr<std::shared_ptr<Communicator>> makeCollectiveCommunicator(CollectiveLibrary library,
                                                                   const CollectiveUniqueId &id,
                                                                   int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world)
    return invalidArgument("rank", fmt::format("in [0, world = {})", world), rank);
  auto api = loadApi(library);
  if (!api.ok())
    return api.status();
  ncclUniqueId raw;
  std::copy(id.begin(), id.end(), raw.internal);
  ncclComm_t comm = nullptr;
  M3IDX_RETURN_IF_ERROR((*api)->check((*api)->commInitRank(&comm, world, raw, rank),
                                      "ncclCommInitRank"));
  return std::shared_ptr<Communicator>(
      std::make_shared<CollectiveCommunicator>(*api, comm, rank, world));
}

} // namespace m3idx
