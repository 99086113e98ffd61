/* tests/pth/pth_tool.c — the C side of test_pth_torch.py, linked with
 * module ckpt (and so with pth, base and the shim) so that it can reach the
 * internal switches (zip64 on every entry, loading from memory, the CRC
 * routine).
 *
 *   pth_tool save-specimen FILE [--zip64]  writes pth_specimen(); prints {"sum": ..., "dump": ...}
 *   pth_tool save-small FILE [--zip64]     the same with pth_small()
 *   pth_tool save-top KIND FILE            a top-level list / tuple / tensor / int
 *   pth_tool dump [--buffer] FILE...       ct_pth_load (or cti_pth_load_buffer of the bytes) of each
 *                                          file; prints a line per file: {"dump": ...} or
 *                                          {"code": "CT_EFORMAT", "message": ...}
 *   pth_tool resave IN OUT [IN OUT...]     loads IN and saves it as OUT; a line {"sum": ..., "dump": ...} each
 *   pth_tool checksum FILE...              ct_file_checksum; a line {"nbytes": n, "crc32": c} each
 *   pth_tool crc-selftest                  cti_crc32 / _combine against zlib
 *   pth_tool mapped-selftest DIR           cti_pth_load_mapped: equal values, no copy of the
 *                                          file in private memory, writes stay private,
 *                                          CRCs checked, tensors outlive the file's name
 *
 * A dump is {"value": V, "storages": [{"nbytes": n, "data": hex}, ...]} with
 *   V = null | true | false | int | {"float": hex of the IEEE bits} | "str"
 *     | {"list": [V...]} | {"tuple": [V...]} | {"dict": [[key, V]...]}
 *     | {"tensor": {"dtype", "shape", "stride", "offset", "storage": index
 *                   into storages (by first use), "requires_grad", "data":
 *                   hex of the elements in C order}}
 * pthjson.py builds the same from Python objects. Commands take many files
 * because starting a program that links libtorch costs most of a second.
 * Failures other than a refused load print the code name and the message on
 * stderr ("CT_EFORMAT\n...") and exit 3.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <ctrial/ctrial.h>

#include "base/crc32.h"
#include "ckpt/pth_tensors.h"
#include "specimen.h"

static int die(void) {
    const char *name = ct_strerror(ct_last_code());
    fprintf(stderr, "%.*s\n%s\n", (int)strcspn(name, ":"), name, ct_last_error());
    return 3;
}

static json_t *hex(const unsigned char *p, size_t n) {
    char *s = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) snprintf(s + 2 * i, 3, "%02x", p[i]);
    s[2 * n] = '\0';
    json_t *j = json_string(s);
    free(s);
    return j;
}

typedef struct {
    const void *ids[4096];
    size_t n;
    json_t *storages;
} dumper;

static json_t *dump_tensor(dumper *d, const ct_tensor *t) {
    ct_storage_info si;
    if (ct_storage_info_of(t, &si)) return NULL;
    size_t index = 0;
    while (index < d->n && d->ids[index] != si.id) index++;
    if (index == d->n) {
        if (d->n == sizeof d->ids / sizeof *d->ids) return NULL;
        d->ids[d->n++] = si.id;
        unsigned char *b = malloc(si.nbytes ? si.nbytes : 1);
        if (ct_storage_read(t, 0, b, si.nbytes)) return NULL;
        json_array_append_new(d->storages, json_pack("{s:I, s:o}", "nbytes", (json_int_t)si.nbytes, "data",
                                                     hex(b, si.nbytes)));
        free(b);
    }
    int ndim = ct_ndim(t);
    json_t *shape = json_array(), *stride = json_array();
    for (int k = 0; k < ndim; k++) {
        json_array_append_new(shape, json_integer(ct_size(t, k)));
        json_array_append_new(stride, json_integer(ct_stride(t, k)));
    }
    size_t nbytes = (size_t)ct_numel(t) * ct_dtype_size(ct_dtype_of(t));
    unsigned char *b = malloc(nbytes ? nbytes : 1);
    if (ct_read(t, b, nbytes)) return NULL;
    json_t *j = json_pack("{s:{s:s, s:o, s:o, s:I, s:I, s:b, s:o}}", "tensor", "dtype", ct_dtype_name(ct_dtype_of(t)),
                          "shape", shape, "stride", stride, "offset", (json_int_t)si.offset, "storage",
                          (json_int_t)index, "requires_grad", ct_requires_grad(t), "data", hex(b, nbytes));
    free(b);
    return j;
}

static json_t *dump_value(dumper *d, const ct_value *v) {
    switch (ct_value_kind_of(v)) {
    case CT_VALUE_NONE: return json_null();
    case CT_VALUE_BOOL: {
        bool b = false;
        ct_value_get_bool(v, &b);
        return json_boolean(b);
    }
    case CT_VALUE_INT: {
        int64_t i = 0;
        ct_value_get_int(v, &i);
        return json_integer(i);
    }
    case CT_VALUE_FLOAT: {
        double x = 0;
        uint64_t u;
        ct_value_get_float(v, &x);
        memcpy(&u, &x, sizeof u);
        char s[20];
        snprintf(s, sizeof s, "%016" PRIx64, u);
        return json_pack("{s:s}", "float", s);
    }
    case CT_VALUE_STR: return json_string(ct_value_get_str(v));
    case CT_VALUE_TENSOR: return dump_tensor(d, ct_value_get_tensor(v));
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE: {
        json_t *a = json_array();
        for (size_t i = 0; i < ct_value_len(v); i++) json_array_append_new(a, dump_value(d, ct_value_list_get(v, i)));
        return json_pack("{s:o}", ct_value_kind_of(v) == CT_VALUE_LIST ? "list" : "tuple", a);
    }
    case CT_VALUE_DICT: {
        json_t *a = json_array();
        for (size_t i = 0; i < ct_value_len(v); i++) {
            const char *skey = NULL;
            int64_t ikey = 0;
            ct_value *item = ct_value_dict_at(v, i, &skey, &ikey);
            json_array_append_new(a, json_pack("[o, o]", skey ? json_string(skey) : json_integer(ikey),
                                               dump_value(d, item)));
        }
        return json_pack("{s:o}", "dict", a);
    }
    }
    return NULL;
}

static json_t *dump(const ct_value *v) {
    dumper *d = calloc(1, sizeof *d);
    d->storages = json_array();
    json_t *value = dump_value(d, v);
    json_t *j = json_pack("{s:o, s:o}", "value", value, "storages", d->storages);
    free(d);
    return j;
}

static json_t *sum_json(const ct_file_sum *s) {
    return json_pack("{s:I, s:I}", "nbytes", (json_int_t)s->nbytes, "crc32", (json_int_t)s->crc32);
}

static int print(json_t *j) {
    if (!j) {
        fprintf(stderr, "building the JSON failed\n");
        return 4;
    }
    char *s = json_dumps(j, JSON_COMPACT);
    puts(s);
    free(s);
    json_decref(j);
    return 0;
}

static int save(const char *path, ct_value *v, bool zip64) {
    if (!v) return die();
    ct_file_sum sum;
    if (cti_pth_save_ex(path, v, NULL, &sum, zip64)) {
        ct_value_free(v);
        return die();
    }
    int rc = print(json_pack("{s:o, s:o}", "sum", sum_json(&sum), "dump", dump(v)));
    ct_value_free(v);
    return rc;
}

static ct_value *top_value(const char *kind) {
    if (strcmp(kind, "int") == 0) return ct_value_int(-5);
    if (strcmp(kind, "tensor") == 0) return ct_value_tensor(ct_arange(0, 6, 1, NULL));
    ct_value *seq = strcmp(kind, "tuple") == 0 ? ct_value_tuple() : ct_value_list();
    ct_tensor *t = ct_ones(CT_SHAPE(2), &(ct_topts){.dtype = CT_I32});
    ct_value_list_append(seq, ct_value_tensor(ct_alias(t)));
    ct_value_list_append(seq, ct_value_tensor(t));
    ct_value_list_append(seq, ct_value_str("x"));
    return seq;
}

static int load_file(const char *path, bool buffer, ct_value **out) {
    if (!buffer) return ct_pth_load(path, out);
    FILE *f = fopen(path, "rb");
    if (!f) return ct_set_error(CT_EIO, "%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    size_t got = fread(b, 1, (size_t)n, f);
    fclose(f);
    int rc = got == (size_t)n ? cti_pth_load_buffer(b, got, path, out) : ct_set_error(CT_EIO, "%s: short read", path);
    free(b);
    return rc;
}

/* cti_crc32 against zlib at every length up to 4 KiB and alignment up
 * to 64, for several start values; cti_crc32_combine at random splits. */
