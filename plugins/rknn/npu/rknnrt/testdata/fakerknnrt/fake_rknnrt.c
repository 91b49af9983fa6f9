/*
 * A fake librknnrt.so for testing the cgo driver off the board. It follows
 * the simulator (plugins/rknn/npu/sim) rule for rule: the same create
 * validation and return codes, the same io attrs, the same layouts, the same
 * numerics (fp16 decode, exact products, float32 sums per K block of 32 added
 * to a float32 accumulator, fp16 output rounded to nearest even; integer paths
 * exact, int16 saturated, int8 output requantized). Build with
 * -ffp-contract=off so no multiply-add is fused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../rknn_abi.h"

#define CTX_MAGIC 0x524b4e4e /* "RKNN" */
#define B_SEGMENT_K 8192
#define B_ATOM_K 32

typedef struct {
    rknn_tensor_mem pub; /* first: the pointer handed out */
    int freed;
} fake_mem;

typedef struct {
    uint32_t magic;
    int destroyed;
    rknn_matmul_info info;
    rknn_matmul_io_attr io;
    fake_mem *a, *b, *c;
    rknn_core_mask mask;
    float scale[3];
    int32_t zp[3];
} fake_ctx;

static float f16_lut[65536];

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
    if (e == 0) {
        if (m == 0) {
            x = sign;
        } else { /* subnormal: normalize */
            e = 113;
            while (!(m & 0x400)) {
                m <<= 1;
                e--;
            }
            x = sign | (e << 23) | ((m & 0x3ff) << 13);
        }
    } else if (e == 31) {
        x = sign | 0x7f800000 | (m << 13);
    } else {
        x = sign | ((e + 112) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* Round to nearest even; >= 65520 gives Inf; NaN stays a quiet NaN. */
static uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
    if (ax > 0x7f800000) return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
    if (ax >= 0x477ff000) return (uint16_t)(sign | 0x7c00);
    if (ax < 0x38800000) { /* below 2^-14: subnormal result, units of 2^-24 */
        uint32_t e = ax >> 23;
        if (e < 102) return (uint16_t)sign;
        uint32_t m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e, r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = (ax >> 13) - (112u << 10), rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    return (uint16_t)(sign | r);
}

__attribute__((constructor)) static void init_lut(void) {
    for (uint32_t i = 0; i < 65536; i++) f16_lut[i] = f16_to_f32((uint16_t)i);
}

static int cdiv(int a, int b) { return (a + b - 1) / b; }

static int type_bits(rknn_matmul_type t, int *a, int *b, int *c) {
    switch (t) {
    case 1: *a = 16, *b = 16, *c = 32; return 1;
    case 2: *a = 8, *b = 8, *c = 32; return 1;
    case 3: *a = 8, *b = 8, *c = 8; return 1;
    case 4: *a = 16, *b = 16, *c = 16; return 1;
    case 10: *a = 4, *b = 4, *c = 16; return 1;
    }
    return 0;
}

static rknn_tensor_type tensor_type(int bits, int is_float) {
    switch (bits) {
    case 32: return is_float ? 0 : 6; /* FLOAT32 / INT32 */
    case 16: return is_float ? 1 : 4; /* FLOAT16 / INT16 */
    case 8: return 2;                 /* INT8 */
    default: return 10;               /* INT4 */
    }
}

static int fail(const char *fn, int code, const char *msg) {
    fprintf(stderr, "E fake-RKNN: %s: %s\n", fn, msg);
    return code;
}

static void set_attr(rknn_matmul_tensor_attr *a, const char *name, int n, const uint32_t *dims, int bits, rknn_tensor_type type) {
    memset(a, 0, sizeof *a);
    strcpy(a->name, name);
    a->n_dims = (uint32_t)n;
    uint64_t elems = 1;
    for (int i = 0; i < n; i++) {
        a->dims[i] = dims[i];
        elems *= dims[i];
    }
    a->size = (uint32_t)((elems * (uint64_t)bits + 7) / 8);
    a->type = type;
}

int rknn_matmul_create(rknn_matmul_ctx *ctx, rknn_matmul_info *info, rknn_matmul_io_attr *io) {
    const char *fn = "rknn_matmul_create";
    int ab, bb, cb;
    if (!ctx || !info || !io) return fail(fn, RKNN_ERR_PARAM_INVALID, "null argument");
    if (!type_bits(info->type, &ab, &bb, &cb)) return fail(fn, RKNN_ERR_PARAM_INVALID, "matmul type not supported");
    if (info->M <= 0 || info->K <= 0 || info->N <= 0) return fail(fn, RKNN_ERR_PARAM_INVALID, "M, K, N must be > 0");
    if (info->K % 32) return fail(fn, RKNN_ERR_PARAM_INVALID, "K % 32 != 0");
    if (info->K > 10240) return fail(fn, RKNN_ERR_PARAM_INVALID, "K > 10240");
    int align = ab == 16 ? 16 : ab == 8 ? 32 : 64;
    if (info->N % align) return fail(fn, RKNN_ERR_PARAM_INVALID, "N not aligned");
    if (info->B_layout < 0 || info->B_layout > 2) return fail(fn, RKNN_ERR_PARAM_INVALID, "B_layout");
    if (info->AC_layout != 0 && info->AC_layout != 1) return fail(fn, RKNN_ERR_PARAM_INVALID, "AC_layout");
    if (info->B_quant_type != 0 && info->B_quant_type != 1) return fail(fn, RKNN_ERR_PARAM_INVALID, "B_quant_type");
    if (info->AC_quant_type != 0 && info->AC_quant_type != 1) return fail(fn, RKNN_ERR_PARAM_INVALID, "AC_quant_type");

    uint32_t M = (uint32_t)info->M, K = (uint32_t)info->K, N = (uint32_t)info->N, d[4];
    int isf = ab == 16;
    if (info->AC_layout == 0) {
        d[0] = M, d[1] = K;
        set_attr(&io->A, "A", 2, d, ab, tensor_type(ab, isf));
        d[0] = M, d[1] = N;
        set_attr(&io->C, "C", 2, d, cb, tensor_type(cb, isf));
    } else {
        uint32_t subk = 128 / ab, subn = 128 / cb;
        d[0] = cdiv(K, subk), d[1] = M, d[2] = subk;
        set_attr(&io->A, "A", 3, d, ab, tensor_type(ab, isf));
        d[0] = cdiv(N, subn), d[1] = M, d[2] = subn;
        set_attr(&io->C, "C", 3, d, cb, tensor_type(cb, isf));
    }
    if (info->B_layout == 0) {
        d[0] = K, d[1] = N;
        set_attr(&io->B, "B", 2, d, bb, tensor_type(bb, isf));
    } else if (info->B_layout == 2) {
        d[0] = N, d[1] = K;
        set_attr(&io->B, "B", 2, d, bb, tensor_type(bb, isf));
    } else {
        uint32_t subn = 256 / bb;
        d[0] = cdiv(N, subn), d[1] = cdiv(K, B_ATOM_K), d[2] = subn, d[3] = B_ATOM_K;
        set_attr(&io->B, "B", 4, d, bb, tensor_type(bb, isf));
    }
    fake_ctx *c = calloc(1, sizeof *c);
    if (!c) return fail(fn, RKNN_ERR_MALLOC_FAIL, "out of memory");
    c->magic = CTX_MAGIC;
    c->info = *info;
    c->io = *io;
    for (int i = 0; i < 3; i++) c->scale[i] = 1, c->zp[i] = 0;
    *ctx = (rknn_matmul_ctx)(uintptr_t)c;
    return RKNN_SUCC;
}

/* Destroyed contexts are kept (marked) so a stale handle is reported, not reused. */
static fake_ctx *lookup(rknn_matmul_ctx h) {
    fake_ctx *c = (fake_ctx *)(uintptr_t)h;
    if (!c || c->magic != CTX_MAGIC || c->destroyed) return NULL;
    return c;
}

rknn_tensor_mem *rknn_create_mem(rknn_context h, uint32_t size) {
    if (!lookup(h) || size == 0) return NULL;
    fake_mem *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->pub.virt_addr = calloc(1, size);
    if (!m->pub.virt_addr) {
        free(m);
        return NULL;
    }
    m->pub.size = size;
    m->pub.fd = -1;
    return &m->pub;
}

int rknn_destroy_mem(rknn_context h, rknn_tensor_mem *mem) {
    const char *fn = "rknn_destroy_mem";
    if (!lookup(h)) return fail(fn, RKNN_ERR_CTX_INVALID, "context");
    fake_mem *m = (fake_mem *)mem;
    if (!m || m->freed) return fail(fn, RKNN_ERR_PARAM_INVALID, "mem already destroyed");
    free(m->pub.virt_addr);
    m->pub.virt_addr = NULL;
    m->freed = 1; /* struct kept: a context bound to it fails its next run */
    return RKNN_SUCC;
}

int rknn_matmul_set_io_mem(rknn_matmul_ctx h, rknn_tensor_mem *mem, rknn_matmul_tensor_attr *attr) {
    const char *fn = "rknn_matmul_set_io_mem";
    fake_ctx *c = lookup(h);
    if (!c) return fail(fn, RKNN_ERR_CTX_INVALID, "context");
    fake_mem *m = (fake_mem *)mem;
    if (!m || m->freed || !attr) return fail(fn, RKNN_ERR_PARAM_INVALID, "mem or attr");
    rknn_matmul_tensor_attr *want;
    fake_mem **slot;
    if (!strcmp(attr->name, "A")) want = &c->io.A, slot = &c->a;
    else if (!strcmp(attr->name, "B")) want = &c->io.B, slot = &c->b;
    else if (!strcmp(attr->name, "C")) want = &c->io.C, slot = &c->c;
    else return fail(fn, RKNN_ERR_PARAM_INVALID, "attr name");
    if (m->pub.size < want->size || m->pub.size < attr->size) return fail(fn, RKNN_ERR_PARAM_INVALID, "mem smaller than attr size");
    *slot = m;
    return RKNN_SUCC;
}

int rknn_matmul_set_core_mask(rknn_matmul_ctx h, rknn_core_mask mask) {
    fake_ctx *c = lookup(h);
    if (!c) return fail("rknn_matmul_set_core_mask", RKNN_ERR_CTX_INVALID, "context");
    switch ((uint32_t)mask) {
    case 0: case 1: case 2: case 4: case 3: case 7: case 0xffff:
        c->mask = mask;
        return RKNN_SUCC;
    }
    return fail("rknn_matmul_set_core_mask", RKNN_ERR_PARAM_INVALID, "core mask");
}

int rknn_matmul_set_quant_params(rknn_matmul_ctx h, rknn_quant_params *p) {
    const char *fn = "rknn_matmul_set_quant_params";
    fake_ctx *c = lookup(h);
    if (!c) return fail(fn, RKNN_ERR_CTX_INVALID, "context");
    if (!p) return fail(fn, RKNN_ERR_PARAM_INVALID, "null params");
    if (c->info.type != 3) return fail(fn, RKNN_ERR_PARAM_INVALID, "quant params need INT8_MM_INT8_TO_INT8");
    int i = !strcmp(p->name, "A") ? 0 : !strcmp(p->name, "B") ? 1 : !strcmp(p->name, "C") ? 2 : -1;
    if (i < 0) return fail(fn, RKNN_ERR_PARAM_INVALID, "name");
    if (p->scale_len != 1 || !p->scale || p->zp_len > 1 || p->zp_len < 0 || (p->zp_len == 1 && !p->zp))
        return fail(fn, RKNN_ERR_PARAM_INVALID, "per-layer needs scale_len 1, zp_len <= 1");
    float s = p->scale[0];
    if (!(s > 0) || isinf(s)) return fail(fn, RKNN_ERR_PARAM_INVALID, "scale");
    int32_t zp = p->zp_len == 1 ? p->zp[0] : 0;
    int qt = i == 1 ? c->info.B_quant_type : c->info.AC_quant_type;
    if (qt == 0 && zp != 0) return fail(fn, RKNN_ERR_PARAM_INVALID, "zero point with symmetric quantization");
    if (zp < -128 || zp > 127) return fail(fn, RKNN_ERR_PARAM_INVALID, "zero point outside int8");
    c->scale[i] = s;
    c->zp[i] = zp;
    return RKNN_SUCC;
}

/* Element i of an int8 or int4 (low nibble first) buffer, minus zp. */
static int32_t int_at(const uint8_t *buf, int bits, size_t i, int32_t zp) {
    if (bits == 8) return (int32_t)(int8_t)buf[i] - zp;
    uint8_t b = buf[i >> 1];
    if (i & 1) b >>= 4;
    return (int32_t)((int8_t)(uint8_t)(b << 4) >> 4) - zp;
}

static float f16_at(const uint8_t *buf, size_t i) {
    return f16_lut[(uint16_t)(buf[2 * i] | (buf[2 * i + 1] << 8))];
}

/* Decode A to row-major M×K and B to N rows of K (as doubles-free floats or ints). */
static void load_a(const fake_ctx *c, const uint8_t *buf, int bits, int isf, float *af, int32_t *ai) {
    int M = c->info.M, K = c->info.K;
    size_t idx = 0;
    if (c->info.AC_layout == 0) {
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++, idx++) {
                if (isf) af[(size_t)m * K + k] = f16_at(buf, idx);
                else ai[(size_t)m * K + k] = int_at(buf, bits, idx, c->zp[0]);
            }
        return;
    }
    int subk = 128 / bits;
    for (int kb = 0; kb < cdiv(K, subk); kb++)
        for (int m = 0; m < M; m++)
            for (int j = 0; j < subk; j++, idx++) {
                int k = kb * subk + j;
                if (k >= K) continue;
                if (isf) af[(size_t)m * K + k] = f16_at(buf, idx);
                else ai[(size_t)m * K + k] = int_at(buf, bits, idx, c->zp[0]);
            }
}

static void load_bt(const fake_ctx *c, const uint8_t *buf, int bits, int isf, float *bf, int32_t *bi) {
    int K = c->info.K, N = c->info.N;
    size_t idx = 0;
#define PUT(n, k)                                                              \
    do {                                                                       \
        if (isf) bf[(size_t)(n) * K + (k)] = f16_at(buf, idx);                 \
        else bi[(size_t)(n) * K + (k)] = int_at(buf, bits, idx, c->zp[1]);     \
    } while (0)
    switch (c->info.B_layout) {
    case 0:
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++, idx++) PUT(n, k);
        break;
    case 2:
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++, idx++) PUT(n, k);
        break;
    default: {
        int subn = 256 / bits;
        for (int s0 = 0; s0 < K; s0 += B_SEGMENT_K) {
            int seg_end = s0 + (K - s0 < B_SEGMENT_K ? K - s0 : B_SEGMENT_K);
            int kblocks = cdiv(seg_end - s0, B_ATOM_K);
            for (int nb = 0; nb < cdiv(N, subn); nb++)
                for (int kb = 0; kb < kblocks; kb++)
                    for (int j = 0; j < subn; j++)
                        for (int i = 0; i < B_ATOM_K; i++, idx++) {
                            int n = nb * subn + j, k = s0 + kb * B_ATOM_K + i;
                            if (n < N && k < seg_end) PUT(n, k);
                        }
        }
    }
    }
