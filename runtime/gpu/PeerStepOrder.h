// The order of a group's steps on a PeerArray (decode context parallelism across processes, issue
// 39), kept on the device by words in each rank's part: a step's writes into peers' parts wait
// until those peers have read their parts of the step before (back-pressure), and a rank reads its
// part once every peer's writes into it are done. A step may write and read in two rounds (decode
// CP: the queries, whose reader writes the scores). Each rank queues, on the stream of its step:
//   beforeWrites   wait for consumed[p] == 1 from every peer p, and set it back to 0
//   (the first round's writes into the parts)
//   afterFirstWrites / beforeFirstReads   as afterWrites / beforeReads below, on words first[]
//   (the first round's reads of this rank's part; the second round's writes)
//   afterWrites    ready[rank] = 1 in every peer's words, after the writes (a system-scope fence)
//   beforeReads    wait for ready[p] == 1 from every peer p, and set it back to 0
//   (the step's reads of this rank's part)
//   afterReads     consumed[rank] = 1 in every peer's words
// The words hold 1 or 0, never a count, because a captured graph fixes the values its waits and
// writes use; a rank takes a peer's 1 and puts back 0 before it signals anything that lets that
// peer set the word again, so no 1 is lost or seen twice. The whole step is four groups of
// stream memory operations (DeviceApi::waitWordEquals / writeWord): capturable, and measured
// with four processes on one GPU in bench/ipc_push_probe.cu ("memops").
//
// A peer that dies leaves this rank's stream waiting: releaseWaitsFor(peer) sets that peer's words
// in this rank's page, as if it had done its part, by stream writes on a stream of its own that no
// other waits for (a synchronous copy would queue behind the blocked wait on the legacy default
// stream: found on the GPU, bench/RESULTS.md 2026-12-06 (2)), so the stream moves on, and later
// steps no longer wait for it (their results, and this one's, are garbage: the caller reports the
// peer's end; comm::FdExchange::departed() says when). Threads: one rank's step calls from one
// thread at a time; releaseWaitsFor and gone() from any.
#pragma once

#include <atomic>
#include <memory>

#include "core/Status.h"
#include "runtime/gpu/DeviceApi.h"
#include "runtime/gpu/PeerArray.h"

namespace m3idx::runtime {

class PeerStepOrder {
public:
  // Bytes of a rank's words (placed at `offset` in every part, which must hold them, 4-aligned).
  static size_t wordBytes(int ranks) { return kWords * 4 * static_cast<size_t>(ranks); }
  // Sets this rank's words to their first state (every peer's part free, none ready), then
  // waits for every rank to have done so (no peer's first signal may be lost to it).
  static StatusOr<std::unique_ptr<PeerStepOrder>> create(const DeviceApi &api, const PeerArray &array,
                                                         comm::FdExchange &exchange, size_t offset,
                                                         std::chrono::milliseconds timeout);
  Status beforeWrites(void *stream) { return take(stream, kConsumed); }
  Status afterFirstWrites(void *stream) { return give(stream, kFirstReady); }
  Status beforeFirstReads(void *stream) { return take(stream, kFirstReady); }
  Status afterWrites(void *stream) { return give(stream, kReady); }
  Status beforeReads(void *stream) { return take(stream, kReady); }
  Status afterReads(void *stream) { return give(stream, kConsumed); }
  Status releaseWaitsFor(int peer);
  ~PeerStepOrder();
  bool gone(int peer) const { return gone_[peer].load(); }

private:
  enum Word { kReady = 0, kConsumed = 1, kFirstReady = 2, kWords = 3 };
  PeerStepOrder(const DeviceApi &api, const PeerArray &array, int rank, size_t offset)
      : api_(api), array_(array), rank_(rank), offset_(offset), gone_(new std::atomic<bool>[array.ranks()]) {
    for (int p = 0; p < array.ranks(); ++p)
      gone_[p] = false;
  }
  // rank `owner`'s word `w` about rank `about`, as this rank maps it
  uint64_t word(int owner, Word w, int about) const {
    return array_.part(owner) + offset_ + 4 * (static_cast<size_t>(w) * array_.ranks() + about);
  }
  Status take(void *stream, Word w);
  Status give(void *stream, Word w);
  const DeviceApi &api_;
  const PeerArray &array_;
  int rank_;
  size_t offset_;
  std::unique_ptr<std::atomic<bool>[]> gone_; // per rank: released, no longer waited for
  void *releaseStream_ = nullptr;             // DeviceApi::createNonBlockingStream's
};

} // namespace m3idx::runtime
