/* The C ABI of m3idx (IREE style): opaque handles, an error object that is NULL on success and
 * owned by the caller otherwise, and an API version. Wraps include/m3idx/Indexer.h for Python,
 * Rust or C hosts; no C++ exception crosses it. */
#ifndef M3IDX_H
#define M3IDX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: device_block_table in the metadata structs; 3: decode(); 4: decode workspaces
 * (m3idx_indexer_decode's workspace, reserve_decode_workspace, decode_workspace_bytes);
 * 5: decode CP across processes (join_decode_cp, decode_cp_active); 6: one decode CP group a
 * process, shared by its indexers (m3idx_decode_cp_create; join_decode_cp takes it); 7: a step
 * planned once and run per layer (m3idx_indexer_plan, m3idx_indexer_run, m3idx_plan) */
#define M3IDX_API_VERSION 7

typedef struct m3idx_indexer m3idx_indexer;
typedef struct m3idx_error m3idx_error;
typedef struct m3idx_decode_cp m3idx_decode_cp;
typedef struct m3idx_plan m3idx_plan;

typedef enum { M3IDX_DTYPE_U8 = 0, M3IDX_DTYPE_I32 = 1, M3IDX_DTYPE_F32 = 2 } m3idx_dtype;
typedef enum { M3IDX_DEVICE_HOST = 0, M3IDX_DEVICE_CUDA = 1, M3IDX_DEVICE_HIP = 2 } m3idx_device_kind;

typedef struct {
  void *data;
  int32_t dtype;  /* m3idx_dtype */
  int32_t ndim;   /* <= 4 */
  int64_t shape[4];
  int64_t strides[4]; /* in elements */
  int32_t device_kind; /* m3idx_device_kind */
  int32_t device_index;
} m3idx_tensor;

typedef struct {
  int32_t num_index_heads;
  int32_t index_head_dim;
  int32_t sparse_block_size;
  int32_t topk_blocks;
  const char *score_type; /* "max" */
  const char *kv_dtype;   /* "nvfp4" */
  int32_t init_blocks;
  int32_t local_blocks;
  int64_t max_model_len;
  int32_t decode_query_len; /* the decode shape warmed up */
  int32_t max_num_decodes;      /* capacities of m3idx_indexer_decode (Indexer.h) */
  int32_t max_decode_query_len;
  int32_t check_decode_sync;    /* nonzero: decode waits and fails on a bad device value */
  int32_t reserve_decode_workspace; /* nonzero (default): warmup allocates the own workspace */
} m3idx_config;

typedef struct {
  m3idx_tensor block_table; /* int32 [num_decodes, max_blocks] */
  m3idx_tensor seq_lens;    /* int32 [num_decodes] */
  int32_t decode_query_len;
  int64_t max_seq_len;
  m3idx_tensor device_block_table; /* optional (data NULL: absent): block_table on the GPU */
} m3idx_decode_metadata;

typedef struct {
  m3idx_tensor block_table;     /* int32 [num_prefills, max_blocks] */
  m3idx_tensor query_start_loc; /* int32 [num_prefills + 1] */
  m3idx_tensor seq_lens;        /* int32 [num_prefills] */
  int64_t max_query_len;
  int64_t max_seq_len;
  m3idx_tensor device_block_table; /* optional (data NULL: absent): block_table on the GPU */
} m3idx_prefill_metadata;

int32_t m3idx_api_version(void);

/* Fills `config` with the model defaults (1 head, 128, 128, 16, "max", "nvfp4", 0, 1, 2^20, 4;
 * capacities 256 decodes of up to 4 rows; no synchronous check; the own workspace reserved). */
void m3idx_config_init(m3idx_config *config);

/* Writes the reason `config` cannot be served on `device_kind` into buf (truncated to buf_len,
 * NUL-terminated) and returns its full length; 0 when it is served. */
size_t m3idx_unsupported_reason(const m3idx_config *config, int32_t device_kind, char *buf,
                                size_t buf_len);

m3idx_error *m3idx_indexer_create(const m3idx_config *config, int32_t device_kind,
                                  int32_t device_index, m3idx_indexer **out);
void m3idx_indexer_destroy(m3idx_indexer *indexer);
m3idx_error *m3idx_indexer_warmup(m3idx_indexer *indexer);

/* decode / prefill may be NULL (no such rows); topk_out may be NULL (the indexer's own buffer).
 * On success *topk, *decode_topk, *prefill_topk (each may be NULL) are views [H, rows, 16]. */
m3idx_error *m3idx_indexer_forward(m3idx_indexer *indexer, const m3idx_tensor *index_query,
                                   const m3idx_tensor *kv_cache,
                                   const m3idx_decode_metadata *decode,
                                   const m3idx_prefill_metadata *prefill, void *stream,
                                   const m3idx_tensor *topk_out, m3idx_tensor *topk,
                                   m3idx_tensor *decode_topk, m3idx_tensor *prefill_topk);

/* forward in two halves (Indexer::plan / Indexer::run): plan checks and plans a step's metadata
 * once (copying its host arrays; on a GPU uploading them on `stream`) into *out, the caller's to
 * m3idx_plan_destroy (any time: runs queued already are unaffected); run checks index_query,
 * kv_cache and topk_out against it and only binds and launches, writing the views as forward
 * does. A plan is immutable: runs from several threads and streams may share it. */
m3idx_error *m3idx_indexer_plan(m3idx_indexer *indexer, const m3idx_decode_metadata *decode,
                                const m3idx_prefill_metadata *prefill, void *stream, m3idx_plan **out);
m3idx_error *m3idx_indexer_run(m3idx_indexer *indexer, const m3idx_plan *plan, const m3idx_tensor *index_query,
                               const m3idx_tensor *kv_cache, void *stream, const m3idx_tensor *topk_out,
                               m3idx_tensor *topk, m3idx_tensor *decode_topk, m3idx_tensor *prefill_topk);
void m3idx_plan_destroy(m3idx_plan *plan);
/* index_query rows a run of the plan takes (-1 for NULL). */
int64_t m3idx_plan_rows(const m3idx_plan *plan);
/* The graph-safe decode (Indexer::decode): seq_lens int32 [D] and block_table int32 [D, M] on
 * the indexer's device, index_query [D x Q, H, 128]; no host read, wait, allocation or copy.
 * workspace may be NULL (the indexer's own), else uint8 [>= decode_workspace_bytes] on the device,
 * zeroed before its first step. topk_out may be NULL (the top-k then lies in the workspace);
 * *topk (may be NULL) is the [H, D x Q, 16] view.
 * Threads and streams (Indexer.h's first comment): calls from several threads take turns and each
 * gets its own answer; decode steps on different workspaces overlap across streams, steps sharing
 * one must be ordered (one stream); graphs that may replay at once need different workspaces. */
m3idx_error *m3idx_indexer_decode(m3idx_indexer *indexer, const m3idx_tensor *index_query,
                                  const m3idx_tensor *kv_cache, const m3idx_tensor *block_table,
                                  const m3idx_tensor *seq_lens, void *stream,
                                  const m3idx_tensor *topk_out, m3idx_tensor *topk,
                                  const m3idx_tensor *workspace);

/* Bytes of a decode workspace for the indexer's capacities (-1 for a NULL indexer). */
int64_t m3idx_indexer_decode_workspace_bytes(const m3idx_indexer *indexer);

/* Waits for `stream` and reads decode's device status words (each 0 when nothing was found; see
 * DeviceStatus in Indexer.h), clearing them when `clear` is nonzero. Either output may be NULL. */
m3idx_error *m3idx_indexer_read_status(m3idx_indexer *indexer, void *stream, int32_t clear,
                                       int64_t *seq_lens_word, int64_t *block_table_word);

/* As read_status with clear, returning an error naming the bad values when there were any. */
m3idx_error *m3idx_indexer_check_status(m3idx_indexer *indexer, void *stream);

int64_t m3idx_indexer_compiles_after_warmup(const m3idx_indexer *indexer);

/* Decode CP across processes on one host (DecodeCp in Indexer.h; CUDA indexers of one head). The
 * group, one a process: collective, every rank's process calls it with the same group_name (unique
 * on the host, 1-64 of [A-Za-z0-9_.-]; the caller shares one rank's random name, e.g. through its
 * own all-gather), world and max_model_len (sizes the receive buffers), within timeout_ms. Its
 * indexers then join it (not collective); decode steps SPEC §6 allows are scored by the group.
 * Destroying it (or an indexer) is allowed any time: the memory lives while anything holds it. */
m3idx_error *m3idx_decode_cp_create(const char *group_name, int32_t rank, int32_t world, int64_t max_model_len,
                                    int32_t device_kind, int32_t device_index, int32_t timeout_ms,
                                    m3idx_decode_cp **out);
void m3idx_decode_cp_destroy(m3idx_decode_cp *cp);
/* The first peer seen to leave the group (its process ended), -1 if none, -2 for NULL. */
int32_t m3idx_decode_cp_departed_rank(const m3idx_decode_cp *cp);
m3idx_error *m3idx_indexer_join_decode_cp(m3idx_indexer *indexer, m3idx_decode_cp *cp);
/* 1 when the last forward or decode was scored by decode CP, 0 if not, -1 for a NULL indexer. */
int32_t m3idx_indexer_decode_cp_active(const m3idx_indexer *indexer);

const char *m3idx_error_message(const m3idx_error *error);
void m3idx_error_free(m3idx_error *error);

#ifdef __cplusplus
}
#endif

#endif /* M3IDX_H */
