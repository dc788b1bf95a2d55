// The Indexer API on a CUDA device: q, kv and top-k in device buffers, metadata on the host,
// forward() queued on the stream. Equal to the reference on every GPU family, block tables on the
// host only and also on the device, into its own and a caller's buffer, with no kernel load or scratch growth after the first step. Skipped with the
// reason where no driver can be loaded (the test bundle of scripts/package runs it on the H200).
#include <gtest/gtest.h>

#include "m3idx/Indexer.h"
#include "reference/ReferenceIndexer.h"
#include "bench/support/DeviceCase.h"
#include "runtime/cuda/CudaDriver.h"
#include "tests/runtime/GpuFamilies.h"

using namespace m3idx;

TEST(CudaIndexer, ForwardOnDeviceBuffersEqualsTheReference) {
  auto api = cuda::loadDriver();
  if (!api.ok())
    GTEST_SKIP() << "no usable CUDA driver here (" << api.status().message()
                 << "); the test bundle of scripts/package --tests runs it on a GPU machine";
  const Device device{DeviceKind::Cuda, 0};
  for (const GenOptions &o : m3idx::testing::gpuFamilies()) {
    StatusOr<Case> c = generateCase(o);
    ASSERT_TRUE(c.ok());
    const BatchView v = c->view();
    IndexerConfig config;
    config.numIndexHeads = v.params.numHeads;
    config.initBlocks = v.params.initBlocks;
    config.localBlocks = v.params.localBlocks;
    config.decodeQueryLens = {v.params.decodeQueryLen};
    const std::vector<int32_t> want = reference::runReference(v, false)->topk;
    for (bool deviceTables : {false, true}) {
      auto indexer = Indexer::create(config, device);
      ASSERT_TRUE(indexer.ok()) << indexer.status().message();
      ASSERT_TRUE((*indexer)->warmup().ok());
      auto onDevice = bench::DeviceCase::upload(**api, device, v, deviceTables);
      ASSERT_TRUE(onDevice.ok()) << onDevice.status().message();
      int64_t allocations = -1;
      for (bool callerTopk : {false, true, false}) {
        auto r = (*onDevice)->forward(**indexer, nullptr, callerTopk);
        ASSERT_TRUE(r.ok()) << r.status().message();
        EXPECT_EQ(r->topk.device.kind, DeviceKind::Cuda);
        auto got = (*onDevice)->download(*r);
        ASSERT_TRUE(got.ok()) << got.status().message();
        EXPECT_EQ(*got, want) << "seed " << o.seed << (callerTopk ? ", caller's buffer" : "");
        EXPECT_EQ((*indexer)->compilesAfterWarmup(), 0);
        if (allocations >= 0) {
          EXPECT_EQ((*indexer)->scratchAllocations(), allocations);
        }
        allocations = (*indexer)->scratchAllocations();
      }
    }
  }
}
