#include "lowering/nvvm/PtxAssembler.h"

#include <fstream>
#include <iterator>

#include "core/EnvTable.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"

namespace m3idx::lowering {

StatusOr<std::optional<std::string>> findPtxas() {
  const std::string configured = env::get("M3IDX_PTXAS");
  if (configured == "none")
    return std::optional<std::string>();
  if (!configured.empty()) {
    if (!llvm::sys::fs::can_execute(configured))
      return invalidArgument("M3IDX_PTXAS", "an executable ptxas (or 'none')", "'" + configured + "'");
    return std::optional<std::string>(configured);
  }
  if (auto onPath = llvm::sys::findProgramByName("ptxas"))
    return std::optional<std::string>(*onPath);
  if (llvm::sys::fs::can_execute("/usr/local/cuda/bin/ptxas"))
    return std::optional<std::string>("/usr/local/cuda/bin/ptxas");
  return std::optional<std::string>();
}

StatusOr<std::string> assemblePtx(const std::string &ptxas, const std::string &ptx,
                                  const std::string &arch) {
  llvm::SmallString<128> in, out, err;
  if (llvm::sys::fs::createTemporaryFile("m3idx", "ptx", in) ||
      llvm::sys::fs::createTemporaryFile("m3idx", "cubin", out) ||
      llvm::sys::fs::createTemporaryFile("m3idx", "log", err))
    return Status::error("ptxas: cannot create temporary files");
  auto cleanup = [&] {
    llvm::sys::fs::remove(in);
    llvm::sys::fs::remove(out);
    llvm::sys::fs::remove(err);
  };
  {
    std::ofstream f(in.str().str(), std::ios::binary);
    f << ptx;
  }
  const std::string archFlag = "-arch=" + arch;
  llvm::SmallVector<llvm::StringRef> args = {ptxas, archFlag, "-O3", in, "-o", out};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(err), llvm::StringRef(err)};
  std::string message;
  const int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects, 0, 0, &message);
  std::ifstream result(out.str().str(), std::ios::binary);
  std::string cubin((std::istreambuf_iterator<char>(result)), std::istreambuf_iterator<char>());
  std::ifstream log(err.str().str());
  std::string logText((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  cleanup();
  if (rc != 0 || cubin.size() < 4 || cubin.compare(0, 4, "\x7f" "ELF") != 0)
    return Status::error(fmt::format("ptxas ({}) failed on the {} PTX (exit {}): {}{}", ptxas, arch,
                                     rc, message, logText));
  return cubin;
}

} // namespace m3idx::lowering
