/*
 * ctrial/data.h — datasets, samplers, batches and the threaded loader.
 *
 * The pieces mirror torch.utils.data and Determined's samplers:
 *
 *     dataset  -> sampler chain -> workers (get + collate) -> batch
 *
 *     ct_dataset *train = ct_dataset_mnist("data/train-images-idx3-ubyte.gz",
 *                                          "data/train-labels-idx1-ubyte.gz");
 *     ct_loader_opts o = ct_loader_defaults();
 *     o.batch_size = 64;
 *     o.shuffle = true;            // Determined's reproducible shuffle
 *     o.seed = 42;
 *     o.num_workers = 2;
 *     ct_loader *loader = ct_loader_new(train, &o);   // takes the dataset
 *     ct_value *batch;
 *     while (ct_loader_next(loader, &batch) == 1) {     // one pass
 *         ct_tensor *x = ct_batch_at(batch, 0);        // [64, 1, 28, 28]
 *         ct_tensor *y = ct_batch_at(batch, 1);        // [64]
 *         ...
 *         ct_value_free(batch);
 *     }
 *     ct_loader_free(loader);
 *
 * Samples and batches are ct_value trees (value.h): a tensor, a tuple/list,
 * a dict, or any nesting of these, as in PyTorch. Collating stacks samples
 * leaf by leaf, exactly as torch's default_collate does.
 *
 * Order. The loader's output is deterministic: the same seed, position and
 * options give the same batches in the same order whatever the number of
 * workers. Its position (batches served) can be saved and restored, so a
 * resumed run sees exactly the batches an uninterrupted run would have seen
 * -- except over an iterable dataset (ct_loader_iterable), whose positions
 * replay the user's iterator and are exact only when it is deterministic.
 *
 * Errors never hang: a failing dataset item reaches ct_loader_next() as an
 * error naming the item index (and the worker's message).
 */
#ifndef CTRIAL_DATA_H
#define CTRIAL_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== datasets ============================================================ */

typedef struct ct_dataset ct_dataset;

/* A map-style dataset (torch.utils.data.Dataset). `get` and `get_batch` are
 * called from the loader's worker threads, several at once: they must be
 * safe to call concurrently and must not touch other user state. */
typedef struct {
    /* Number of samples (>= 0). Called once, by ct_dataset_new. */
    int64_t (*len)(void *self);
    /* The sample at `index` (0 <= index < len) as a NEW value, or NULL with
     * ct_set_error() on failure. */
    ct_value *(*get)(void *self, int64_t index);
    /* Optional fast path (NULL: use get + collate): the already collated
     * batch of `n` samples at `indices`, laid out as collating get()'s
     * results would be. NEW value or NULL + error. */
    ct_value *(*get_batch)(void *self, const int64_t *indices, int64_t n);
    /* Frees self when the dataset's last reference goes (may be NULL). */
    void (*free)(void *self);
} ct_dataset_vtable;

/* A dataset over user code. The vtable is copied. Returns a new dataset (one
 * reference); on failure vt->free is never called. */
CT_API ct_dataset *ct_dataset_new(const ct_dataset_vtable *vt, void *self);
/* Datasets are reference-counted (thread-safe): ct_dataset_ref adds a
 * reference and returns d; ct_dataset_free drops one (accepts NULL). */
CT_API ct_dataset *ct_dataset_ref(ct_dataset *d);
CT_API void ct_dataset_free(ct_dataset *d);
CT_API int64_t ct_dataset_len(const ct_dataset *d);
/* The sample at index as a NEW value; CT_EINDEX for an index out of range. */
CT_API ct_value *ct_dataset_get(ct_dataset *d, int64_t index);
/* The `n` (> 0) samples at `indices` collated into one batch, as a NEW
 * value: the dataset's get_batch when it has one, else ct_collate() of its
 * get() results (the loader's path when it has no user collate). CT_EINDEX
 * for an index out of range. Safe to call from several threads at once. */
CT_API ct_value *ct_dataset_get_batch(ct_dataset *d, const int64_t *indices, int64_t n);

/* torch.utils.data.TensorDataset: sample i is the tuple (t0[i], t1[i], ...)
 * (a plain tensor when n == 1), views into the tensors as in torch. All
 * tensors must have the same size(0). The dataset keeps its own references
 * to the tensors. New dataset. */
