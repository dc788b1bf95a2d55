// Ranks of one process, one thread each, exchanging through shared memory: the host backend's
// decode-CP transport and the stand-in for NCCL/RCCL in tests.
#include <barrier>
#include <cstring>

#include "m3idx/Communicator.h"

namespace m3idx {

namespace {

struct SharedState {
  explicit SharedState(int world) : barrier(world), sends(world) {}
  std::barrier<> barrier;
  std::vector<const void *> sends;
};

class InProcessCommunicator final : public Communicator {
public:
  InProcessCommunicator(std::shared_ptr<SharedState> state, int rank, int world)
      : state_(std::move(state)), rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int worldSize() const override { return world_; }

  Status allGather(const void *send, void *recv, size_t bytes, Stream) override {
    exchange(send, [&](int src, const uint8_t *chunk) {
      std::memcpy(static_cast<uint8_t *>(recv) + src * bytes, chunk, bytes);
    });
    return Status();
  }

  Status allToAll(const void *send, void *recv, size_t bytes, Stream) override {
    exchange(send, [&](int src, const uint8_t *sendOfSrc) {
      std::memcpy(static_cast<uint8_t *>(recv) + src * bytes, sendOfSrc + rank_ * bytes, bytes);
    });
    return Status();
  }

private:
  // Publish, wait for everyone, read the others' buffers, wait again before anyone reuses theirs.
  template <typename ReadFn> void exchange(const void *send, ReadFn read) {
    state_->sends[rank_] = send;
    state_->barrier.arrive_and_wait();
    for (int src = 0; src < world_; ++src)
      read(src, static_cast<const uint8_t *>(state_->sends[src]));
    state_->barrier.arrive_and_wait();
  }

  std::shared_ptr<SharedState> state_;
  int rank_, world_;
};

} // namespace

std::vector<std::shared_ptr<Communicator>> makeInProcessGroup(int world) {
  auto state = std::make_shared<SharedState>(world);
  std::vector<std::shared_ptr<Communicator>> group;
  for (int r = 0; r < world; ++r)
    group.push_back(std::make_shared<InProcessCommunicator>(state, r, world));
  return group;
}

} // namespace m3idx
