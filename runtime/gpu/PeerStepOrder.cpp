#include "runtime/gpu/PeerStepOrder.h"

#include <vector>

#include <fmt/format.h>

namespace m3idx::runtime {

StatusOr<std::unique_ptr<PeerStepOrder>> PeerStepOrder::create(const DeviceApi &api, const PeerArray &array,
                                                               comm::FdExchange &exchange, size_t offset,
                                                               std::chrono::milliseconds timeout) {
  if (!api.waitWordEquals || !api.writeWord || !api.createNonBlockingStream)
    return Status::error(fmt::format("{} ({}) has no stream memory operations: decode context parallelism "
                                     "across processes orders its steps with them",
                                     api.platform, api.library));
  if (array.ranks() != exchange.world())
    return invalidArgument("peer step order's exchange", fmt::format("the array's {} ranks", array.ranks()),
                           exchange.world());
  if (offset % 4 != 0 || offset + wordBytes(array.ranks()) > array.stride())
    return invalidArgument("peer step words' offset", fmt::format("4-aligned, words within a part of {} bytes", array.stride()),
                           offset);
  std::unique_ptr<PeerStepOrder> o(new PeerStepOrder(api, array, exchange.rank(), offset));
  M3IDX_RETURN_IF_ERROR(api.check(api.createNonBlockingStream(&o->releaseStream_), "create the release stream"));
  std::vector<uint32_t> first(kWords * static_cast<size_t>(array.ranks()), 0);
  for (int p = 0; p < array.ranks(); ++p)
    first[kConsumed * array.ranks() + p] = 1; // every peer's part is free before the first step
  M3IDX_RETURN_IF_ERROR(api.check(api.upload(o->word(exchange.rank(), kReady, 0), first.data(), first.size() * 4),
                                  "upload the step words"));
  M3IDX_RETURN_IF_ERROR(exchange.barrier(timeout));
  return o;
}

Status PeerStepOrder::take(void *stream, Word w) {
  for (int p = 0; p < array_.ranks(); ++p) {
    if (p == rank_ || gone_[p])
      continue;
    M3IDX_RETURN_IF_ERROR(api_.check(api_.waitWordEquals(stream, word(rank_, w, p), 1), "wait for a peer's word"));
    M3IDX_RETURN_IF_ERROR(api_.check(api_.writeWord(stream, word(rank_, w, p), 0), "reset a peer's word"));
  }
  return Status();
}

Status PeerStepOrder::give(void *stream, Word w) {
  for (int p = 0; p < array_.ranks(); ++p)
    if (p != rank_ && !gone_[p])
      M3IDX_RETURN_IF_ERROR(api_.check(api_.writeWord(stream, word(p, w, rank_), 1), "set a word in a peer's part"));
  return Status();
}

Status PeerStepOrder::releaseWaitsFor(int peer) {
  if (peer < 0 || peer >= array_.ranks() || peer == rank_)
    return invalidArgument("peer", fmt::format("another rank of 0..{}", array_.ranks() - 1), peer);
  gone_[peer] = true;
  for (Word w : {kReady, kConsumed, kFirstReady})
    M3IDX_RETURN_IF_ERROR(api_.check(api_.writeWord(releaseStream_, word(rank_, w, peer), 1), "release a gone peer's word"));
  return api_.check(api_.streamSynchronize(releaseStream_), "release a gone peer's words");
}

PeerStepOrder::~PeerStepOrder() {
  if (releaseStream_)
    api_.destroyStream(releaseStream_);
}

} // namespace m3idx::runtime
