#include "runtime/KernelArgs.h"

#include "lowering/host/HostCompiler.h"

namespace m3idx::runtime {

void KernelArgs::call(const lowering::HostKernel &kernel, int64_t begin, int64_t end) const {
  std::vector<MemRef1D> descs = buffers_; // per call: the kernel may not share them across threads
  std::vector<MemRef1D *> descPtrs;
  for (MemRef1D &d : descs)
    descPtrs.push_back(&d);
  std::vector<int64_t> scalars = scalars_;
  std::vector<void *> args;
  for (MemRef1D *&p : descPtrs)
    args.push_back(&p);
  for (int64_t &s : scalars)
    args.push_back(&s);
  args.push_back(&begin);
  args.push_back(&end);
  kernel.call(args.data());
}

} // namespace m3idx::runtime