static int crc_selftest(void) {
    enum { N = 1 << 16 };
    unsigned char *b = malloc(N + 64);
    uint32_t x = 12345;
    for (size_t i = 0; i < N + 64; i++) b[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 16);
    long bad = 0, checks = 0;
    for (size_t off = 0; off < 64; off++)
        for (size_t len = 0; len <= 4096; len++, checks++) {
            uint32_t seed = (uint32_t)(len * 2654435761u);
            if (cti_crc32(seed, b + off, len) != (uint32_t)crc32(seed, b + off, (uInt)len)) bad++;
        }
    for (size_t len = 4096; len <= N; len = len * 3 / 2 + 17, checks++)
        if (cti_crc32(0, b + 3, len) != (uint32_t)crc32(0, b + 3, (uInt)len)) bad++;
    for (int k = 0; k < 1000; k++, checks++) {
        size_t a = (x = x * 1103515245u + 12345u) % N, c = (x = x * 1103515245u + 12345u) % (N - a);
        uint32_t whole = (uint32_t)crc32(0, b, (uInt)(a + c));
        if (cti_crc32_combine(cti_crc32(0, b, a), cti_crc32(0, b + a, c), c) != whole) bad++;
    }
    free(b);
    printf("crc-selftest: %ld checks, %ld failed\n", checks, bad);
    return bad ? 1 : 0;
}

