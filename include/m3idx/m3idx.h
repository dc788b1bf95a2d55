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

#define M3IDX_API_VERSION 2 /* 2: device_block_table in the metadata structs */

typedef struct m3idx_indexer m3idx_indexer;
typedef struct m3idx_error m3idx_error;

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

/* Fills `config` with the model defaults (1 head, 128, 128, 16, "max", "nvfp4", 0, 1, 2^20, 4). */
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

int64_t m3idx_indexer_compiles_after_warmup(const m3idx_indexer *indexer);

const char *m3idx_error_message(const m3idx_error *error);
void m3idx_error_free(m3idx_error *error);

#ifdef __cplusplus
}
#endif

#endif /* M3IDX_H */