CT_API ct_dataset *ct_dataset_tensors(int n, ct_tensor *const *tensors);

/* ---- dataset tools: Subset, ConcatDataset, random_split, mean/std ---- */

/* torch.utils.data.Subset: sample i is d's sample indices[i]. The indices
 * are copied and checked now: one outside [0, len(d)) is CT_EINDEX naming
 * its position, the index and d's length (torch's negative indices are
 * refused). get_batch passes the mapped indices to d's get_batch. The
 * subset keeps its own reference to d: the caller's reference is neither
 * taken nor dropped, whether the call succeeds or fails. n == 0 gives an
 * empty dataset. New dataset, or NULL + error. */
CT_API ct_dataset *ct_dataset_subset(ct_dataset *d, const int64_t *indices, int64_t n);
/* torch.utils.data.ConcatDataset: the samples of datasets[0], then of
 * datasets[1], ... (n >= 1; a source is found by bisecting the cumulative
 * sizes, as torch does). It keeps its own reference to each dataset (the
 * caller's are neither taken nor dropped, on success or failure). A batch
 * whose indices all fall in one source is that source's get_batch; a
 * batch that mixes sources is fetched per source and its rows put back in
 * order when every part is a tree of CPU tensors of one dtype and row
 * shape, else it is get + ct_collate: either way it equals what collating
 * the samples gives. New dataset, or NULL + error. */
CT_API ct_dataset *ct_dataset_concat(int n, ct_dataset *const *datasets);
/* torch.utils.data.random_split(d, lengths,
 * generator=torch.Generator().manual_seed(seed)): writes n NEW subsets of d
 * to out[0..n-1] (the caller frees each), split i taking the next
 * lengths[i] indices of ct_randperm_seeded(len(d), seed) -- the same
 * indices as torch's. The lengths must be >= 0 and sum to len(d)
 * (CT_EINVAL naming the sum and the length; torch lets negative ones
 * through). d is not taken: each subset holds its own reference. Returns
 * 0, or a negative code with every out[i] NULL. */
CT_API int ct_dataset_random_split(ct_dataset *d, int n, const int64_t *lengths, uint64_t seed,
                                   ct_dataset **out);
/* The same with fractions, as torch computes the lengths from them: each
 * floor(len(d) * fractions[i]), then the remainder added one at a time,
 * round-robin from split 0. Each fraction must be in [0, 1] and their sum
 * close to 1 (math.isclose, relative 1e-9) and not above it, the sum taken
 * as Python 3.12's sum() takes it (compensated; torch under Python 3.11,
 * which adds left to right, refuses e.g. 0.1, 0.2, 0.7 whose plain sum is
 * 1.0000000000000002). CT_EINVAL naming the fraction or the sum. */
CT_API int ct_dataset_random_split_fractions(ct_dataset *d, int n, const double *fractions,
                                             uint64_t seed, ct_dataset **out);
/* Mean and standard deviation of field `field` of every sample (the
 * field-th element of a tuple/list sample; 0 for a sample that is a plain
 * tensor), per channel, in float64: with channel_dim >= 0 (a dim of the
 * sample, e.g. 0 for images [C, H, W]), NEW float64 tensors [C] of each
 * channel's mean and population std over all its elements in all samples
 * -- x.double().mean(dims) and x.double().std(dims, correction=0) over the
 * stacked samples, every dim but the channel's (numpy's std, ddof=0; not
 * the mean of per-image stds some scripts compute); with channel_dim == -1
 * one mean and one std over every element, as 0-dim tensors. Reads the
 * dataset once through get_batch, in batches of about 16 MiB of float64,
 * combining batches with Chan et al.'s update: memory stays bounded.
 * Returns 0, or a negative code with *mean and *std NULL (an empty
 * dataset, a field or channel_dim out of range, samples whose dims or
 * channel count differ). */
CT_API int ct_dataset_mean_std(ct_dataset *d, int field, int channel_dim, ct_tensor **mean,
                               ct_tensor **std);

/* ---- per-record transforms ---------------------------------------------- */

