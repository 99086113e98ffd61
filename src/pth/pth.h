/* src/pth/pth.h — PyTorch's file format (ckpt.h, part 1), in pure C: the
 * pieces of src/pth/ that its files share with each other, with the binding
 * to libtorch's tensors (src/ckpt/pth_tensors.c), the tests and the fuzzers.
 * Internal to ctrial.
 *
 * A file written by torch.save is an uncompressed zip archive whose entries
 * all live in one folder, <archive>/:
 *
 *     <archive>/data.pkl              the object, pickled (protocol 2); each
 *                                     tensor refers to a storage by key
 *     <archive>/.format_version       "1"
 *     <archive>/.storage_alignment    "64"
 *     <archive>/byteorder             "little"
 *     <archive>/data/<key>            one storage's raw bytes, 64-byte aligned
 *     <archive>/version               "3\n"
 *     <archive>/.data/serialization_id
 *
 * Saving (save.c) pickles the tree (pickle_write.c) and streams the entries
 * through the zip writer (zip_write.c). Loading (load.c) reads the central
 * directory (zip_read.c), runs the pickle (pickle_read.c) and reads every
 * storage into memory, checking each entry's CRC-32 (base/crc32.h).
 *
 * This module calls no shim function: it reaches tensors only through a
 * cti_pth_tensors table that its caller passes in (below). ctrial's own
 * table, over libtorch, is in src/ckpt/pth_tensors.c, which also defines
 * the public ct_pth_save and ct_pth_load with it; a program that links pth
 * and base alone (the fuzzers) passes a table of its own and runs the same
 * engine without libtorch.
 */
#ifndef CTRIAL_PTH_PTH_H
#define CTRIAL_PTH_PTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/crc32.h"
#include "ctrial/ckpt.h"

/* ---- tensors, as the caller provides them ------------------------------------------- */

enum { CT_PTH_MAX_DIMS = 64 }; /* of a tensor, in either direction */

/* What the pickler records of one tensor leaf. */
typedef struct {
    const void *storage_id; /* the same for every tensor viewing one storage */
    size_t storage_nbytes;  /* the whole storage */
    ct_device device;       /* where its bytes live: CPU storages are written from memory */
    ct_dtype dtype;
    int64_t offset;         /* the first element, in elements of dtype */
    int ndim;               /* the pickler refuses more than CT_PTH_MAX_DIMS */
    int64_t size[CT_PTH_MAX_DIMS], stride[CT_PTH_MAX_DIMS]; /* the first min(ndim, CT_PTH_MAX_DIMS) */
    bool requires_grad;
} cti_pth_tensor_info;

/* The functions through which the engine makes and reads tensors. A tensor
 * is a tensor leaf of a value tree (base/value_tensor.h: whoever makes the
 * leaf gives it its own functions); a storage is the caller's handle,
 * opaque here. Failures return NULL or a negative code with the error set
 * (ct_set_error); the engine adds the file, entry and offset around the
 * message. Loading uses the first four, saving the last three. All are
 * called on the caller's thread: the engine's own threads only read and
 * write storage memory. */
