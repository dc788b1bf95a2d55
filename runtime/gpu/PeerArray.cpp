#include "runtime/gpu/PeerArray.h"

#include <unistd.h>

#include <fmt/format.h>

namespace m3idx::runtime {

StatusOr<std::unique_ptr<PeerArray>> PeerArray::create(const DeviceApi &api, int device, comm::FdExchange &exchange,
                                                       size_t bytes, std::chrono::milliseconds timeout) {
  if (!api.hasSharedMemory())
    return Status::error(fmt::format("{} ({}) shares no device memory between processes: decode context "
                                     "parallelism across processes needs the driver's virtual memory calls",
                                     api.platform, api.library));
  if (bytes == 0)
    return invalidArgument("peer array bytes", "> 0", bytes);
  const DeviceApi::SharedMemory &m = api.shared;
  std::unique_ptr<PeerArray> a(new PeerArray(api));
  const int world = exchange.world(), rank = exchange.rank();
  a->handles_.assign(world, 0);
  a->mapped_.assign(world, false);
  size_t granularity = 0;
  M3IDX_RETURN_IF_ERROR(api.check(m.granularity(device, &granularity), "granularity of shareable memory"));
  granularity = std::max<size_t>(granularity, 1);
  a->stride_ = (bytes + granularity - 1) / granularity * granularity;
  M3IDX_RETURN_IF_ERROR(api.check(m.create(device, a->stride_, &a->handles_[rank]), "create shareable memory"));
  int ownFd = -1;
  M3IDX_RETURN_IF_ERROR(api.check(m.exportFd(a->handles_[rank], &ownFd), "export shareable memory"));
  StatusOr<std::vector<comm::FdExchange::Sent>> sent = exchange.allGather(ownFd, a->stride_, timeout);
  ::close(ownFd);
  if (!sent.ok())
    return sent.status();
  Status imported;
  for (int p = 0; p < world; ++p) {
    const comm::FdExchange::Sent &s = (*sent)[p];
    if (p != rank && imported.ok() && s.value != a->stride_)
      imported = Status::error(fmt::format("peer array: rank {} shares {} bytes a part and rank {} {}: every rank "
                                           "must ask for the same size",
                                           p, s.value, rank, a->stride_));
    if (p != rank && imported.ok())
      imported = api.check(m.importFd(s.fd, &a->handles_[p]), "import shareable memory");
    if (s.fd >= 0)
      ::close(s.fd);
  }
  M3IDX_RETURN_IF_ERROR(imported);
  M3IDX_RETURN_IF_ERROR(api.check(m.reserve(a->stride_ * world, &a->base_), "reserve an address range"));
  for (int p = 0; p < world; ++p) {
    M3IDX_RETURN_IF_ERROR(api.check(m.map(a->part(p), a->stride_, a->handles_[p]), "map shareable memory"));
    a->mapped_[p] = true;
  }
  M3IDX_RETURN_IF_ERROR(api.check(m.allowReadWrite(device, a->base_, a->stride_ * world), "allow access"));
  return a;
}

PeerArray::~PeerArray() {
  const DeviceApi::SharedMemory &m = api_.shared;
  for (size_t p = 0; p < handles_.size(); ++p) {
    if (mapped_[p])
      (void)m.unmap(part(static_cast<int>(p)), stride_);
    if (handles_[p])
      (void)m.release(handles_[p]);
  }
  if (base_)
    (void)m.unreserve(base_, stride_ * handles_.size());
}

} // namespace m3idx::runtime