/* A per-record transform: the sample (BORROWED) into a NEW value, or NULL +
 * ct_set_error(). rng is the record's own generator: draw every random
 * parameter from it (never from the default generator or rand()), and the
 * record's augmentation is fixed by (seed, epoch, index) alone. Called
 * from the loader's worker threads, several at once. */
typedef ct_value *(*ct_map_fn)(const ct_value *sample, ct_rng *rng, void *ctx);

/* torchvision's `transform=` / a Dataset whose __getitem__ transforms: d's
 * sample i is fn(sample, rng) with rng = ct_rng_new(ct_record_seed(seed,
 * epoch, i)), where i is the index the loader asks for (of this dataset,
 * or of a Subset or ConcatDataset over it), epoch the pass of the loader's
 * stream the record belongs to (see ct_loader_opts.seed), and seed the
 * loader's seed. Outside a loader (ct_dataset_get, ct_dataset_get_batch)
 * epoch and seed are 0; ct_dataset_get_drawn names them. ctx_free (may be
 * NULL) frees ctx with the dataset, and also when this call fails. d is
 * not taken: the new dataset holds its own reference (a NULL d, from a
 * constructor that failed, keeps that failure's message). Its get_batch is
 * get + collate. New dataset, or NULL + error. */
CT_API ct_dataset *ct_dataset_map(ct_dataset *d, ct_map_fn fn, void *ctx, void (*ctx_free)(void *));
/* The seed of record `index` in pass `epoch` of a loader seeded `seed`
 * (a pure function, documented so that Python can compute it):
 *     h = splitmix64(seed); h = splitmix64(h ^ epoch); h = splitmix64(h ^ index)
 *     return h >> 1
 * where splitmix64(x) adds 0x9E3779B97F4A7C15 (mod 2^64), then
 * z ^= z >> 30, z *= 0xBF58476D1CE4E5B9, z ^= z >> 27,
 * z *= 0x94D049BB133111EB, z ^= z >> 31. */
CT_API uint64_t ct_record_seed(uint64_t seed, int64_t epoch, int64_t index);
/* The sample at index as a loader seeded `seed` gives it in pass `epoch`:
 * NEW value, or NULL + error. */
CT_API ct_value *ct_dataset_get_drawn(ct_dataset *d, int64_t index, uint64_t seed, int64_t epoch);

/* ---- end of dataset tools ---------------------------------------------- */

/* MNIST as torchvision's MNIST + ToTensor() gives it: sample i is the tuple
 * (image float32 [1, H, W] in 0..1, label int64 0-dim). Reads both IDX
 * files (plain or .gz) at creation and checks they agree. New dataset. */
CT_API ct_dataset *ct_dataset_mnist(const char *images_path, const char *labels_path);

/* Reads any IDX file (MNIST's format: plain or gzip-compressed; type codes
 * 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E
 * float64; big-endian values) into a NEW tensor of the header's shape. The
 * header is checked against the data size: a truncated file, trailing bytes,
 * a wrong magic or an unknown type code are CT_EFORMAT errors naming the file. */
CT_API ct_tensor *ct_idx_read(const char *path);
/* The same from a buffer holding a whole (uncompressed) IDX file; `name`
 * appears in messages. */
CT_API ct_tensor *ct_idx_parse(const void *data, size_t size, const char *name);

/* A binary file of fixed-size records, held open and read record by
 * record (a file cut short while in use is CT_EIO naming it): after
 * `header_bytes`, each record is the fields in order, each `dtype` of
 * `shape` (little-endian, packed; a big-endian host refuses multi-byte
 * fields with CT_ENOTSUP). Sample i is the tuple of field tensors (a plain
 * tensor when there is one field). Example, CIFAR-10's binary files:
 * fields {uint8 []} (the label) and {uint8 [3, 32, 32]}. */
#define CT_RECORD_MAX_FIELDS 8
typedef struct {
    ct_dtype dtype;
    int ndim;          /* 0..4; 0 is a scalar */
    int64_t shape[4];
} ct_record_field;

typedef struct {
    size_t header_bytes;  /* skipped at the start of the file (0) */
    int num_fields;       /* 1..CT_RECORD_MAX_FIELDS */
    ct_record_field fields[CT_RECORD_MAX_FIELDS];
} ct_records_opts;

/* New dataset; CT_EFORMAT when the file size minus the header is not a
 * whole number of records. */