typedef struct {
    /* A NEW storage of nbytes bytes (uninitialized) of host memory, which
     * *data receives (writable; may be NULL when nbytes is 0). The engine
     * fills it (a storage entry's after the pickle has run, a numpy array's
     * at once from the pickle's bytes), then drops its reference with
     * storage_release: the views made from it keep it alive. */
    void *(*storage_new)(uint64_t nbytes, unsigned char **data);
    void (*storage_release)(void *storage);
    /* Optional (NULL: storages are always storage_new's): a NEW storage
     * over nbytes of memory at data that the engine has mapped from the
     * file, already holding the entry's bytes; release(data, ctx) runs when
     * the storage is freed (and, if this fails, never). For loads that map
     * (cti_pth_load_mapped_with). */
    void *(*storage_wrap)(unsigned char *data, uint64_t nbytes, void (*release)(void *data, void *ctx), void *ctx);
    /* A NEW tensor leaf viewing `storage` as `dtype` elements from `offset`
     * with these sizes and strides (in elements), which the engine has
     * checked lie inside the storage; requires_grad set when asked (an error
     * for a dtype that cannot have gradients). */
    ct_value *(*view)(void *storage, ct_dtype dtype, int64_t offset, int ndim, const int64_t *size,
                      const int64_t *stride, bool requires_grad);
    /* torch._utils._rebuild_parameter: a NEW leaf on the storage of `leaf`
     * (borrowed), detached from it, with requires_grad as given. */
    ct_value *(*parameter)(const ct_value *leaf, bool requires_grad);

    /* Fills *out for a tensor leaf (borrowed). Returns a status. */
    int (*describe)(const ct_value *leaf, cti_pth_tensor_info *out);
    /* The first byte of the host storage of `leaf`: borrowed, valid while
     * the leaf lives; NULL + error when it cannot be had. */
    const void *(*storage_bytes)(const ct_value *leaf);
    /* Copies n bytes of the storage of `leaf` from byte `pos` into host
     * memory dst (for storages that are not on the CPU). Returns a status. */
    int (*storage_read)(const ct_value *leaf, size_t pos, void *dst, size_t n);
} cti_pth_tensors;

/* ---- pickle opcodes (the subset ctrial writes or reads) ----------------------------- */

enum {
    CT_PKL_MARK = '(', CT_PKL_STOP = '.', CT_PKL_POP = '0', CT_PKL_POP_MARK = '1', CT_PKL_DUP = '2',
    CT_PKL_BINFLOAT = 'G', CT_PKL_BININT = 'J', CT_PKL_BININT1 = 'K', CT_PKL_BININT2 = 'M',
    CT_PKL_NONE = 'N', CT_PKL_BINPERSID = 'Q', CT_PKL_REDUCE = 'R', CT_PKL_BINUNICODE = 'X',
    CT_PKL_EMPTY_LIST = ']', CT_PKL_APPEND = 'a', CT_PKL_BUILD = 'b', CT_PKL_GLOBAL = 'c',
    CT_PKL_DICT = 'd', CT_PKL_APPENDS = 'e', CT_PKL_BINGET = 'h', CT_PKL_LONG_BINGET = 'j',
    CT_PKL_LIST = 'l', CT_PKL_BINPUT = 'q', CT_PKL_LONG_BINPUT = 'r', CT_PKL_SETITEM = 's',
    CT_PKL_TUPLE = 't', CT_PKL_SETITEMS = 'u', CT_PKL_EMPTY_DICT = '}', CT_PKL_EMPTY_TUPLE = ')',
    CT_PKL_PROTO = 0x80, CT_PKL_TUPLE1 = 0x85, CT_PKL_TUPLE2 = 0x86, CT_PKL_TUPLE3 = 0x87,
    CT_PKL_NEWTRUE = 0x88, CT_PKL_NEWFALSE = 0x89, CT_PKL_LONG1 = 0x8a, CT_PKL_LONG4 = 0x8b,
    CT_PKL_SHORT_BINUNICODE = 0x8c, CT_PKL_BINUNICODE8 = 0x8d, CT_PKL_STACK_GLOBAL = 0x93,
    CT_PKL_MEMOIZE = 0x94, CT_PKL_FRAME = 0x95,
    /* read only, for numpy's raw data: */
    CT_PKL_BINBYTES = 'B', CT_PKL_SHORT_BINBYTES = 'C', CT_PKL_BINBYTES8 = 0x8e, CT_PKL_BYTEARRAY8 = 0x96,
};

/* ---- dtypes and strings (pickle_write.c) -------------------------------------------- */

/* "FloatStorage" for CT_F32 ...: the class torch pickles for a storage of
 * that dtype; NULL for a value that is no dtype. */
const char *cti_pth_storage_class(ct_dtype dtype);
/* The dtype of a storage class name ("FloatStorage"); false when unknown. */
bool cti_pth_storage_dtype(const char *name, ct_dtype *out);
/* Whether s[0, n) is well-formed UTF-8 (Python's pickle strings are). */
bool cti_pth_utf8_valid(const unsigned char *s, size_t n);