/* This process's RssAnon (private memory in RAM) in kB, -1 unknown. */
static long rss_anon_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}

static long mapped_checks, mapped_bad;

static void expect(bool ok, const char *what) {
    mapped_checks++;
    if (ok) return;
    mapped_bad++;
    fprintf(stderr, "FAIL %s (%s)\n", what, ct_last_error());
}

/* cti_pth_load_mapped against ct_pth_load on a file of 8 MB of storages
 * and a small one: the same values; the mapped load adds no private
 * memory for its large storages (the plain one adds them all); a write
 * into a mapped tensor changes neither the file nor a later load; a
 * flipped byte in a mapped storage fails its CRC; a mapped tensor stays
 * readable once the file is unlinked (a pruned checkpoint). */
static int mapped_selftest(const char *dir) {
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/mapped.pth", dir);
    snprintf(bad, sizeof bad, "%s/mapped_bad.pth", dir);
    ct_manual_seed(5);
    ct_value *v = ct_value_dict();
    ct_value_dict_set(v, "big", ct_value_tensor(ct_keep(ct_randn(CT_SHAPE(1300, 1024), NULL))));
    ct_value_dict_set(v, "mid", ct_value_tensor(ct_keep(ct_randint(-9, 9, CT_SHAPE(300, 1024), NULL))));
    ct_value_dict_set(v, "small", ct_value_tensor(ct_keep(ct_randn(CT_SHAPE(7), NULL))));
    expect(ct_pth_save(path, v, NULL, NULL) == CT_OK, "saving");

    long before = rss_anon_kb();
    ct_value *m = NULL;
    expect(cti_pth_load_mapped(path, &m) == CT_OK && ct_value_equal(v, m), "a mapped load gives the same values");
    long mapped_kb = rss_anon_kb() - before;
    before = rss_anon_kb();
    ct_value *plain = NULL;
    expect(ct_pth_load(path, &plain) == CT_OK && ct_value_equal(v, plain), "a plain load gives the same values");
    long plain_kb = rss_anon_kb() - before;
#ifndef __SANITIZE_ADDRESS__ /* whose shadow memory and quarantine move RssAnon on their own */
    printf("mapped-selftest: private memory added by a mapped load %ld kB, by a plain one %ld kB\n", mapped_kb,
           plain_kb);
    expect(plain_kb >= 7000 && mapped_kb < 2000, "the mapped load holds no private copy of its 7.7 MB of storages");
#else
    (void)mapped_kb;
    (void)plain_kb;
#endif
    /* A write copies its pages: the loaded tensor changes, the file does not. */
    ct_tensor *big = ct_value_get_tensor(ct_value_dict_get(m, "big"));
    expect(ct_fill_(big, 3.0) == CT_OK, "writing into a mapped tensor");
    double x = 0;
    expect(ct_item(ct_sum(big), &x) == CT_OK && x == 3.0 * 1300 * 1024, "the write is seen in the mapped tensor");
    ct_value *again = NULL;
    expect(cti_pth_load_mapped(path, &again) == CT_OK && ct_value_equal(v, again),
           "a write into a mapped tensor changes neither the file nor the next load");
    /* The file's name can go: the mapping keeps its pages. */
    expect(unlink(path) == 0, "unlinking the file");
    expect(ct_value_equal(v, again), "a mapped tensor outlives its file's name");
    ct_value_free(again);
    ct_value_free(m);

    /* A flipped byte deep inside the big storage: the CRC still fails. */
    expect(ct_pth_save(path, v, NULL, NULL) == CT_OK, "saving again");
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n);
    expect(fread(b, 1, n, f) == n, "reading the file");
    fclose(f);
    size_t at = 0;
    for (size_t i = 0; i + 13 <= n && !at; i++)
        if (memcmp(b + i, "mapped/data/0", 13) == 0) at = (i + 13 + 4 + 63) / 64 * 64 + (3u << 20) + 5;
    expect(at > 0 && at < n, "finding the big storage");
    if (at > 0 && at < n) b[at] ^= 0x10;
    f = fopen(bad, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    free(b);
    ct_value *broken = NULL;
    expect(cti_pth_load_mapped(bad, &broken) == CT_EFORMAT && !broken && strstr(ct_last_error(), "CRC-32"),
           "a flipped byte in a mapped storage fails its CRC");
    ct_clear_error();
    ct_value_free(plain);
    ct_value_free(v);
    printf("mapped-selftest: %ld checks, %ld failed\n", mapped_checks, mapped_bad);
    return mapped_bad ? 1 : 0;
}

