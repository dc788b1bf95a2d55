/* The C ABI from plain C: version, config rejection, a hand-worked decode step, error objects. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "m3idx/m3idx.h"

static int failures = 0;
#define EXPECT(cond)                                                                               \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                          \
      ++failures;                                                                                  \
    }                                                                                              \
  } while (0)

static m3idx_tensor tensor(void *data, int32_t dtype, int32_t ndim, const int64_t *shape) {
  m3idx_tensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.dtype = dtype;
  t.ndim = ndim;
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    t.shape[d] = shape[d];
    t.strides[d] = stride;
    stride *= shape[d];
  }
  return t;
}

/* One rank of a decode CP group, created on its own thread (the call is collective). */
static char cp_group[64]; /* unique on the host: this process's id in it */
struct cp_rank {
  int rank;
  m3idx_decode_cp *cp;
  m3idx_error *error;
};
static void *create_cp(void *arg) {
  struct cp_rank *r = (struct cp_rank *)arg;
  r->error = m3idx_decode_cp_create(cp_group, r->rank, 2, 4096, M3IDX_DEVICE_CUDA, 0, 10000, &r->cp);
  return NULL;
}

int main(int argc, char **argv) {
  EXPECT(m3idx_api_version() == M3IDX_API_VERSION);

  m3idx_config config;
  m3idx_config_init(&config);
  char reason[256];
  EXPECT(m3idx_unsupported_reason(&config, M3IDX_DEVICE_HOST, reason, sizeof reason) == 0);
  config.topk_blocks = 8;
  EXPECT(m3idx_unsupported_reason(&config, M3IDX_DEVICE_HOST, reason, sizeof reason) > 0);
  EXPECT(strstr(reason, "topk_blocks must be 16, got 8") != NULL);
  m3idx_indexer *indexer = NULL;
  m3idx_error *error = m3idx_indexer_create(&config, M3IDX_DEVICE_HOST, 0, &indexer);
  EXPECT(error != NULL && indexer == NULL);
  EXPECT(error && strstr(m3idx_error_message(error), "topk_blocks") != NULL);
  m3idx_error_free(error);

  /* One decode request, 4 rows, 640 tokens (5 blocks), local_blocks 1. Key token 128*b has
   * element 0 = value[b] (nibble, scale 1.0); every query row has element 0 = 1.0. */
  m3idx_config_init(&config);
  error = m3idx_indexer_create(&config, M3IDX_DEVICE_HOST, 0, &indexer);
  EXPECT(error == NULL && indexer != NULL);
  if (!indexer)
    return 1;
  EXPECT(m3idx_indexer_warmup(indexer) == NULL);

  enum { PAGES = 5, PAGE = 9216 };
  unsigned char *kv = calloc(PAGES, PAGE);
  for (int p = 0; p < PAGES; ++p)
    memset(kv + p * PAGE + 8192, 0x38, 1024); /* every scale 1.0, every nibble 0 */
  const unsigned char nibble[4] = {1 /*0.5*/, 7 /*6*/, 3 /*1.5*/, 2 /*1*/};
  for (int b = 0; b < 4; ++b)
    kv[b * PAGE] = nibble[b]; /* token 0 of page b, element 0 */
  unsigned char q[4 * 128];
  memset(q, 0, sizeof q);
  for (int r = 0; r < 4; ++r)
    q[r * 128] = 0x38;
  int32_t block_table[5] = {0, 1, 2, 3, 4}, seq_lens[1] = {640};

  const int64_t q_shape[3] = {4, 1, 128}, kv_shape[2] = {PAGES, PAGE}, bt_shape[2] = {1, 5},
                sl_shape[1] = {1};
  m3idx_tensor tq = tensor(q, M3IDX_DTYPE_U8, 3, q_shape);
  m3idx_tensor tkv = tensor(kv, M3IDX_DTYPE_U8, 2, kv_shape);
  m3idx_decode_metadata decode;
  memset(&decode, 0, sizeof decode); /* no device_block_table */
  decode.block_table = tensor(block_table, M3IDX_DTYPE_I32, 2, bt_shape);
  decode.seq_lens = tensor(seq_lens, M3IDX_DTYPE_I32, 1, sl_shape);
  decode.decode_query_len = 4;
  decode.max_seq_len = 640;
  m3idx_tensor topk, decode_topk, prefill_topk;
  error = m3idx_indexer_forward(indexer, &tq, &tkv, &decode, NULL, NULL, NULL, &topk, &decode_topk,
                                &prefill_topk);
  EXPECT(error == NULL);
  if (error) {
    fprintf(stderr, "forward: %s\n", m3idx_error_message(error));
    m3idx_error_free(error);
  } else {
    const int32_t want[16] = {4, 1, 2, 3, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
    const int32_t *got = (const int32_t *)topk.data;
    EXPECT(topk.ndim == 3 && topk.shape[0] == 1 && topk.shape[1] == 4 && topk.shape[2] == 16);
    for (int r = 0; r < 4; ++r)
      EXPECT(memcmp(got + r * 16, want, sizeof want) == 0);
    EXPECT(decode_topk.shape[1] == 4 && prefill_topk.shape[1] == 0);
  }
  EXPECT(m3idx_indexer_compiles_after_warmup(indexer) == 0);

  /* The same step planned once and run twice, into a caller buffer, after the metadata arrays
   * were reused (the plan holds copies); a run with too few kv pages names the page. */
  m3idx_plan *plan = NULL;
  error = m3idx_indexer_plan(indexer, &decode, NULL, NULL, &plan);
  EXPECT(error == NULL && plan != NULL && m3idx_plan_rows(plan) == 4 && m3idx_plan_rows(NULL) == -1);
  if (plan) {
    block_table[1] = 77;
    seq_lens[0] = 1;
    int32_t out[4 * 16];
    const int64_t out_shape[3] = {1, 4, 16};
    m3idx_tensor tout = tensor(out, M3IDX_DTYPE_I32, 3, out_shape);
    const int32_t want[16] = {4, 1, 2, 3, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
    for (int layer = 0; layer < 2; ++layer) {
      memset(out, 0, sizeof out);
      error = m3idx_indexer_run(indexer, plan, &tq, &tkv, NULL, &tout, &topk, NULL, NULL);
      EXPECT(error == NULL && topk.data == out);
      for (int r = 0; r < 4; ++r)
        EXPECT(memcmp(out + r * 16, want, sizeof want) == 0);
    }
    block_table[1] = 1;
    seq_lens[0] = 640;
    const int64_t few_pages[2] = {2, PAGE};
    m3idx_tensor small_kv = tensor(kv, M3IDX_DTYPE_U8, 2, few_pages);
    error = m3idx_indexer_run(indexer, plan, &tq, &small_kv, NULL, NULL, &topk, NULL, NULL);
    EXPECT(error != NULL && strstr(m3idx_error_message(error), "decode.block_table[0][2]") != NULL);
    m3idx_error_free(error);
    error = m3idx_indexer_run(indexer, NULL, &tq, &tkv, NULL, NULL, &topk, NULL, NULL);
    EXPECT(error != NULL && strstr(m3idx_error_message(error), "plan: expected a plan") != NULL);
    m3idx_error_free(error);
    m3idx_plan_destroy(plan);
  }

  /* Decode CP across processes: a group of two ranks (threads here) on the stand-in CUDA driver
   * (argv[1]); a host indexer cannot join it, named; NULLs and a host device are errors. */
  EXPECT(m3idx_indexer_decode_cp_active(indexer) == 0 && m3idx_indexer_decode_cp_active(NULL) == -1);
  EXPECT(argc == 2);
  if (argc == 2) {
    setenv("M3IDX_CUDA_LIBRARY", argv[1], 1);
    snprintf(cp_group, sizeof cp_group, "capi-group-%d", (int)getpid());
    pthread_t peer;
    struct cp_rank ranks[2] = {{1, NULL, NULL}, {0, NULL, NULL}};
    EXPECT(pthread_create(&peer, NULL, create_cp, &ranks[0]) == 0);
    create_cp(&ranks[1]);
    pthread_join(peer, NULL);
    for (int r = 0; r < 2; ++r) {
      EXPECT(ranks[r].error == NULL && ranks[r].cp != NULL);
      if (ranks[r].error) {
        fprintf(stderr, "decode CP rank %d: %s\n", ranks[r].rank, m3idx_error_message(ranks[r].error));
        m3idx_error_free(ranks[r].error);
      }
    }
    EXPECT(m3idx_decode_cp_departed_rank(ranks[1].cp) == -1 && m3idx_decode_cp_departed_rank(NULL) == -2);
    error = m3idx_indexer_join_decode_cp(indexer, ranks[1].cp);
    EXPECT(error != NULL && strstr(m3idx_error_message(error), "GPU indexers only") != NULL);
    m3idx_error_free(error);
    error = m3idx_indexer_join_decode_cp(NULL, ranks[1].cp);
    EXPECT(error != NULL && strstr(m3idx_error_message(error), "expected an indexer") != NULL);
    m3idx_error_free(error);
    m3idx_decode_cp_destroy(ranks[0].cp);
    m3idx_decode_cp_destroy(ranks[1].cp);
    unsetenv("M3IDX_CUDA_LIBRARY");
  }
  m3idx_decode_cp *cp = NULL;
  error = m3idx_decode_cp_create(NULL, 0, 4, 4096, M3IDX_DEVICE_CUDA, 0, 1000, &cp);
  EXPECT(error != NULL && strstr(m3idx_error_message(error), "group name") != NULL && cp == NULL);
  m3idx_error_free(error);
  error = m3idx_decode_cp_create("capi-group", 0, 4, 4096, M3IDX_DEVICE_HOST, 0, 1000, &cp);
  EXPECT(error != NULL && strstr(m3idx_error_message(error), "decode CP device") != NULL && cp == NULL);
  m3idx_error_free(error);
  error = m3idx_decode_cp_create("capi-group", 0, 4, 0, M3IDX_DEVICE_CUDA, 0, 1000, &cp);
  EXPECT(error != NULL && strstr(m3idx_error_message(error), "max_model_len") != NULL && cp == NULL);
  m3idx_error_free(error);

  /* A page id out of range is an error naming it, not a crash. */
  block_table[2] = 99;
  error = m3idx_indexer_forward(indexer, &tq, &tkv, &decode, NULL, NULL, NULL, &topk, NULL, NULL);
  EXPECT(error != NULL && strstr(m3idx_error_message(error), "block_table[0][2]") != NULL);
  m3idx_error_free(error);
  block_table[2] = 2;
  error = m3idx_indexer_forward(indexer, NULL, &tkv, &decode, NULL, NULL, NULL, &topk, NULL, NULL);
  EXPECT(error != NULL && strstr(m3idx_error_message(error), "index_query") != NULL);
  m3idx_error_free(error);
  tq.dtype = 7;
  error = m3idx_indexer_forward(indexer, &tq, &tkv, &decode, NULL, NULL, NULL, &topk, NULL, NULL);
  EXPECT(error != NULL && strstr(m3idx_error_message(error), "dtype 7") != NULL);
  m3idx_error_free(error);

  m3idx_indexer_destroy(indexer);
  free(kv);
  printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
  return failures ? 1 : 0;
}