/* ---- pickling (pickle_write.c) ------------------------------------------------------ */

/* A growable byte buffer; `oom` records a failed growth (the data is then
 * incomplete and the caller reports CT_ENOMEM). */
typedef struct {
    unsigned char *data;
    size_t len, cap;
    bool oom;
} cti_pth_buf;

void cti_pth_buf_put(cti_pth_buf *b, const void *data, size_t n);
void cti_pth_buf_free(cti_pth_buf *b);

/* One storage the pickle refers to; its key is its index as a decimal
 * string ("0", "1", ...), in order of first use, as torch.save numbers them. */
typedef struct {
    const void *id;          /* cti_pth_tensor_info.storage_id */
    const ct_value *leaf;    /* borrowed from the tree: the first tensor seen on it */
    ct_dtype dtype;
    size_t nbytes;
    ct_device device;
    uint32_t key_memo;       /* memo slot of the key string, 0 until written */
} cti_pth_storage;

typedef struct {
    cti_pth_buf pkl;            /* the whole of data.pkl */
    cti_pth_storage *storages;  /* what data/<key> entries hold, by key */
    size_t nstorages;
} cti_pth_pickled;

/* Pickles v as torch.save does (protocol 2, tensors as persistent ids plus
 * torch._utils._rebuild_tensor_v2), describing its tensors with
 * tensors->describe. `what` names the file in messages. Returns a status;
 * on failure *out holds nothing to free. */
int cti_pth_pickle(const ct_value *v, const cti_pth_tensors *tensors, const char *what, cti_pth_pickled *out);
void cti_pth_pickled_free(cti_pth_pickled *p);

/* ---- zip writing (zip_write.c) ------------------------------------------------------ */

typedef struct cti_pth_zw cti_pth_zw;

/* Creates (truncates) path and starts an archive whose entries live in
 * <archive>/. force_zip64 writes every entry's sizes and offsets, and the
 * end records, in their zip64 form (as entries past 4 GiB are): the tests
 * use it to check that readers accept them. New writer or NULL + error. */
cti_pth_zw *cti_pth_zw_open(const char *path, const char *archive, bool force_zip64);
/* A whole small entry <archive>/<name> from memory. */
int cti_pth_zw_entry(cti_pth_zw *w, const char *name, const void *data, size_t n);
/* An entry of `size` bytes whose data follows in cti_pth_zw_data calls and
 * whose CRC-32 cti_pth_zw_end receives. */
int cti_pth_zw_begin(cti_pth_zw *w, const char *name, uint64_t size);
/* Writes data bytes straight to the file (no copy). */
int cti_pth_zw_data(cti_pth_zw *w, const void *data, size_t n);
int cti_pth_zw_end(cti_pth_zw *w, uint32_t crc);
/* Writes the central directory and the end records, fsyncs when asked,
 * closes, fills *sum (may be NULL) and frees w, whatever the outcome. */
int cti_pth_zw_finish(cti_pth_zw *w, bool fsync_file, ct_file_sum *sum);
/* Closes and frees after a failure (the partial file stays). Accepts NULL. */
void cti_pth_zw_abort(cti_pth_zw *w);

/* ---- zip reading (zip_read.c) ------------------------------------------------------- */

/* Where an archive's bytes come from: a file descriptor (read with pread)
 * or, when fd < 0, memory (the fuzzer's inputs). */
typedef struct {
    const char *name; /* the file name, for messages */
    int fd;
    const unsigned char *mem;
    uint64_t size;
} cti_pth_src;

/* Reads exactly n bytes at off into dst. CT_EIO for a failed read,
 * CT_EFORMAT (naming `what`) when the source ends first. */
int cti_pth_src_read(const cti_pth_src *src, uint64_t off, void *dst, size_t n, const char *what);

typedef struct {
    char *name;        /* the full name: "m/data/0" */
    uint64_t offset;   /* the first data byte in the archive */
    uint64_t size;
    uint32_t crc;
} cti_pth_entry;

