// m3idx-demo: the Indexer API end to end, as an engine would drive it. A small model's index-K
// cache is built with the NVFP4 writer: each request's keys are noise except a few "relevant"
// blocks that share a topic with the request's queries. Mixed decode + prefill steps run through
// Indexer::forward; the demo prints the blocks selected and whether the relevant ones were found.
#include <chrono>
#include <cmath>
#include <iostream>
#include <random>
#include <set>

#include <fmt/format.h>

#include "core/Nvfp4.h"
#include "core/Nvfp4Writer.h"
#include "core/Spec.h"
#include "m3idx/Indexer.h"

using namespace m3idx;

namespace {

constexpr int kHeads = 2;

struct Request {
  int seqLen;
  int queryRows;            // decode: 4; prefill: its q_len
  std::vector<float> topic; // 128-d
  std::set<int> relevant;   // logical blocks that carry the topic
  std::vector<int32_t> pages;
};

struct Model {
  std::mt19937 rng{2026};
  std::normal_distribution<float> normal{0.0f, 1.0f};
  std::vector<uint8_t> kv; // [pages, 9216]
  int numPages = 0;

  int newPage() {
    kv.resize(static_cast<size_t>(numPages + 1) * spec::kPageBytes);
    return numPages++;
  }
  // Writes token t's key: noise, plus 3x the topic in relevant blocks.
  void writeKey(Request &r, int t) {
    const int block = t / spec::kSparseBlockSize;
    while (static_cast<int>(r.pages.size()) <= block)
      r.pages.push_back(newPage());
    std::vector<float> key(spec::kIndexHeadDim);
    const float topicWeight = r.relevant.count(block) ? 3.0f : 0.0f;
    for (int d = 0; d < spec::kIndexHeadDim; ++d)
      key[d] = normal(rng) + topicWeight * r.topic[d];
    Status s = nvfp4::quantizeToken(
        key, std::span<uint8_t>(&kv[static_cast<size_t>(r.pages[block]) * spec::kPageBytes],
                                spec::kPageBytes),
        t % spec::kSparseBlockSize);
    if (!s.ok())
      throw std::runtime_error(s.message());
  }
  std::vector<float> randomTopic() {
    std::vector<float> t(spec::kIndexHeadDim);
    for (float &x : t)
      x = normal(rng);
    return t;
  }
};

} // namespace

int main() {
  Model model;
  std::vector<Request> requests(3);
  requests[0] = {20000, 4, model.randomTopic(), {3, 77, 101}, {}};
  requests[1] = {9000, 4, model.randomTopic(), {0, 30, 31, 52}, {}};
  requests[2] = {4096, 48, model.randomTopic(), {5, 6, 20}, {}}; // a prefill chunk of 48 rows
  for (Request &r : requests)
    for (int t = 0; t < r.seqLen; ++t)
      model.writeKey(r, t);

  IndexerConfig config;
  config.numIndexHeads = kHeads;
  config.initBlocks = 1;
  config.localBlocks = 1;
  auto indexer = Indexer::create(config, Device{});
  if (!indexer.ok()) {
    std::cerr << "m3idx-demo: " << indexer.status().message() << "\n";
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  if (Status s = (*indexer)->warmup(); !s.ok()) {
    std::cerr << "m3idx-demo: " << s.message() << "\n";
    return 1;
  }
  std::cout << fmt::format("warm-up (JIT of every kernel for heads={}): {:.0f} ms\n", kHeads,
                           std::chrono::duration<double, std::milli>(
                               std::chrono::steady_clock::now() - t0)
                               .count());

  int found = 0, planted = 0;
  for (int step = 0; step < 3; ++step) {
    // Metadata as an engine's builder makes it: decodes first, then the prefill.
    const int maxBlocks = 200;
    std::vector<int32_t> decodeTable(2 * maxBlocks, -1), prefillTable(maxBlocks, -1);
    for (int i = 0; i < 2; ++i)
      std::copy(requests[i].pages.begin(), requests[i].pages.end(), &decodeTable[i * maxBlocks]);
    std::copy(requests[2].pages.begin(), requests[2].pages.end(), prefillTable.begin());
    std::vector<int32_t> decodeLens = {requests[0].seqLen, requests[1].seqLen};
    std::vector<int32_t> prefillLens = {requests[2].seqLen}, prefillQsl = {0, requests[2].queryRows};
    const int T = 8 + requests[2].queryRows;
    std::vector<uint8_t> q(static_cast<size_t>(T) * kHeads * spec::kIndexHeadDim);
    int row = 0;
    for (Request &r : requests)
      for (int i = 0; i < r.queryRows; ++i, ++row)
        for (int h = 0; h < kHeads; ++h)
          for (int d = 0; d < spec::kIndexHeadDim; ++d)
            q[(row * kHeads + h) * spec::kIndexHeadDim + d] = nvfp4::e4m3RnSatfinite(
                0.5f * r.topic[d] * (h == 0 ? 1.0f : 0.7f) + 0.5f * model.normal(model.rng));

    DecodeMetadata decode{TensorView::contiguous(decodeTable.data(), DType::I32, {2, maxBlocks}),
                          TensorView::contiguous(decodeLens.data(), DType::I32, {2}), 4,
                          std::max(decodeLens[0], decodeLens[1])};
    PrefillMetadata prefill{TensorView::contiguous(prefillTable.data(), DType::I32, {1, maxBlocks}),
                            TensorView::contiguous(prefillQsl.data(), DType::I32, {2}),
                            TensorView::contiguous(prefillLens.data(), DType::I32, {1}),
                            requests[2].queryRows, requests[2].seqLen};
    auto s0 = std::chrono::steady_clock::now();
    auto result = (*indexer)->forward(
        TensorView::contiguous(q.data(), DType::U8, {T, kHeads, spec::kIndexHeadDim}),
        TensorView::contiguous(model.kv.data(), DType::U8, {model.numPages, spec::kPageBytes}),
        IndexerMetadata{&decode, &prefill});
    if (!result.ok()) {
      std::cerr << "m3idx-demo: " << result.status().message() << "\n";
      return 1;
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count();
    std::cout << fmt::format("\nstep {}: {} rows ({} decode, {} prefill), {:.1f} ms\n", step, T, 8,
                             T - 8, ms);
    const int32_t *topk = static_cast<const int32_t *>(result->topk.data);
    row = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      const Request &r = requests[i];
      const int last = row + r.queryRows - 1; // the request's newest row sees the most
      std::set<int> selected(topk + last * 16, topk + last * 16 + 16);
      int hit = 0;
      for (int b : r.relevant)
        hit += selected.count(b);
      found += hit;
      planted += static_cast<int>(r.relevant.size());
      std::cout << fmt::format("  request {} ({}, {} tokens): head 0 selects [{}]; relevant {{{}}} "
                               "found {}/{}\n",
                               i, i < 2 ? "decode" : "prefill", r.seqLen,
                               fmt::join(topk + last * 16, topk + last * 16 + 16, " "),
                               fmt::join(r.relevant, ", "), hit, r.relevant.size());
      row += r.queryRows;
    }
    // The next step: each decode request gains its next token (one more key, maybe a new page).
    for (int i = 0; i < 2; ++i)
      model.writeKey(requests[i], requests[i].seqLen++);
  }
  std::cout << fmt::format("\nrelevant blocks found: {}/{}; JIT compiles after warm-up: {}\n",
                           found, planted, (*indexer)->compilesAfterWarmup());
  return found == planted && (*indexer)->compilesAfterWarmup() == 0 ? 0 : 1;
}
