#include "runtime/comm/FdExchange.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace m3idx::comm {

namespace {

using Clock = std::chrono::steady_clock;

bool validGroup(const std::string &g) {
  return !g.empty() && g.size() <= 64 && std::all_of(g.begin(), g.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

sockaddr_un addressOf(const std::string &name, socklen_t *len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  a.sun_path[0] = '\0'; // the abstract namespace
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

// Waits for `events` on fd until the deadline: true when they came.
bool waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, msLeft(deadline));
    if (n > 0)
      return true;
    if (n == 0 || errno != EINTR)
      return false;
  }
}

bool sendAll(int fd, const void *data, size_t n) {
  return ::send(fd, data, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}

bool recvAll(int fd, void *data, size_t n, Clock::time_point deadline) {
  auto *p = static_cast<char *>(data);
  while (n > 0) {
    if (!waitFor(fd, POLLIN, deadline))
      return false;
    ssize_t got = ::recv(fd, p, n, 0);
    if (got <= 0)
      return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

std::string joinRanks(const std::vector<int> &ranks) { return fmt::format("{}", fmt::join(ranks, ", ")); }

} // namespace

std::string fdExchangeSocketName(const std::string &group, int rank) { return fmt::format("m3idx-{}-{}", group, rank); }

StatusOr<std::unique_ptr<FdExchange>> FdExchange::connect(const std::string &group, int rank, int world,
                                                           std::chrono::milliseconds timeout) {
  if (world < 2 || world > 64)
    return invalidArgument("fd exchange world", "2..64 ranks", world);
  if (rank < 0 || rank >= world)
    return invalidArgument("fd exchange rank", fmt::format("0..{}", world - 1), rank);
  if (!validGroup(group))
    return invalidArgument("fd exchange group", "1-64 characters of [A-Za-z0-9_.-]", fmt::format("'{}'", group));
  if (timeout.count() <= 0)
    return invalidArgument("fd exchange timeout", "> 0 ms", timeout.count());
  const Clock::time_point deadline = Clock::now() + timeout;
  std::unique_ptr<FdExchange> x(new FdExchange(rank, world));
  const std::string where = fmt::format("fd exchange of group '{}', rank {} of {}", group, rank, world);

  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0)
    return Status::error(fmt::format("{}: socket: {}", where, std::strerror(errno)));
  socklen_t len;
  sockaddr_un own = addressOf(fdExchangeSocketName(group, rank), &len);
  if (::bind(listener, reinterpret_cast<sockaddr *>(&own), len) != 0 || ::listen(listener, world) != 0) {
    const int err = errno;
    ::close(listener);
    return Status::error(fmt::format("{}: cannot listen on '{}': {}{}", where, fdExchangeSocketName(group, rank),
                                     std::strerror(err),
                                     err == EADDRINUSE ? " (another process holds this group's rank: group names must be unique)" : ""));
  }
  // Lower ranks: connect (retrying until the peer listens), then say who this is.
  for (int p = 0; p < rank; ++p) {
    sockaddr_un peer = addressOf(fdExchangeSocketName(group, p), &len);
    for (;;) {
      int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (s >= 0 && ::connect(s, reinterpret_cast<sockaddr *>(&peer), len) == 0) {
        x->socks_[p] = s;
        break;
      }
      if (s >= 0)
        ::close(s);
      if (Clock::now() >= deadline)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const int32_t me = rank;
    if (x->socks_[p] < 0 || !sendAll(x->socks_[p], &me, sizeof me)) {
      ::close(listener);
      return Status::error(fmt::format("{}: rank {} did not listen within {} ms", where, p, timeout.count()));
    }
  }
  // Higher ranks: accept, each naming itself.
  for (int accepted = rank + 1; accepted < world; ++accepted) {
    int s = waitFor(listener, POLLIN, deadline) ? ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC) : -1;
    int32_t who = -1;
    if (s >= 0 && (!recvAll(s, &who, sizeof who, deadline) || who <= rank || who >= world || x->socks_[who] >= 0)) {
      ::close(s);
      ::close(listener);
      return Status::error(who < 0 ? fmt::format("{}: a connection did not name its rank within {} ms", where, timeout.count())
                                   : fmt::format("{}: a connection named rank {}, not a missing higher rank", where, who));
    }
    if (s < 0) {
      std::vector<int> missing;
      for (int p = rank + 1; p < world; ++p)
        if (x->socks_[p] < 0)
          missing.push_back(p);
      ::close(listener);
      return Status::error(fmt::format("{}: no connection from rank(s) {} within {} ms", where, joinRanks(missing),
                                       timeout.count()));
    }
    x->socks_[who] = s;
  }
  ::close(listener); // every peer is connected: the name is free again
  return x;
}

FdExchange::~FdExchange() {
  for (int s : socks_)
    if (s >= 0)
      ::close(s);
}

StatusOr<std::vector<FdExchange::Sent>> FdExchange::allGather(int fd, uint64_t value,
                                                              std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::vector<Sent> got(world_);
  got[rank_].value = value;
  auto fail = [&](const std::string &what) {
    for (const Sent &g : got)
      if (g.fd >= 0)
        ::close(g.fd);
    return error(what);
  };
  // One message a peer: the value as its payload, the descriptor beside it.
  auto message = [](uint64_t *payload, iovec *io, char *ctrl, size_t ctrlBytes) {
    *io = iovec{payload, sizeof *payload};
    msghdr m{};
    m.msg_iov = io;
    m.msg_iovlen = 1;
    m.msg_control = ctrl;
    m.msg_controllen = ctrlBytes;
    return m;
  };
  for (int p = 0; p < world_; ++p) {
    if (p == rank_)
      continue;
    uint64_t payload = value;
    iovec io;
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
    msghdr m = message(&payload, &io, ctrl, sizeof ctrl);
    cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    if (::sendmsg(socks_[p], &m, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof payload))
      return fail(fmt::format("cannot send to rank {} ({}): has it gone?", p, std::strerror(errno)));
  }
  for (int p = 0; p < world_; ++p) {
    if (p == rank_)
      continue;
    if (!waitFor(socks_[p], POLLIN, deadline))
      return fail(fmt::format("rank {} sent nothing within {} ms", p, timeout.count()));
    uint64_t payload = 0;
    iovec io;
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
    msghdr m = message(&payload, &io, ctrl, sizeof ctrl);
    // A stream socket delivers the descriptor with the message's first byte; the payload is small
    // enough to arrive whole with it (a peer writes it in one sendmsg).
    const ssize_t n = ::recvmsg(socks_[p], &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&m) : nullptr;
    if (c && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
      std::memcpy(&got[p].fd, CMSG_DATA(c), sizeof(int));
    if (n != static_cast<ssize_t>(sizeof payload) || got[p].fd < 0)
      return fail(n == 0 ? fmt::format("rank {} has gone", p) : fmt::format("rank {} sent no descriptor", p));
    got[p].value = payload;
  }
  return got;
}

Status FdExchange::error(const std::string &what) const {
  return Status::error(fmt::format("fd exchange, rank {} of {}: {}", rank_, world_, what));
}

Status FdExchange::barrier(std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  const char mark = 'b';
  for (int p = 0; p < world_; ++p)
    if (p != rank_ && !sendAll(socks_[p], &mark, 1))
      return error(fmt::format("barrier: rank {} has gone", p));
  for (int p = 0; p < world_; ++p) {
    char got = 0;
    if (p != rank_ && (!recvAll(socks_[p], &got, 1, deadline) || got != mark))
      return error(fmt::format("barrier: rank {} did not come within {} ms", p, timeout.count()));
  }
  return Status();
}

std::vector<int> FdExchange::departed() {
  std::vector<int> gone;
  for (int p = 0; p < world_; ++p) {
    if (p == rank_)
      continue;
    pollfd q{socks_[p], POLLRDHUP, 0};
    if (::poll(&q, 1, 0) > 0 && (q.revents & (POLLRDHUP | POLLHUP | POLLERR)))
      gone.push_back(p);
  }
  return gone;
}

} // namespace m3idx::comm