typedef struct {
    cti_pth_entry *entries; /* central directory order */
    size_t n;
    cti_pth_entry **by_name; /* the same entries sorted by name */
    char *prefix;          /* "m" of "m/data.pkl": the folder of the first entry */
} cti_pth_zip;

/* Reads the end records and the central directory and checks every entry
 * (stored, its local header present and its data inside the archive).
 * Returns a status; on failure z holds nothing to free. */
int cti_pth_zip_open(const cti_pth_src *src, cti_pth_zip *z);
/* The entry <prefix>/<record>, or NULL. Borrowed. */
const cti_pth_entry *cti_pth_zip_find(const cti_pth_zip *z, const char *record);
/* Reads the whole of entry e into dst (e->size bytes) and checks its CRC-32:
 * CT_EFORMAT naming the entry when it differs (a damaged file). */
int cti_pth_zip_read(const cti_pth_src *src, const cti_pth_entry *e, void *dst);
void cti_pth_zip_free(cti_pth_zip *z);

/* ---- unpickling (pickle_read.c) ----------------------------------------------------- */

/* How the unpickler turns a persistent id ('storage', <class>, key,
 * location, numel) into memory: `storage` returns a storage of exactly
 * numel elements of dtype (a handle of `tensors`, borrowed; the same one
 * for every use of a key) or NULL with the error set. The bytes themselves
 * may arrive later: tensors are views (tensors->view), and views share the
 * storage. */
typedef struct {
    void *(*storage)(void *ctx, const char *key, ct_dtype dtype, int64_t numel);
    void *ctx;
    const cti_pth_tensors *tensors; /* view and parameter */
    const char *file;              /* names in messages */
    const char *entry;
} cti_pth_unpickle_env;

/* Runs the pickle p[0, n) with the opcodes and globals torch.save and
 * Python's pickling of state dicts use (numpy arrays and scalars included:
 * arrays become tensors made with env->tensors, scalars numbers); *out
 * receives a NEW tree whose tensors are env->tensors' leaves. Anything else
 * is CT_EFORMAT naming the opcode, global or value and its offset. */
int cti_pth_unpickle(const unsigned char *p, size_t n, const cti_pth_unpickle_env *env, ct_value **out);

/* ---- whole files (save.c, load.c) --------------------------------------------------- */

/* ct_pth_save (ckpt.h) with `tensors` describing and reading the tree's
 * tensors, and the zip64 switch of cti_pth_zw_open. */
/* ckpt.h's ct_pth_save_default_params (module ckpt): fsync off, the
 * archive named after the file. */
ct_pth_save_params cti_pth_save_defaults(void);

int cti_pth_save_with(const char *path, const ct_value *v, const ct_pth_save_params *p, ct_file_sum *sum,
                     bool force_zip64, const cti_pth_tensors *tensors);
/* ct_pth_load (ckpt.h) with `tensors` making the storages and the tensors. */
int cti_pth_load_with(const char *path, const cti_pth_tensors *tensors, ct_value **out);
/* The same, but each storage of CTI_PTH_MAP_MIN bytes or more is the
 * file's own bytes mapped into memory copy-on-write (MAP_PRIVATE), as
 * torch.load(mmap=True) does, where tensors->storage_wrap is given: its
 * pages are the kernel's page cache until a tensor writes them (a write
 * copies the page; the file never changes), so a load holds no second
 * copy of the file in the process's own memory. Every CRC is still
 * checked before it returns. The file must not shrink while a tensor
 * from it lives (its pages would be gone: SIGBUS); a checkpoint's files
 * never change. Smaller storages, and any that cannot be mapped (a file
 * system without mmap), are read as cti_pth_load_with does. */
int cti_pth_load_mapped_with(const char *path, const cti_pth_tensors *tensors, ct_value **out);
enum { CTI_PTH_MAP_MIN = 1 << 20 };
/* The same of an archive in memory; `name` names it in messages. */
int cti_pth_load_buffer_with(const void *data, size_t size, const char *name, const cti_pth_tensors *tensors,
                            ct_value **out);

#endif