#undef PUT
}

/* Element offset of C(m,n) in C's layout. */
static size_t c_off(const fake_ctx *c, int cbits, int m, int n) {
    int M = c->info.M, N = c->info.N;
    if (c->info.AC_layout == 0) return (size_t)m * N + n;
    int subn = 128 / cbits;
    return (size_t)(n / subn) * M * subn + (size_t)m * subn + n % subn;
}

int rknn_matmul_run(rknn_matmul_ctx h) {
    const char *fn = "rknn_matmul_run";
    fake_ctx *c = lookup(h);
    if (!c) return fail(fn, RKNN_ERR_CTX_INVALID, "context");
    if (!c->a || !c->b || !c->c) return fail(fn, RKNN_ERR_PARAM_INVALID, "A, B or C memory not set");
    if (c->a->freed || c->b->freed || c->c->freed) return fail(fn, RKNN_ERR_PARAM_INVALID, "memory destroyed");
    int ab = 0, bb = 0, cb = 0;
    type_bits(c->info.type, &ab, &bb, &cb); /* validated at create */
    int M = c->info.M, K = c->info.K, N = c->info.N, isf = ab == 16;
    size_t na = (size_t)M * K, nb = (size_t)N * K;
    float *af = NULL, *bf = NULL;
    int32_t *ai = NULL, *bi = NULL;
    if (isf) af = malloc(na * sizeof *af), bf = malloc(nb * sizeof *bf);
    else ai = malloc(na * sizeof *ai), bi = malloc(nb * sizeof *bi);
    if ((isf && (!af || !bf)) || (!isf && (!ai || !bi))) {
        free(af), free(bf), free(ai), free(bi);
        return fail(fn, RKNN_ERR_MALLOC_FAIL, "out of memory");
    }
    load_a(c, c->a->pub.virt_addr, ab, isf, af, ai);
    load_bt(c, c->b->pub.virt_addr, bb, isf, bf, bi);
    uint8_t *out = c->c->pub.virt_addr;
    memset(out, 0, c->io.C.size); /* padding slots are 0 */
    double qscale = (double)c->scale[0] * (double)c->scale[1] / (double)c->scale[2];
    for (int m = 0; m < M; m++) {
        for (int n = 0; n < N; n++) {
            size_t o = c_off(c, cb, m, n);
            if (isf) {
                const float *a = af + (size_t)m * K, *b = bf + (size_t)n * K;
                float acc = 0;
                for (int k0 = 0; k0 < K; k0 += B_ATOM_K) {
                    float s = 0;
                    for (int k = k0; k < k0 + B_ATOM_K && k < K; k++) s += a[k] * b[k];
                    acc += s;
                }
                if (cb == 32) memcpy(out + 4 * o, &acc, 4);
                else {
                    uint16_t v = f32_to_f16(acc);
                    out[2 * o] = (uint8_t)v, out[2 * o + 1] = (uint8_t)(v >> 8);
                }
                continue;
            }
            const int32_t *a = ai + (size_t)m * K, *b = bi + (size_t)n * K;
            int32_t s = 0;
            for (int k = 0; k < K; k++) s += a[k] * b[k];
            if (c->info.type == 2) {
                memcpy(out + 4 * o, &s, 4);
            } else if (c->info.type == 10) {
                int16_t v = (int16_t)(s > 32767 ? 32767 : s < -32768 ? -32768 : s);
                memcpy(out + 2 * o, &v, 2);
            } else { /* type 3: round(sum·sA·sB/sC), ties away, + zpC, saturate */
                double v = round((double)s * qscale) + (double)c->zp[2];
                out[o] = (uint8_t)(int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
            }
        }
    }
    free(af), free(bf), free(ai), free(bi);
    return RKNN_SUCC;
}

int rknn_matmul_destroy(rknn_matmul_ctx h) {
    fake_ctx *c = lookup(h);
    if (!c) return fail("rknn_matmul_destroy", RKNN_ERR_CTX_INVALID, "context");
    c->destroyed = 1;
    return RKNN_SUCC;
}
