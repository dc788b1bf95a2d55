#include "casefile/CaseFile.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/AtomicFile.h"
#include "core/Spec.h"

namespace m3idx {

namespace fs = std::filesystem;

namespace {

StatusOr<IndexerParams> parseCaseJson(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return invalidArgument(path, "a readable case.json", "a missing or unreadable file");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return invalidArgument(path, "valid JSON", "a parse error");
  if (!j.is_object())
    return invalidArgument(path, "a JSON object", j.type_name());
  if (!j.contains("format") || !j["format"].is_string())
    return invalidArgument(path + ": format", fmt::format("\"{}\"", kCaseFormat), "no format string");
  if (j["format"] != kCaseFormat)
    return invalidArgument(path + ": format", fmt::format("\"{}\"", kCaseFormat),
                           j["format"].dump());
  IndexerParams p;
  struct Field {
    const char *name;
    int *dest;
  };
  for (Field f : {Field{"num_index_heads", &p.numHeads}, Field{"init_blocks", &p.initBlocks},
                  Field{"local_blocks", &p.localBlocks}, Field{"num_decodes", &p.numDecodes},
                  Field{"decode_query_len", &p.decodeQueryLen}}) {
    if (!j.contains(f.name))
      return invalidArgument(fmt::format("{}: {}", path, f.name), "an integer", "nothing");
    const nlohmann::json &v = j[f.name];
    if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)
      return invalidArgument(fmt::format("{}: {}", path, f.name), "a 32-bit integer", v.dump());
    *f.dest = v.get<int>();
  }
  M3IDX_RETURN_IF_ERROR(validateParams(p));
  return p;
}

Status expectArray(const npy::Array &a, const std::string &name, npy::DType dtype, size_t ndim) {
  if (a.dtype != dtype)
    return invalidArgument(name, fmt::format("dtype {}", npy::dtypeName(dtype)),
                           npy::dtypeName(a.dtype));
  if (a.shape.size() != ndim)
    return invalidArgument(name, fmt::format("{} dimensions", ndim),
                           fmt::format("shape {}", npy::shapeString(a.shape)));
  return Status();
}

} // namespace

BatchView Case::view() const {
  BatchView v;
  v.params = params;
  v.q = q.as<uint8_t>();
  v.numRows = q.shape.empty() ? 0 : q.shape[0];
  v.kv = kv.as<uint8_t>();
  v.numPages = kv.shape.empty() ? 0 : kv.shape[0];
  v.blockTable = blockTable.as<int32_t>();
  v.numRequests = blockTable.shape.empty() ? 0 : blockTable.shape[0];
  v.maxBlocks = blockTable.shape.size() < 2 ? 0 : blockTable.shape[1];
  v.seqLens = seqLens.as<int32_t>();
  v.queryStartLoc = queryStartLoc.as<int32_t>();
  return v;
}

Status validateCaseShapes(const Case &c) {
  using npy::DType;
  M3IDX_RETURN_IF_ERROR(expectArray(c.q, "q.npy", DType::U8, 3));
  if (c.q.shape[1] != c.params.numHeads || c.q.shape[2] != spec::kIndexHeadDim)
    return invalidArgument("q.npy", fmt::format("shape [T, {}, {}]", c.params.numHeads,
                                                spec::kIndexHeadDim),
                           npy::shapeString(c.q.shape));
  M3IDX_RETURN_IF_ERROR(expectArray(c.kv, "kv.npy", DType::U8, 2));
  if (c.kv.shape[1] != spec::kPageBytes)
    return invalidArgument("kv.npy", fmt::format("shape [num_pages, {}]", spec::kPageBytes),
                           npy::shapeString(c.kv.shape));
  M3IDX_RETURN_IF_ERROR(expectArray(c.blockTable, "block_table.npy", DType::I32, 2));
  const int64_t R = c.blockTable.shape[0];
  M3IDX_RETURN_IF_ERROR(expectArray(c.seqLens, "seq_lens.npy", DType::I32, 1));
  if (c.seqLens.shape[0] != R)
    return invalidArgument("seq_lens.npy", fmt::format("shape [{}] (one per block_table row)", R),
                           npy::shapeString(c.seqLens.shape));
  M3IDX_RETURN_IF_ERROR(expectArray(c.queryStartLoc, "query_start_loc.npy", DType::I32, 1));
  if (c.queryStartLoc.shape[0] != R + 1)
    return invalidArgument("query_start_loc.npy", fmt::format("shape [{}] (R + 1)", R + 1),
                           npy::shapeString(c.queryStartLoc.shape));
  return Status();
}

StatusOr<Case> loadCase(const std::string &dir) {
  if (!fs::is_directory(dir))
    return invalidArgument("CASE", "a case folder", fmt::format("'{}' is not a folder", dir));
  Case c;
  StatusOr<IndexerParams> params = parseCaseJson((fs::path(dir) / "case.json").string());
  if (!params.ok())
    return params.status();
  c.params = *params;
  struct Entry {
    const char *file;
    npy::Array *dest;
  };
  for (Entry e : {Entry{"q.npy", &c.q}, Entry{"kv.npy", &c.kv},
                  Entry{"block_table.npy", &c.blockTable}, Entry{"seq_lens.npy", &c.seqLens},
                  Entry{"query_start_loc.npy", &c.queryStartLoc}}) {
    StatusOr<npy::Array> a = npy::read((fs::path(dir) / e.file).string());
    if (!a.ok())
      return a.status();
    *e.dest = std::move(a).value();
  }
  M3IDX_RETURN_IF_ERROR(validateCaseShapes(c));
  M3IDX_RETURN_IF_ERROR(validateBatch(c.view()));
  return c;
}

std::string caseJson(const IndexerParams &p) {
  nlohmann::ordered_json j;
  j["format"] = kCaseFormat;
  j["num_index_heads"] = p.numHeads;
  j["init_blocks"] = p.initBlocks;
  j["local_blocks"] = p.localBlocks;
  j["num_decodes"] = p.numDecodes;
  j["decode_query_len"] = p.decodeQueryLen;
  return j.dump() + "\n";
}

Status saveCase(const std::string &dir, const Case &c) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return invalidArgument("--out", "a folder that can be created", ec.message());
  auto path = [&](const char *name) { return (fs::path(dir) / name).string(); };
  return writeFilesAtomically({{path("case.json"), caseJson(c.params)},
                               {path("q.npy"), npy::encode(c.q)},
                               {path("kv.npy"), npy::encode(c.kv)},
                               {path("block_table.npy"), npy::encode(c.blockTable)},
                               {path("seq_lens.npy"), npy::encode(c.seqLens)},
                               {path("query_start_loc.npy"), npy::encode(c.queryStartLoc)}});
}

} // namespace m3idx