CT_API ct_dataset *ct_dataset_records(const char *path, const ct_records_opts *o);

/* A CSV/TSV file of numbers, parsed at creation. Sample i is the tuple
 * (features [num_columns - 1] of `dtype`, label int64 0-dim) when
 * label_column >= 0, else the features [num_columns] alone. Values are read
 * as strtod reads them in the "C" locale, whatever the program's locale (the
 * library never calls setlocale); integer dtypes and labels take integral
 * values only. Blanks around values are allowed, empty fields are not; lines
 * end in "\n" or "\r\n"; blank lines are skipped; the header line is
 * skipped unread; every row has the same number of columns.
 *
 * Non-finite features ("nan", "inf", "-Infinity", a number beyond double
 * such as "1e999", one beyond a narrower float dtype such as "1e39" for
 * float32) become NaN and +-inf in the tensor unless finite_only is set;
 * then each is a CT_EFORMAT error: "f.csv:3:2: 'nan' is not finite",
 * "f.csv:4:1: '1e39' is out of range for float32". Labels are not checked
 * against a class count unless num_classes is set, so a negative label
 * (cross_entropy's ignore_index, -100) passes; with num_classes > 0 every
 * label must be in [0, num_classes): "f.csv:5:3: '7' is out of range [0, 2)
 * for num_classes 2". */
typedef struct {
    char delimiter;      /* ',' or '\t'; 0: '\t' for *.tsv, else ',' */
    bool header;         /* the first line names the columns (false) */
    int label_column;    /* column holding an integer class label; -1: none (-1) */
    ct_dtype dtype;      /* features' dtype (CT_F32) */
    bool finite_only;    /* refuse features that are, or narrow to, NaN or +-inf (false) */
    int64_t num_classes; /* > 0: labels must be in [0, num_classes), and label_column
                          * must be set; 0: labels unchecked (0) */
} ct_csv_opts;

CT_API ct_csv_opts ct_csv_defaults(void);
/* New dataset; CT_EFORMAT names the file, line and column of a bad value or a
 * row of the wrong length. The same parse from a buffer: ct_csv_parse. */
CT_API ct_dataset *ct_dataset_csv(const char *path, const ct_csv_opts *o);
CT_API ct_dataset *ct_csv_parse(const char *text, size_t len, const char *name, const ct_csv_opts *o);

/* ==== token shards (llm.c's .bin files) =================================== */

/*
 * karpathy/llm.c's tokenised shards as a dataset of token windows. A shard
 * is a header of 256 little-endian int32 (magic, version, number of tokens,
 * then zeros) and the tokens: magic 20240520 / version 1 with uint16 tokens
 * (GPT-2's; what dev/data/data_common.py's write_datafile writes by
 * default), or magic 20240801 / version 7 with uint32 tokens (its
 * "llama-3" variant). Anything else is refused (CT_EFORMAT naming the file:
 * another magic, llm.c's eval files (20240522), another version).
 *
 *     const char *train[] = {"data/shakespeare_train_*.bin"};
 *     ct_shards_opts so = ct_shards_defaults();
 *     so.block_size = 1024;                         // T
 *     so.vocab_size = 50257;                        // optional check
 *     ct_dataset *d = ct_dataset_shards(train, 1, &so);
 *     // item i: (x, y), int64 [T] each, y = x shifted by one token
 *
 * Each file is opened once and held open (one descriptor a shard; the soft
 * limit on open files is raised to the hard one when an open runs out),
 * never read whole; each header is checked against its file's size at
 * creation, and windows are read with pread(2): a shard cut short while in
 * use (llm.c's writer reopens it "wb") fails the batch with CT_EIO naming
 * it, where a mapping would kill the process with SIGBUS. Item i is a window of one
 * shard: x = tokens[o : o+T], y = tokens[o+1 : o+T+1]. Windows never cross
 * a shard's end (as llm.c's loader); the items are shard 0's windows, then
 * shard 1's, ... With CT_WINDOWS_RANDOM every offset is an item (stride 1,
 * num_tokens - T windows per shard): shuffle in the loader, whose order,
 * resume and sharding across ranks then apply. CT_WINDOWS_SEQUENTIAL takes
 * non-overlapping windows (stride T, (num_tokens - 1) / T per shard), for
 * validation. Sharding across ranks is the loader's (rank, world_size).
 * A shuffled loader holds a permutation of its items, 8 bytes each: random
 * windows over N tokens cost 8N bytes; beyond ~10^8 tokens shuffle
 * sequential windows instead (llm.c's own order).
 */
