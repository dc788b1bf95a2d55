#include "tools/OutputFiles.h"

#include <cstring>
#include <filesystem>

#include "core/AtomicFile.h"
#include "casefile/Npy.h"
#include "core/Spec.h"

namespace m3idx::cli {

Status writeOutput(const std::string &dir, const IndexerOutput &out, bool withScores) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return invalidArgument("--out", "a folder that can be created", ec.message());
  std::vector<PendingFile> files;
  npy::Array topk = npy::makeArray(npy::DType::I32, {out.numHeads, out.numRows, spec::kTopkBlocks});
  std::memcpy(topk.bytes.data(), out.topk.data(), topk.bytes.size());
  files.push_back({(std::filesystem::path(dir) / "topk.npy").string(), npy::encode(topk)});
  if (withScores) {
    npy::Array score = npy::makeArray(npy::DType::F32, {out.numHeads, out.numRows, out.scoreWidth});
    std::memcpy(score.bytes.data(), out.scores.data(), score.bytes.size());
    files.push_back({(std::filesystem::path(dir) / "score.npy").string(), npy::encode(score)});
  }
  return writeFilesAtomically(files);
}

} // namespace m3idx::cli
