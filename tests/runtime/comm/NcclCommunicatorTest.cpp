// The NCCL/RCCL loader's error paths (no GPU here): a missing library and a missing symbol each
// give a message naming the library and what was missing. Running collectives needs GPUs (the
// multi-GPU issue); nothing here pretends otherwise.
#include <cstdlib>

#include <gtest/gtest.h>

#include "m3idx/NcclCommunicator.h"

using namespace m3idx;

TEST(NcclCommunicator, LibraryNamesAndOverride) {
  ::setenv("M3IDX_RCCL_LIBRARY", "/opt/custom/librccl.so", 1);
  std::vector<std::string> names = collectiveLibraryNames(CollectiveLibrary::Rccl);
  ::unsetenv("M3IDX_RCCL_LIBRARY");
  EXPECT_EQ(names, std::vector<std::string>{"/opt/custom/librccl.so"});
  EXPECT_EQ(collectiveLibraryNames(CollectiveLibrary::Rccl),
            (std::vector<std::string>{"librccl.so.1", "librccl.so"}));
  EXPECT_EQ(collectiveLibraryNames(CollectiveLibrary::Nccl),
            (std::vector<std::string>{"libnccl.so.2", "libnccl.so"}));
}

TEST(NcclCommunicator, MissingSymbolIsNamed) {
  // RCCL's slot is used for the fake so the real NCCL (if any) is not shadowed.
  ::setenv("M3IDX_RCCL_LIBRARY", M3IDX_FAKE_NCCL, 1);
  auto comm = makeCollectiveCommunicator(CollectiveLibrary::Rccl, CollectiveUniqueId{}, 0, 4);
  ::unsetenv("M3IDX_RCCL_LIBRARY");
  ASSERT_FALSE(comm.ok());
  EXPECT_NE(comm.status().message().find("missing symbol ncclCommDestroy"), std::string::npos)
      << comm.status().message();
  EXPECT_NE(comm.status().message().find("fake_nccl"), std::string::npos);
}

TEST(NcclCommunicator, MissingLibraryIsNamed) {
  ::setenv("M3IDX_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  auto id = collectiveUniqueId(CollectiveLibrary::Nccl);
  ::unsetenv("M3IDX_NCCL_LIBRARY");
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("nccl: library not found (tried /nonexistent/libnccl.so.2)"),
            std::string::npos)
      << id.status().message();
}

TEST(NcclCommunicator, RankOutOfRange) {
  auto comm = makeCollectiveCommunicator(CollectiveLibrary::Nccl, CollectiveUniqueId{}, 4, 4);
  ASSERT_FALSE(comm.ok());
  EXPECT_NE(comm.status().message().find("rank: expected in [0, world = 4), got 4"),
            std::string::npos);
}