typedef enum {
    CT_WINDOWS_RANDOM = 0,     /* every offset: stride 1 (shuffle in the loader) */
    CT_WINDOWS_SEQUENTIAL = 1, /* non-overlapping: stride block_size */
} ct_window_mode;

typedef struct {
    int64_t block_size;     /* T, tokens per window: required, >= 1 (0) */
    ct_window_mode windows; /* (CT_WINDOWS_RANDOM) */
    /* > 0: every token of a window read must be below it, checked as the
     * window is read (not at creation: that would be a pass over all the
     * data); a token beyond is a CT_EFORMAT error of that batch naming the
     * file and the token's offset. 0: unchecked (0) */
    int64_t vocab_size;
} ct_shards_opts;

CT_API ct_shards_opts ct_shards_defaults(void);
/* A dataset over the shards `paths` (n >= 1): each a file, or a glob(3)
 * pattern (holding * ? or [) whose files are taken sorted by strcmp (llm.c
 * globs and sorts); entries in the order given. Errors, each naming the
 * file or pattern: a pattern matching nothing (CT_EIO), a missing or
 * irregular file (CT_EIO), a file shorter than the header, a bad magic or
 * version, a token count that disagrees with the file's size (truncated or
 * with trailing bytes), a shard too short for one window of block_size + 1
 * tokens (CT_EFORMAT). New dataset. */
CT_API ct_dataset *ct_dataset_shards(const char *const *paths, int n, const ct_shards_opts *o);
/* Writes `n` tokens as an llm.c shard at `path` (replacing it):
 * token_bytes 2 (magic 20240520, version 1, uint16; a token above 65535 is
 * CT_EINVAL) or 4 (magic 20240801, version 7, uint32); 0 <= n < 2^31
 * (llm.c's limit). The file is written beside path and renamed over it
 * once complete, so a failed write leaves what was at path untouched. 0 or
 * a code. */
CT_API int ct_shard_write(const char *path, const uint32_t *tokens, int64_t n, int token_bytes);

/* ==== batches ============================================================= */

/* Borrowed tensors of a batch (or sample): the i-th element of a tuple/list,
 * the value under `key` of a dict, or the batch itself when it is a tensor.
 * NULL + error (naming what the batch holds) otherwise. */
CT_API ct_tensor *ct_batch_at(const ct_value *batch, size_t i);
CT_API ct_tensor *ct_batch_get(const ct_value *batch, const char *key);
CT_API ct_tensor *ct_batch_tensor(const ct_value *batch);

/* Number of records: size(0) of the first tensor leaf (Determined's default
 * get_batch_length); -1 + error when the batch holds no tensor. */
CT_API int64_t ct_batch_length(const ct_value *batch);

/* default_collate: `n` samples of the same structure into one batch. Tensor
 * leaves are stacked along a new dim 0 (shapes and dtypes must agree); int
 * leaves become an int64 tensor, float leaves a float64 tensor, bool leaves a
 * bool tensor; strings become a list; dicts and tuples/lists collate
 * element-wise. Returns a NEW value or NULL + error naming the sample whose
 * structure, shape or dtype differs. */
CT_API ct_value *ct_collate(ct_value *const *samples, int64_t n);

/* A user collate: like ct_collate. Called from worker threads. */
typedef ct_value *(*ct_collate_fn)(ct_value *const *samples, int64_t n, void *ctx);

/* Determined's pytorch.to_device: a NEW copy of the tree in which every
 * tensor leaf is ct_to_device(leaf, device, non_blocking) and everything
 * else (numbers, strings, None; dicts, lists and tuples with their keys and
 * order) is copied. A leaf already on `device` becomes a new reference to
 * the same tensor, as torch's .to() returns self. NULL + error when a move
 * fails (nothing is leaked) or v is NULL (a NULL from a failed call keeps
 * that call's error). */
CT_API ct_value *ct_value_to_device(const ct_value *v, ct_device device, bool non_blocking);

/* ==== samplers ============================================================ */

