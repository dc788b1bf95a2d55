// Descriptors passed between a group's ranks over abstract Unix sockets (runtime/comm/FdExchange.h):
// each rank here is a thread with its own FdExchange (the sockets do not know the difference from
// processes), each sending a memfd that holds its rank and a number; a rank that closes its exchange is seen
// as departed; missing ranks, clashing groups and bad arguments are errors naming them.
#include "runtime/comm/FdExchange.h"
#include "tests/runtime/comm/RankGroup.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

using namespace m3idx;
using namespace m3idx::comm;
using namespace m3idx::rank_tests;
using namespace std::chrono_literals;

namespace {

int memfdHolding(const std::string &text) {
  int fd = ::memfd_create("m3idx-test", MFD_CLOEXEC);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  return fd;
}

std::string contentOf(int fd) {
  char buf[64] = {};
  ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

} // namespace

TEST(FdExchange, FourRanksGetEachOthersDescriptorsTwice) {
  constexpr int kWorld = 4;
  std::vector<std::vector<std::string>> seen(kWorld);
  std::vector<std::string> errors = onRanks(kWorld, [&](int r, FdExchange &x) -> std::string {
    for (int round = 0; round < 2; ++round) {
      int own = memfdHolding(fmt::format("rank {} round {}", r, round));
      auto got = x.allGather(own, 100 * r + round, 10s);
      ::close(own);
      if (!got.ok())
        return got.status().message();
      for (int p = 0; p < kWorld; ++p) {
        const FdExchange::Sent &g = (*got)[p];
        seen[r].push_back(fmt::format("{} {}", p == r ? std::to_string(g.fd) : contentOf(g.fd), g.value));
        if (g.fd >= 0)
          ::close(g.fd);
      }
    }
    return "";
  });
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    ASSERT_EQ(seen[r].size(), 2u * kWorld);
    for (int round = 0; round < 2; ++round)
      for (int p = 0; p < kWorld; ++p)
        EXPECT_EQ(seen[r][round * kWorld + p],
                  fmt::format("{} {}", p == r ? "-1" : fmt::format("rank {} round {}", p, round), 100 * p + round))
            << "rank " << r << " from " << p;
  }
}

TEST(FdExchange, APeerThatClosesIsDepartedAndFailsTheNextGather) {
  const std::string group = uniqueGroup();
  StatusOr<std::unique_ptr<FdExchange>> other = Status::error("not run");
  std::thread peer([&] { other = FdExchange::connect(group, 1, 2, 10s); });
  auto me = FdExchange::connect(group, 0, 2, 10s);
  peer.join();
  ASSERT_TRUE(me.ok()) << me.status().message();
  ASSERT_TRUE(other.ok()) << other.status().message();
  EXPECT_TRUE((*me)->departed().empty());
  other = Status::error("closed"); // rank 1's exchange closes, as its process's end would
  EXPECT_EQ((*me)->departed(), std::vector<int>{1});
  int own = memfdHolding("x");
  auto got = (*me)->allGather(own, 0, 2s);
  ::close(own);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("rank 1"), std::string::npos) << got.status().message();
}

TEST(FdExchange, MissingRanksAreNamedAfterTheTimeout) {
  auto x = FdExchange::connect(uniqueGroup(), 0, 3, 100ms);
  ASSERT_FALSE(x.ok());
  EXPECT_NE(x.status().message().find("no connection from rank(s) 1, 2 within 100 ms"), std::string::npos)
      << x.status().message();
  auto late = FdExchange::connect(uniqueGroup(), 2, 3, 100ms);
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.status().message().find("rank 0 did not listen within 100 ms"), std::string::npos)
      << late.status().message();
}

TEST(FdExchange, AGroupNameInUseIsRefused) {
  // Another process's rank 0 of this group, as far as the name goes: a socket bound to it.
  const std::string group = uniqueGroup(), name = fdExchangeSocketName(group, 0);
  int holder = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(holder, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, name.data(), name.size()); // sun_path[0] = 0: the abstract namespace
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr *>(&a),
                   static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())),
            0);
  auto second = FdExchange::connect(group, 0, 2, 100ms);
  ::close(holder);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("group names must be unique"), std::string::npos)
      << second.status().message();
}

TEST(FdExchange, BadArgumentsAreNamed) {
  auto msg = [](const std::string &group, int rank, int world, std::chrono::milliseconds t) {
    auto x = FdExchange::connect(group, rank, world, t);
    return x.ok() ? std::string("ok") : x.status().message();
  };
  EXPECT_NE(msg("g", 0, 1, 1s).find("fd exchange world"), std::string::npos);
  EXPECT_NE(msg("g", 0, 65, 1s).find("fd exchange world"), std::string::npos);
  EXPECT_NE(msg("g", 4, 4, 1s).find("fd exchange rank"), std::string::npos);
  EXPECT_NE(msg("g", -1, 4, 1s).find("fd exchange rank"), std::string::npos);
  EXPECT_NE(msg("a/b", 0, 2, 1s).find("fd exchange group"), std::string::npos);
  EXPECT_NE(msg("", 0, 2, 1s).find("fd exchange group"), std::string::npos);
  EXPECT_NE(msg(std::string(65, 'a'), 0, 2, 1s).find("fd exchange group"), std::string::npos);
  EXPECT_NE(msg("g", 0, 2, 0ms).find("fd exchange timeout"), std::string::npos);
  EXPECT_EQ(fdExchangeSocketName("grp", 3), "m3idx-grp-3");
}
