// File descriptors passed between the ranks of a group on one host: the CUDA driver's shareable
// memory handles are descriptors (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), which no collective
// of torch.distributed or NCCL can carry, while a Unix socket can (SCM_RIGHTS). Decode context
// parallelism across processes (SPEC §6) maps every rank's receive buffer into one array with
// them; the sockets then stay open so that a rank learns when a peer's process has ended.
//
// Each rank listens on the abstract socket "m3idx-<group>-<rank>" (Linux's abstract namespace: no
// file, gone with the process), connects to every lower rank and accepts every higher one; a
// connection starts with the connecting rank's number. The group name must be the same on every
// rank and unique among groups on the host (a caller all-gathers one rank's random bytes).
//
// Threads: one FdExchange is used by one thread at a time; departed() may be called from any.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/Status.h"

namespace m3idx::comm {

class FdExchange {
public:
  // Connects rank `rank` of `world` ranks (2 <= world <= 64) of group `group` (1-64 characters
  // of [A-Za-z0-9_.-]); fails naming the ranks that did not come within `timeout`.
  static StatusOr<std::unique_ptr<FdExchange>> connect(const std::string &group, int rank, int world,
                                                       std::chrono::milliseconds timeout);
  ~FdExchange();
  FdExchange(const FdExchange &) = delete;
  FdExchange &operator=(const FdExchange &) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  // What a rank sent: a descriptor and a number that travels with it (a size to agree on).
  struct Sent {
    int fd = -1;
    uint64_t value = 0;
  };
  // Sends `fd` (not consumed) and `value` to every peer and receives each peer's: element p is
  // what rank p sent (this process owns and must close its descriptor), element rank() is {-1,
  // value}. Every rank calls it the same number of times. Fails naming a peer that has gone or did
  // not answer in `timeout`.
  StatusOr<std::vector<Sent>> allGather(int fd, uint64_t value, std::chrono::milliseconds timeout);
  // Returns once every rank has called it (the same number of times), or fails naming a peer
  // that has gone or did not come in `timeout`.
  Status barrier(std::chrono::milliseconds timeout);
  // The peers whose connection has closed (their process ended or closed its FdExchange), without
  // blocking; also what a caller's watchdog polls.
  std::vector<int> departed();

private:
  FdExchange(int rank, int world) : rank_(rank), world_(world), socks_(world, -1) {}
  Status error(const std::string &what) const; // "fd exchange, rank r of w: <what>"
  int rank_, world_;
  std::vector<int> socks_; // per peer, the connected socket (-1 for this rank)
};

// The abstract socket name of a rank ("\0m3idx-<group>-<rank>" without the leading NUL).
std::string fdExchangeSocketName(const std::string &group, int rank);

} // namespace m3idx::comm