/*
 * A sampler is an iterator over items, each item a run of indices: an index
 * sampler yields one index per item, a batch sampler a batch of indices.
 * Samplers compose like Determined's: each wrapper takes ownership of the
 * sampler it wraps.
 *
 *     ct_sampler *s = ct_sampler_shuffle(n, seed);   // a new order per pass
 *     s = ct_sampler_repeat(s);                      // forever
 *     s = ct_sampler_shard(s, rank, world_size);     // every world_size-th
 *     s = ct_sampler_batch(s, 32, false);            // runs of 32
 *     s = ct_sampler_skip(s, batches_trained);       // resume
 *
 * ct_sampler_next() writes the next item's indices and returns their count,
 * 0 at the end of a pass (never for a repeating chain), or a negative code.
 * After the end of a pass, the next call starts a new pass (a shuffle draws
 * a new permutation then, from its one generator).
 */
typedef struct ct_sampler ct_sampler;

/* 0, 1, ..., n-1. */
CT_API ct_sampler *ct_sampler_sequential(int64_t n);
/* A permutation of 0..n-1 per pass, drawn with numpy's legacy
 * RandomState(seed).shuffle (MT19937): the same order as Determined's
 * ReproducibleShuffleSampler for the same seed (seed < 2^32). */
CT_API ct_sampler *ct_sampler_shuffle(int64_t n, uint64_t seed);
/* The inner sampler's passes back to back, forever. */
CT_API ct_sampler *ct_sampler_repeat(ct_sampler *inner);
/* Items number k with k % world_size == rank (no padding, no dropping): a
 * pass of L items gives rank r L/n + (L%n > r) items. */
CT_API ct_sampler *ct_sampler_shard(ct_sampler *inner, int rank, int world_size);
/* Runs of batch_size items' indices; the last short run of a pass is dropped
 * when drop_last (only at the end of a pass: a repeating inner sampler
 * never ends one). */
CT_API ct_sampler *ct_sampler_batch(ct_sampler *inner, int64_t batch_size, bool drop_last);
/* Skips the first `count` items of the whole stream (not of each pass). */
CT_API ct_sampler *ct_sampler_skip(ct_sampler *inner, int64_t count);

/* Items per pass, as Python's len() of the equivalent sampler: n for
 * sequential and shuffle; repeat: its inner's (one pass, as Determined's
 * RepeatSampler.__len__); shard: L/world_size + (L%world_size > rank) for
 * an inner length L; batch: drop_last ? L/batch_size : ceil(L/batch_size);
 * skip: its inner's (a skip moves the start, as SkipBatchSampler.__len__).
 * CT_EINVAL for NULL. */
CT_API int64_t ct_sampler_len(const ct_sampler *s);
/* Writes the next item (at most `cap` indices) to out; returns its count, 0
 * at the end of a pass, CT_EINVAL when cap is too small. */
CT_API int64_t ct_sampler_next(ct_sampler *s, int64_t *out, int64_t cap);
/* Largest item this sampler yields (1, or the batch size). */
CT_API int64_t ct_sampler_max_item(const ct_sampler *s);
CT_API void ct_sampler_free(ct_sampler *s); /* the whole chain; accepts NULL */

/* ==== the loader ========================================================== */

typedef struct ct_loader ct_loader;

/* Made by ct_loader_defaults(), which sets `size` (the struct carries it,
 * as ct_fit_opts does: docs/design.md, "A stable ABI"). */