/* {"code": "CT_EFORMAT", "message": ...} for the last failure. */
static json_t *error_json(void) {
    const char *name = ct_strerror(ct_last_code());
    return json_pack("{s:s%, s:s}", "code", name, strcspn(name, ":"), "message", ct_last_error());
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: pth_tool save-specimen|save-small|save-top|dump|resave|checksum|crc-selftest|mapped-selftest ...\n");
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "crc-selftest") == 0) return crc_selftest();
    if (argc < 3) return 2;
    if (strcmp(cmd, "mapped-selftest") == 0) return mapped_selftest(argv[2]);
    bool zip64 = argc > 3 && strcmp(argv[argc - 1], "--zip64") == 0;
    if (strcmp(cmd, "save-specimen") == 0) return save(argv[2], pth_specimen(), zip64);
    if (strcmp(cmd, "save-small") == 0) return save(argv[2], pth_small(), zip64);
    if (strcmp(cmd, "save-top") == 0 && argc >= 4) return save(argv[3], top_value(argv[2]), false);
    int rc = 0;
    if (strcmp(cmd, "checksum") == 0) {
        for (int i = 2; i < argc && !rc; i++) {
            ct_file_sum s;
            rc = ct_file_checksum(argv[i], &s) ? die() : print(sum_json(&s));
        }
        return rc;
    }
    if (strcmp(cmd, "dump") == 0) {
        bool buffer = strcmp(argv[2], "--buffer") == 0;
        for (int i = buffer ? 3 : 2; i < argc && !rc; i++) {
            ct_value *v = NULL;
            rc = print(load_file(argv[i], buffer, &v) ? error_json() : json_pack("{s:o}", "dump", dump(v)));
            ct_value_free(v);
        }
        return rc;
    }
    if (strcmp(cmd, "resave") == 0 && argc % 2 == 0) {
        for (int i = 2; i + 1 < argc && !rc; i += 2) {
            ct_value *v = NULL;
            rc = ct_pth_load(argv[i], &v) ? die() : save(argv[i + 1], v, false);
        }
        return rc;
    }
    fprintf(stderr, "pth_tool: unknown command or arguments: %s\n", cmd);
    return 2;
}
