/*
 * Our own ABI-compatible declarations of the RKNN matmul API (librknnrt.so,
 * SDK v2.x), written from docs/rknn-npu.md §3; no vendor header is copied.
 * Only what evalrun calls is declared.
 */
#ifndef EVALRUN_RKNN_ABI_H
#define EVALRUN_RKNN_ABI_H

#include <stdint.h>

#define RKNN_MAX_DIMS 16
#define RKNN_MAX_NAME_LEN 256

#define RKNN_SUCC 0
#define RKNN_ERR_FAIL -1
#define RKNN_ERR_TIMEOUT -2
#define RKNN_ERR_DEVICE_UNAVAILABLE -3
#define RKNN_ERR_MALLOC_FAIL -4
#define RKNN_ERR_PARAM_INVALID -5
#define RKNN_ERR_MODEL_INVALID -6
#define RKNN_ERR_CTX_INVALID -7

/* rknn_context is uint64_t on aarch64 (uint32_t only on 32-bit arm). */
typedef uint64_t rknn_context;
typedef rknn_context rknn_matmul_ctx;

/* C enums are int-sized on the supported ABIs. */
typedef int32_t rknn_matmul_type;
typedef int32_t rknn_tensor_type;
typedef int32_t rknn_core_mask;

typedef struct {
    int32_t M, K, N;
    rknn_matmul_type type;
    int16_t B_layout;      /* 0 norm [K,N], 1 native, 2 tp_norm [N,K] */
    int16_t B_quant_type;
    int16_t AC_layout;     /* 0 norm, 1 native */
    int16_t AC_quant_type;
    int32_t iommu_domain_id;
    int16_t group_size;
    int8_t reserved[34];
} rknn_matmul_info;

typedef struct {
    char name[RKNN_MAX_NAME_LEN];
    uint32_t n_dims;
    uint32_t dims[RKNN_MAX_DIMS];
    uint32_t size; /* bytes */
    rknn_tensor_type type;
} rknn_matmul_tensor_attr;

typedef struct {
    rknn_matmul_tensor_attr A, B, C;
} rknn_matmul_io_attr;

typedef struct {
    void *virt_addr;
    uint64_t phys_addr;
    int32_t fd;
    int32_t offset;
    uint32_t size;
    uint32_t flags;
    void *priv_data;
} rknn_tensor_mem;

typedef struct {
    char name[RKNN_MAX_NAME_LEN];
    float *scale;
    int32_t scale_len;
    int32_t *zp;
    int32_t zp_len;
} rknn_quant_params;

_Static_assert(sizeof(rknn_matmul_info) == 64, "rknn_matmul_info is 64 bytes");
_Static_assert(sizeof(rknn_matmul_tensor_attr) == 332, "rknn_matmul_tensor_attr is 332 bytes");
_Static_assert(sizeof(rknn_matmul_io_attr) == 3 * 332, "rknn_matmul_io_attr is A, B, C");
_Static_assert(sizeof(void *) != 8 || sizeof(rknn_tensor_mem) == 40, "rknn_tensor_mem is 40 bytes on 64-bit");
_Static_assert(sizeof(void *) != 8 || sizeof(rknn_quant_params) == 288, "rknn_quant_params is 288 bytes on 64-bit");

int rknn_matmul_create(rknn_matmul_ctx *ctx, rknn_matmul_info *info, rknn_matmul_io_attr *io_attr);
int rknn_matmul_set_io_mem(rknn_matmul_ctx ctx, rknn_tensor_mem *mem, rknn_matmul_tensor_attr *attr);
int rknn_matmul_set_core_mask(rknn_matmul_ctx ctx, rknn_core_mask core_mask);
int rknn_matmul_set_quant_params(rknn_matmul_ctx ctx, rknn_quant_params *params);
int rknn_matmul_run(rknn_matmul_ctx ctx);
int rknn_matmul_destroy(rknn_matmul_ctx ctx);
rknn_tensor_mem *rknn_create_mem(rknn_context ctx, uint32_t size);
int rknn_destroy_mem(rknn_context ctx, rknn_tensor_mem *mem);

#endif