typedef struct {
    uint32_t size;            /* sizeof(ct_loader_opts) where it was made: never set by hand */
    int64_t batch_size;       /* per-rank batch size (1) */
    bool shuffle;             /* reproducible shuffle each pass (false) */
    /* The shuffle's seed, and the seed of every record's random draws
     * (ct_dataset_map): record i of pass p draws from ct_record_seed(seed,
     * p, i). The pass: in training mode, record k of the stream of all
     * ranks (k = (batch * batch_size + j) * world_size + rank) is in pass
     * k / len(dataset), so every record is drawn once per pass whatever
     * the ranks; otherwise, and over a user sampler, batch / ct_loader_len.
     * (0) */
    uint64_t seed;
    /* Drop a pass's last short batch (false). In training mode no pass
     * ends, so no batch is short: drop_last only shortens ct_loader_len,
     * the epoch length. */
    bool drop_last;
    /* Training mode: the chain of Determined's user guide (its recipe for a
     * loader of your own), shuffle -> repeat -> shard -> batch ->
     * skip(skip_batches) -- not det.pytorch.DataLoader's internal chain,
     * which batches before it repeats and shards. Batches run on across
     * pass ends (every batch is full), the loader never ends a pass, and
     * epochs are counted by ct_loader_len batches. Otherwise one pass per
     * ct_loader_reset (validation: shuffle -> shard -> batch). (false) */
    bool repeat;
    int64_t skip_batches;     /* batches already served (resume) (0) */
    int rank, world_size;     /* sharding (0, 1) */
    int num_workers;          /* 0: load in the calling thread (0) */
    int prefetch_batches;     /* batches loaded ahead, all workers (2 per worker) */
    bool pin_memory;          /* page-locked batches (needs CUDA) (false) */
    ct_device device;         /* batches arrive here, non-blocking when pinned (cpu) */
    ct_collate_fn collate;    /* NULL: ct_collate */
    void *collate_ctx;
    /* Opt-out: the user's own chain (the loader takes it); batch_size,
     * shuffle, repeat, shard and skip options are then ignored, and each item
     * of this sampler is one batch. ct_loader_len is ct_sampler_len of the
     * chain. A chain that does not repeat ends its passes: ct_loader_next
     * answers 0 and ct_loader_reset starts the next pass (the training loop
     * does so, an epoch per pass). (NULL) */
    ct_sampler *sampler;
} ct_loader_opts;

/* Fills the first `size` bytes of *o with the defaults noted above and sets
 * o->size; ct_loader_defaults() calls it with this program's sizeof. */
CT_API void ct_loader_opts_init(ct_loader_opts *o, size_t size);
static inline ct_loader_opts ct_loader_defaults(void) {
    ct_loader_opts o;
    ct_loader_opts_init(&o, sizeof o);
    return o;
}

/* A loader over `dataset` (it takes the caller's reference: use
 * ct_dataset_ref to keep one). Starts its workers. New loader, or NULL +
 * error (empty dataset, bad options); on failure the dataset reference is
 * still taken (dropped). */
CT_API ct_loader *ct_loader_new(ct_dataset *dataset, const ct_loader_opts *o);
/* The next batch: returns 1 and a NEW value in *batch, 0 at the end of a
 * pass (never in repeat mode), or a negative code with an error naming the
 * failing item. After an error the loader is stopped: free it. */
CT_API int ct_loader_next(ct_loader *l, ct_value **batch);
/* Starts the next pass (after ct_loader_next returned 0, or to restart
 * early: the rest of the pass then counts as passed). The position keeps
 * counting: it names one point in the passes back to back. A no-op in
 * training mode and before the pass has begun. */
CT_API int ct_loader_reset(ct_loader *l);
/* Batches per pass of this rank (len(DataLoader)); the epoch length. Over a
 * user sampler, ct_sampler_len of it. -1 for an iterable loader, whose
 * length is unknown: that is not an error (no error is set; -1 is also
 * CT_EINVAL, which only a NULL loader gets, with an error). */
CT_API int64_t ct_loader_len(const ct_loader *l);
/* Samples in the dataset; -1 for an iterable loader (unknown, no error). */
CT_API int64_t ct_loader_num_samples(const ct_loader *l);
/* Batches handed out since the chain started, skip_batches included: the
 * position to save. */
CT_API int64_t ct_loader_position(const ct_loader *l);
/* Moves to a saved position: the next batch is the one an uninterrupted
 * loader would have served after `batches_served` batches. The built-in
 * chain is rebuilt there; a user sampler only moves forward (draws and
 * discards, across its pass ends; CT_ENOTSUP backwards); an iterable
 * loader replays its iterator (exact only if the iterator is). */
CT_API int ct_loader_set_position(ct_loader *l, int64_t batches_served);
/* Seconds ct_loader_next has spent waiting for workers so far. */
CT_API double ct_loader_wait_seconds(const ct_loader *l);
/* Stops and joins the workers, frees queued batches, drops the dataset.
 * Safe at any point, including mid-pass and after an error. Accepts NULL. */
