#include "runtime/cuda/CudaBackend.h"

#include <fstream>

#include "runtime/cuda/CudaDriver.h"

namespace m3idx::cuda {

std::string ptxFileName(kernels::KernelKind kind, const kernels::KernelConfig &config) {
  return fmt::format("{}.{}.ptx", kernels::kernelName(kind), config.str());
}

runtime::CodeSource ptxFromDirectory(const std::string &dir) {
  return [dir](kernels::KernelKind kind, const kernels::KernelConfig &config) -> StatusOr<std::string> {
    // A cubin made by ptxas next to the PTX is preferred: the driver loads it without a JIT.
    std::string path = dir + "/" + ptxFileName(kind, config);
    std::ifstream cubin(path.substr(0, path.size() - 4) + ".cubin", std::ios::binary);
    std::ifstream ptx(path);
    std::ifstream &in = cubin ? cubin : ptx;
    if (!in)
      return invalidArgument(path, "a PTX file", "a missing file");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
}

StatusOr<std::unique_ptr<runtime::GpuBackend>> createCudaBackend(int device, runtime::CodeSource ptx) {
  auto api = loadDriver();
  if (!api.ok())
    return api.status();
  return runtime::GpuBackend::create(*api, "cuda", device, 32, std::move(ptx),
                                     kernels::prefillFormFor("sm_90"));
}

} // namespace m3idx::cuda