CT_API void ct_loader_free(ct_loader *l);

/* ==== data without random access ========================================= */

/*
 * An iterable dataset (torch's IterableDataset): records come one after the
 * other from user code that cannot fetch record i directly (a stream, a
 * file read front to back, a generator).
 *
 *     ct_loader_opts o = ct_loader_defaults();
 *     o.batch_size = 32;
 *     ct_loader *l = ct_loader_iterable(&(ct_iterable_vtable){
 *         .reset = lines_rewind, .next = lines_next, .free = lines_close}, lines, &o);
 *
 * What the loader does with it:
 *   - It calls the functions on the thread that calls ct_loader_* (the
 *     iterator has one state): reset() before every pass, the first one
 *     included, then next() until it reports the end of the pass. There
 *     are no worker threads (num_workers and prefetch_batches are ignored):
 *     records are read, collated (o.collate, else ct_collate), pinned and
 *     moved to o.device inside ct_loader_next.
 *   - Under ranks, rank r takes the records k with k % world_size == r
 *     and drops the others (o.rank, o.world_size).
 *   - One-pass mode (o.repeat false; validation): records k counted from 0
 *     in each pass; batch_size records per batch, the pass's last short
 *     batch dropped when drop_last; ct_loader_next answers 0 at the end of
 *     the pass and ct_loader_reset starts the next one.
 *   - Training mode (o.repeat, or the training loop's hook): the passes
 *     back to back, as repeat -> shard -> batch: at the end of a pass the
 *     loader calls reset() and reads on, k keeps counting and batches run
 *     across pass ends; ct_loader_next never answers 0. A pass with no
 *     record is an error.
 *   - Its length is unknown: ct_loader_len and ct_loader_num_samples
 *     return -1 (not an error). Epochs cannot be counted over it.
 *   - Positions: ct_loader_position counts batches as for any loader, and
 *     ct_loader_set_position (and o.skip_batches at creation) replays from
 *     the beginning: reset(), then reads and drops records until that many
 *     batches have passed (crossing pass ends as an uninterrupted loader
 *     reset at each one would). A replay reads everything before the
 *     position again, and it lands on the same batch only when the
 *     iterator gives the same records in the same order after every
 *     reset(). ctrial cannot check that: THIS LOADER GIVES UP CTRIAL'S
 *     GUARANTEE OF AN EXACT RESUME. This is Determined's IterableDataset
 *     with context.experimental.disable_dataset_reproducibility_checks():
 *     the trial must opt out of those checks to train with it. A position
 *     that a one-pass rank cannot reach (its passes give it no batch) is
 *     CT_EINVAL.
 *   - A reset in the middle of a one-pass pass counts the rest of the pass
 *     as passed: it reads the pass to its end first (records dropped), so
 *     that positions stay one stream.
 *   - A failing reset(), next() or collate stops the loader (CT_ESTATE
 *     afterwards: free it); the message names the record and the pass,
 *     both counted from 0 since the last replay.
 */
typedef struct {
    /* Starts from the beginning (a new pass): 0, or a negative CT_E* code
     * with ct_set_error(). */
    int (*reset)(void *self);
    /* The next record of the pass as a NEW value (a sample, as a dataset's
     * get() returns one); NULL with no error set at the end of the pass
     * (the loader clears the error state before each call); NULL with
     * ct_set_error() on failure. */
    ct_value *(*next)(void *self);
    /* Frees self when the loader is freed (may be NULL). */
    void (*free)(void *self);
} ct_iterable_vtable;

/* A loader over an iterable dataset (see above); the vtable is copied. Of
 * the options it uses batch_size, drop_last, repeat, rank and world_size,
 * skip_batches, collate and collate_ctx, pin_memory and device; shuffle
 * and sampler are refused (CT_EINVAL: the order is the iterator's); the
 * others are ignored. It takes `self` like ct_loader_new takes a dataset:
 * even on failure, vt->free(self) is called (when vt and vt->free are
 * given). Calls vt->reset (and, with skip_batches, replays) before it
 * returns. New loader, or NULL + error. */
CT_API ct_loader *ct_loader_iterable(const ct_iterable_vtable *vt, void *self, const ct_loader_opts *o);

#ifdef __cplusplus
}
#endif
#endif
