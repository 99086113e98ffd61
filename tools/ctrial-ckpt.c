/* tools/ctrial-ckpt.c — look inside checkpoints and PyTorch files.
 *
 *     ctrial-ckpt list   OUTPUT_DIR     a run's checkpoints, one a line, in training order
 *     ctrial-ckpt list   CHECKPOINTS    the same for its checkpoints/ folder
 *     ctrial-ckpt list   CKPT_DIR       metadata, then every key with its dtype and shape
 *     ctrial-ckpt list   FILE.pth       every key with its dtype and shape
 *     ctrial-ckpt verify DIR            checks metadata.json's and every file's CRC-32 (exit 0 if good)
 *     ctrial-ckpt latest CHECKPOINT_DIR prints the latest committed checkpoint (commit order)
 *     ctrial-ckpt best   CHECKPOINT_DIR prints the best by the run's searcher metric, and its value
 *     ctrial-ckpt list   SEARCH_DIR     each trial's checkpoints (a search's folder: trials/<id>)
 *
 * Each also takes a store's URL in place of a folder (checkpoint_storage
 * type s3): s3://BUCKET/PREFIX for the checkpoints there (list, latest,
 * best; only metadata.json files are read), s3://BUCKET/PREFIX/ckpt-... for
 * one (list, verify: downloaded into a temporary folder, removed after).
 * Credentials and the endpoint are the library's (ctrial/ckpt.h, Part 3:
 * the AWS_* variables as boto3 reads them); --endpoint-url URL sets
 * AWS_ENDPOINT_URL_S3. Only committed checkpoints count, as a resume
 * decides; an upload cut off (no metadata.json) is no checkpoint and is not
 * listed. Nothing in the store is changed.
 *
 * Listing a run (docs/api/ckpt.md, "ctrial-ckpt"): two '#' lines (the
 * folder and counts, then the column names), then per checkpoint
 *
 *     NAME  BATCHES  EPOCHS  METRIC  [best] [latest]
 *
 * with "-" for a value it lacks. A ckpt-* directory whose metadata.json
 * is missing, unreadable or invalid (its CRC-32 included) is listed as
 * "damaged: <why>" (exit 1); a .tmp-* directory (a checkpoint being
 * written, or one a crash left) as "uncommitted". Both come last, by name.
 * When a damaged one may be the latest, no line is marked latest and
 * stderr says why (as --resume latest refuses it).
 *
 * Exit codes: 0 good, 1 a bad or unreadable checkpoint, 2 bad usage. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctrial/ctrial.h>

#include "base/json_write.h" /* cti_float_repr: compiled into the tool, the library hides it */

static void print_value(const char *path, const ct_value *v);

/* One line per leaf: "path  float32 [128, 64]" or "path  0.001". */
static void print_leaf(const char *path, const ct_value *v) {
    switch (ct_value_kind_of(v)) {
    case CT_VALUE_TENSOR: {
        char desc[256];
        ct_describe(ct_value_get_tensor(v), desc, sizeof desc);
        printf("%-60s tensor %s\n", path, desc);
        break;
    }
    case CT_VALUE_NONE: printf("%-60s None\n", path); break;
    case CT_VALUE_BOOL: {
        bool b = false;
        ct_value_get_bool(v, &b);
        printf("%-60s %s\n", path, b ? "True" : "False");
        break;
    }
    case CT_VALUE_INT: {
        int64_t i = 0;
        ct_value_get_int(v, &i);
        printf("%-60s %lld\n", path, (long long)i);
        break;
    }
    case CT_VALUE_FLOAT: {
        double d = 0;
        char num[CTI_FLOAT_REPR_LEN];
        ct_value_get_float(v, &d);
        printf("%-60s %s\n", path, cti_float_repr(d, num));
        break;
    }
    case CT_VALUE_STR: printf("%-60s '%s'\n", path, ct_value_get_str(v)); break;
    default: printf("%-60s empty %s\n", path, ct_value_kind_name(ct_value_kind_of(v))); break;
    }
}

static void print_value(const char *path, const ct_value *v) {
    ct_value_kind k = ct_value_kind_of(v);
    size_t n = ct_value_len(v);
    if ((k != CT_VALUE_DICT && k != CT_VALUE_LIST && k != CT_VALUE_TUPLE) || n == 0) {
        print_leaf(path[0] ? path : "(root)", v);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char child[1024];
        const char *sep = path[0] ? "." : "";
        const ct_value *item;
        if (k == CT_VALUE_DICT) {
            const char *skey = NULL;
            int64_t ikey = 0;
            item = ct_value_dict_at(v, i, &skey, &ikey);
            if (skey) snprintf(child, sizeof child, "%s%s%s", path, sep, skey);
            else snprintf(child, sizeof child, "%s%s%lld", path, sep, (long long)ikey);
        } else {
            item = ct_value_list_get(v, i);
            snprintf(child, sizeof child, "%s[%zu]", path, i);
        }
        print_value(child, item);
    }
}

static int fail(const char *what) {
    fprintf(stderr, "ctrial-ckpt: %s: %s\n", what, ct_last_error());
    return 1;
}

static int list_pth(const char *file) {
    ct_value *v = NULL;
    if (ct_pth_load(file, &v) != 0) return fail(file);
    print_value("", v);
    ct_value_free(v);
    return 0;
}

/* One checkpoint's metadata and keys; `shown` names it in the output (the
 * store's URL of one fetched into dir). */
static int list_checkpoint(const char *dir, const char *shown) {
    ct_value *meta = ct_ckpt_metadata(dir);
    if (!meta) return fail(shown);
    printf("== %s/metadata.json\n", shown);
    print_value("", meta);
    ct_value_free(meta);
    char file[4200];
    snprintf(file, sizeof file, "%s/state_dict.pth", dir);
    printf("== %s/state_dict.pth\n", shown);
    return list_pth(file);
}

/* ---- listing a run's checkpoints ------------------------------------------------ */

/* The writer builds a checkpoint as .tmp-<name> and renames it to <name>
 * once metadata.json is in (src/ckpt/dir.c): under its final name a
 * checkpoint is whole, so one without a readable metadata.json is damaged. */
#define TMP_PREFIX ".tmp-"
#define CKPT_PREFIX "ckpt-"
#define PATH_LEN 4096

typedef enum { COMMITTED, DAMAGED, UNCOMMITTED } row_state;

typedef struct {
    char name[256];
    row_state state;
    int64_t batches;  /* steps_completed; INT64_MAX when unknown, so those sort last */
    double epochs;    /* NAN when unknown */
    char metric[32];  /* as printed: "-" when not validated at this step */
    char *error;      /* DAMAGED: why (owned) */
} row;

typedef struct {
    row *at;
    size_t n, cap;
} rows;

/* The run's searcher metric, as its latest checkpoint records it: the one
 * retention and the checkpoint policy use. metric is "" when there is none. */
typedef struct {
    char metric[128];
    bool smaller_is_better;
} searcher;

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static bool exists(const char *path, bool want_dir) {
    struct stat st;
    return stat(path, &st) == 0 && (!want_dir || S_ISDIR(st.st_mode));
}

/* dir/name into buf; false when it does not fit. */
static bool join(char *buf, const char *dir, const char *name) {
    return snprintf(buf, PATH_LEN, "%s/%s", dir, name) < PATH_LEN;
}

/* The searcher of the latest checkpoint's metadata (NULL: none). */
static void searcher_of(const ct_value *meta, searcher *s) {
    memset(s, 0, sizeof *s);
    s->smaller_is_better = true;
    const ct_value *ts = meta ? ct_value_dict_get(meta, "trial_state") : NULL;
    const char *name = ts ? ct_value_get_str(ct_value_dict_get(ts, "searcher_metric")) : NULL;
    if (name) snprintf(s->metric, sizeof s->metric, "%s", name);
    if (ts) ct_value_get_bool(ct_value_dict_get(ts, "smaller_is_better"), &s->smaller_is_better);
}

static void read_searcher(const char *latest, searcher *s) {
    ct_value *meta = latest[0] ? ct_ckpt_metadata(latest) : NULL;
    searcher_of(meta, s);
    ct_value_free(meta);
}

/* A new row at the end of t (a command line tool: out of memory ends it). */
static row *add_row(rows *t, const char *name, row_state state) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        t->at = realloc(t->at, t->cap * sizeof *t->at);
        if (!t->at) {
            fprintf(stderr, "ctrial-ckpt: out of memory\n");
            exit(1);
        }
    }
    row *r = &t->at[t->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->state = state;
    r->batches = INT64_MAX;
    r->epochs = NAN;
    snprintf(r->metric, sizeof r->metric, "-");
    return r;
}

static void fill_committed(row *r, const ct_value *meta, const searcher *s) {
    ct_value_get_int(ct_value_dict_get(meta, "steps_completed"), &r->batches); /* ct_ckpt_metadata checked it */
    ct_value_get_float(ct_value_dict_get(meta, "epochs_trained"), &r->epochs);
    const ct_value *validated = ct_value_dict_get(meta, "validation_metrics");
    const ct_value *v = s->metric[0] ? ct_value_dict_get(validated, s->metric) : NULL;
    double value;
    if (!v) return; /* not validated at this step */
    /* ctrial writes a NaN or infinite metric as null */
    if (ct_value_get_float(v, &value) == 0) snprintf(r->metric, sizeof r->metric, "%.6g", value);
    else snprintf(r->metric, sizeof r->metric, "null");
}

/* One entry of the checkpoints folder. Files, foreign directories (no
 * readable metadata.json and not named ckpt-*: ct_ckpt_latest skips them
 * too) and .del-* ones (retention deleting them) give no row. */
static void scan_entry(const char *folder, const char *name, const searcher *s, rows *t) {
    char path[PATH_LEN];
    if (!strcmp(name, ".") || !strcmp(name, "..") || strlen(name) >= sizeof t->at->name || !join(path, folder, name) ||
        !exists(path, true))
        return;
    if (name[0] == '.') {
        if (starts_with(name, TMP_PREFIX)) add_row(t, name, UNCOMMITTED);
        return;
    }
    ct_value *meta = ct_ckpt_metadata(path);
    if (meta) {
        fill_committed(add_row(t, name, COMMITTED), meta, s);
    } else if (starts_with(name, CKPT_PREFIX)) {
        row *r = add_row(t, name, DAMAGED);
        r->error = strdup(ct_last_error());
    }
    ct_value_free(meta);
}

static int scan(const char *folder, const searcher *s, rows *t) {
    DIR *d = opendir(folder);
    if (!d) {
        fprintf(stderr, "ctrial-ckpt: cannot read %s: %s\n", folder, strerror(errno));
        return 1;
    }
    struct dirent *e;
    while ((e = readdir(d))) scan_entry(folder, e->d_name, s, t);
    closedir(d);
    return 0;
}

/* Training order: batches trained, then name. (ct_ckpt_latest goes by
 * commit order, metadata.json's commit_sequence: after a resume from an
 * earlier checkpoint the latest need not be the last line.) */
static int by_training_order(const void *a, const void *b) {
    const row *x = a, *y = b;
    if (x->batches != y->batches) return x->batches < y->batches ? -1 : 1;
    return strcmp(x->name, y->name);
}

static size_t count(const rows *t, row_state state) {
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) n += t->at[i].state == state;
    return n;
}

/* ct_ckpt_latest's or ct_ckpt_best's answer (rc, the path found) as the bare
 * name a mark goes on: "" when there is none (CT_ECHECKPOINT). Returns 1 on
 * another error. */
static int marked_name(int rc, const char *found, char *name, size_t len) {
    name[0] = '\0';
    if (rc != 0) return ct_last_code() == CT_ECHECKPOINT ? 0 : 1;
    const char *slash = strrchr(found, '/');
    int n = snprintf(name, len, "%s", slash ? slash + 1 : found);
    if (n < 0 || (size_t)n >= len) name[0] = '\0'; /* longer than any listed name: marks none */
    return 0;
}

static void print_row(const row *r, int name_w, int metric_w, bool best, bool latest) {
    char batches[24] = "-", epochs[24] = "-", marks[16] = "";
    if (r->state == COMMITTED) snprintf(batches, sizeof batches, "%lld", (long long)r->batches);
    if (!isnan(r->epochs)) snprintf(epochs, sizeof epochs, "%.2f", r->epochs);
    snprintf(marks, sizeof marks, "%s%s%s", best ? "best" : "", best && latest ? " " : "", latest ? "latest" : "");
    printf("%-*s  %8s  %8s  %*s", name_w, r->name, batches, epochs, metric_w, r->metric);
    if (r->state == DAMAGED) printf("  damaged: %s", r->error ? r->error : "metadata.json cannot be read");
    else if (r->state == UNCOMMITTED) printf("  uncommitted");
    else if (marks[0]) printf("  %s", marks);
    putchar('\n');
}

/* Two '#' lines (the folder and counts, the column names), then the rows. */
static void print_rows(const char *folder, const rows *t, const searcher *s, const char *latest, const char *best) {
    printf("# %s: %zu committed, %zu damaged, %zu uncommitted; ", folder, count(t, COMMITTED), count(t, DAMAGED),
           count(t, UNCOMMITTED));
    if (s->metric[0])
        printf("searcher metric %s, %s is better\n", s->metric, s->smaller_is_better ? "smaller" : "larger");
    else
        printf("no searcher metric\n");
    const char *metric = s->metric[0] ? s->metric : "metric";
    int name_w = (int)strlen("# checkpoint"), metric_w = (int)strlen(metric);
    if (metric_w < 12) metric_w = 12; /* room for "%.6g" */
    for (size_t i = 0; i < t->n; i++)
        if ((int)strlen(t->at[i].name) > name_w) name_w = (int)strlen(t->at[i].name);
    printf("# %-*s  %8s  %8s  %*s  %s\n", name_w - 2, "checkpoint", "batches", "epochs", metric_w, metric, "marks");
    for (size_t i = 0; i < t->n; i++) {
        bool committed = t->at[i].state == COMMITTED;
        print_row(&t->at[i], name_w, metric_w, committed && strcmp(t->at[i].name, best) == 0,
                  committed && strcmp(t->at[i].name, latest) == 0);
    }
}

/* The rows sorted and printed under `folder`, the damaged ones also on
 * stderr (exit 1); the caller frees t. no_latest: why none is marked latest. */
static int print_listing(const char *folder, rows *t, const searcher *s, const char *latest, const char *best,
                         const char *no_latest) {
    if (t->n) qsort(t->at, t->n, sizeof *t->at, by_training_order); /* t->at is NULL when empty */
    print_rows(folder, t, s, latest, best);
    int rc = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->at[i].state == DAMAGED) {
            fprintf(stderr, "ctrial-ckpt: damaged: %s\n", t->at[i].error ? t->at[i].error : t->at[i].name);
            rc = 1;
        }
    }
    /* Not "none yet": a damaged checkpoint may be the latest. */
    if (!latest[0] && count(t, DAMAGED)) fprintf(stderr, "ctrial-ckpt: no latest: %s\n", no_latest);
    return rc;
}

static void free_rows(rows *t) {
    for (size_t i = 0; i < t->n; i++) free(t->at[i].error);
    free(t->at);
}

/* Every checkpoint in a checkpoints folder, one a line. latest and best
 * are the library's answers (what --resume latest picks, what retention
 * keeps and the run's summary names), not worked out again here. Exit 1
 * when one is damaged (after listing the others). */
static int list_run(const char *folder) {
    char found[PATH_LEN], latest[256], best[256] = "", no_latest[4096] = "";
    int latest_rc = ct_ckpt_latest(folder, found, sizeof found);
    if (latest_rc != 0) snprintf(no_latest, sizeof no_latest, "%s", ct_last_error());
    if (marked_name(latest_rc, found, latest, sizeof latest)) return fail(folder);
    searcher s;
    read_searcher(latest[0] ? found : "", &s);
    if (s.metric[0] && marked_name(ct_ckpt_best(folder, s.metric, s.smaller_is_better, found, sizeof found, NULL),
                                   found, best, sizeof best))
        return fail(folder);
    rows t = {0};
    int rc = scan(folder, &s, &t);
    if (rc == 0) rc = print_listing(folder, &t, &s, latest, best, no_latest);
    free_rows(&t);
    return rc;
}

/* ---- checkpoints in a store (s3://) ------------------------------------------------ */

static bool is_store(const char *path) { return strstr(path, "://") != NULL; }

/* url without trailing '/' into buf (PATH_LEN); false when too long. */
static bool trim_url(char *buf, const char *url) {
    if (snprintf(buf, PATH_LEN, "%s", url) >= PATH_LEN) {
        fprintf(stderr, "ctrial-ckpt: %.64s...: the URL is too long\n", url);
        return false;
    }
    for (size_t n = strlen(buf); n > 5 && buf[n - 1] == '/'; n--) buf[n - 1] = '\0';
    return true;
}

/* Whether the URL names one checkpoint (its last part ckpt-...) rather than
 * the prefix they are kept under. */
static bool names_checkpoint(const char *url) {
    const char *slash = strrchr(url, '/');
    return slash && slash > strstr(url, "://") + 2 && starts_with(slash + 1, CKPT_PREFIX);
}

static const char *row_str(const ct_value *entry, const char *key) {
    const char *v = ct_value_get_str(ct_value_dict_get(entry, key));
    return v ? v : "";
}

/* The last committed row of ct_ckpt_store_list's answer: the latest, in
 * commit order (borrowed; NULL when none). */
static const ct_value *store_latest(const ct_value *all) {
    const ct_value *latest = NULL;
    for (size_t i = 0; i < ct_value_len(all); i++)
        if (!strcmp(row_str(ct_value_list_get(all, i), "state"), "committed")) latest = ct_value_list_get(all, i);
    return latest;
}

/* A store's checkpoints as a folder's are listed, from their metadata.json
 * alone: committed ones, and damaged ones (exit 1). Uploads cut off are no
 * checkpoints and are not listed. */
static int list_store(const char *url) {
    ct_value *all = ct_ckpt_store_list(url);
    if (!all) return fail(url);
    const ct_value *last = store_latest(all);
    char latest[256] = "", best[256] = "", found[PATH_LEN], no_latest[PATH_LEN + 64] = "";
    if (last) snprintf(latest, sizeof latest, "%s", row_str(last, "name"));
    else snprintf(no_latest, sizeof no_latest, "no checkpoint in %s", url);
    searcher s;
    searcher_of(last ? ct_value_dict_get(last, "metadata") : NULL, &s);
    if (s.metric[0] && marked_name(ct_ckpt_best(url, s.metric, s.smaller_is_better, found, sizeof found, NULL), found,
                                   best, sizeof best)) {
        ct_value_free(all);
        return fail(url);
    }
    rows t = {0};
    for (size_t i = 0; i < ct_value_len(all); i++) {
        const ct_value *entry = ct_value_list_get(all, i);
        const char *name = row_str(entry, "name"), *state = row_str(entry, "state");
        if (strlen(name) >= sizeof t.at->name) continue; /* as a folder's listing passes them over */
        if (!strcmp(state, "committed")) {
            fill_committed(add_row(&t, name, COMMITTED), ct_value_dict_get(entry, "metadata"), &s);
        } else if (!strcmp(state, "damaged")) {
            char why[PATH_LEN + 1400]; /* named as a folder's are: "checkpoint WHERE: why" */
            snprintf(why, sizeof why, "checkpoint %s/%s: %s", url, name, row_str(entry, "why"));
            add_row(&t, name, DAMAGED)->error = strdup(why);
        }
    }
    int rc = print_listing(url, &t, &s, latest, best, no_latest);
    free_rows(&t);
    ct_value_free(all);
    return rc;
}

/* A temporary folder for what is fetched from a store, removed at exit. */
static char g_tmp[PATH_LEN];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0) fprintf(stderr, "ctrial-ckpt: cannot remove %s: %s\n", path, strerror(errno));
    return 0;
}

static void remove_tmp(void) {
    if (g_tmp[0]) nftw(g_tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    g_tmp[0] = '\0';
}

/* The checkpoint at url downloaded into the temporary folder (verified as
 * it comes: ct_ckpt_fetch); its path into local. Returns 0 or 1. */
static int fetch(const char *what, const char *url, char *local, size_t len) {
    const char *tmpdir = getenv("TMPDIR");
    snprintf(g_tmp, sizeof g_tmp, "%s/ctrial-ckpt-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(g_tmp)) {
        fprintf(stderr, "ctrial-ckpt: cannot make %s: %s\n", g_tmp, strerror(errno));
        g_tmp[0] = '\0';
        return 1;
    }
    atexit(remove_tmp);
    if (ct_ckpt_fetch(url, g_tmp, local, len) != 0) return fail(what);
    return 0;
}

/* list s3://.../ckpt-...: as a checkpoint folder's, named by its URL. */
static int show_store(const char *url) {
    char local[PATH_LEN];
    if (fetch(url, url, local, sizeof local)) return 1;
    return list_checkpoint(local, url);
}

static int verify_store(const char *url) {
    char local[PATH_LEN];
    if (!names_checkpoint(url)) {
        fprintf(stderr, "ctrial-ckpt: verify: %s names no checkpoint (s3://BUCKET/PREFIX/ckpt-...)\n", url);
        return 1;
    }
    if (fetch("verify", url, local, sizeof local)) return 1;
    if (ct_ckpt_verify(local) != 0) return fail("verify");
    printf("%s: OK\n", url);
    return 0;
}

/* A search's folder (experiment.jsonl and trials/ inside): each trial's
 * checkpoints, trial by trial in id order, under a "# trial N" line. */
static int list_search(const char *dir) {
    char trials[PATH_LEN];
    join(trials, dir, "trials");
    int64_t ids[4096];
    size_t n = 0;
    DIR *d = opendir(trials);
    struct dirent *e;
    while (d && (e = readdir(d)) && n < sizeof ids / sizeof *ids) {
        char *end = NULL;
        long long id = strtoll(e->d_name, &end, 10);
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && end && !*end) ids[n++] = id;
    }
    if (d) closedir(d);
    for (size_t i = 1; i < n; i++) /* few trials: insertion sort */
        for (size_t j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            int64_t t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    printf("# search %s: %zu trial%s\n", dir, n, n == 1 ? "" : "s");
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char tdir[PATH_LEN + 32], ck[PATH_LEN], num[24];
        snprintf(num, sizeof num, "%lld", (long long)ids[i]);
        if (!join(tdir, trials, num)) continue;
        printf("\n# trial %lld\n", (long long)ids[i]);
        if (list_run(join(ck, tdir, "checkpoints") && exists(ck, true) ? ck : tdir) != 0) rc = 1;
    }
    return rc;
}

/* DIR is a checkpoint (metadata.json or state_dict.pth inside: today's
 * listing of its keys), a search's folder (experiment.jsonl and trials/:
 * each trial's checkpoints), a run's output folder (checkpoints/ inside)
 * or a checkpoints folder (anything else). */
static int list_dir(const char *path) {
    char dir[PATH_LEN], file[PATH_LEN];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) {
        fprintf(stderr, "ctrial-ckpt: %s: path too long\n", path);
        return 1;
    }
    for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--) dir[n - 1] = '\0'; /* "out/" lists as "out" */
    bool is_checkpoint = (join(file, dir, "metadata.json") && exists(file, false)) ||
                         (join(file, dir, "state_dict.pth") && exists(file, false));
    if (is_checkpoint) return list_checkpoint(path, path);
    char trials[PATH_LEN];
    if (join(file, dir, "experiment.jsonl") && exists(file, false) && join(trials, dir, "trials") &&
        exists(trials, true))
        return list_search(dir);
    return list_run(join(file, dir, "checkpoints") && exists(file, true) ? file : dir);
}

static int usage(void) {
    fprintf(stderr, "usage: ctrial-ckpt [--endpoint-url URL] COMMAND PATH\n"
                    "       ctrial-ckpt list OUTPUT_DIR|SEARCH_DIR|CHECKPOINTS_DIR|CKPT_DIR|FILE.pth\n"
                    "       ctrial-ckpt verify DIR\n"
                    "       ctrial-ckpt latest CHECKPOINT_DIR|OUTPUT_DIR\n"
                    "       ctrial-ckpt best CHECKPOINT_DIR|OUTPUT_DIR\n"
                    "A store's s3://BUCKET/PREFIX stands for a checkpoints folder (list, latest, best),\n"
                    "s3://BUCKET/PREFIX/ckpt-... for one checkpoint (list, verify; fetched into a\n"
                    "temporary folder and removed). Credentials and region: AWS_ACCESS_KEY_ID,\n"
                    "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION; the endpoint of an\n"
                    "S3-compatible store: --endpoint-url, else AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL.\n");
    return 2;
}

/* best: by the searcher metric the latest checkpoint records (what
 * retention keeps and the run's summary names); latest_meta is its
 * metadata, `where` names it in messages. */
static int print_best(const char *folder, const ct_value *latest_meta, const char *where) {
    searcher sr;
    searcher_of(latest_meta, &sr);
    if (!sr.metric[0]) {
        fprintf(stderr, "ctrial-ckpt: best: %s records no searcher metric\n", where);
        return 1;
    }
    char buf[4096];
    double v = 0;
    if (ct_ckpt_best(folder, sr.metric, sr.smaller_is_better, buf, sizeof buf, &v) != 0) return fail("best");
    char num[CTI_FLOAT_REPR_LEN];
    printf("%s\t%s %s\n", buf, sr.metric, cti_float_repr(v, num)); /* as Python's repr */
    return 0;
}

/* The subcommands on a store's URL. */
static int store_command(const char *cmd, const char *path) {
    char url[PATH_LEN];
    if (!trim_url(url, path)) return 1;
    if (strcmp(cmd, "list") == 0) return names_checkpoint(url) ? show_store(url) : list_store(url);
    if (strcmp(cmd, "verify") == 0) return verify_store(url);
    if (strcmp(cmd, "latest") == 0) {
        char buf[4096];
        if (ct_ckpt_latest(url, buf, sizeof buf) != 0) return fail("latest");
        printf("%s\n", buf);
        return 0;
    }
    if (strcmp(cmd, "best") == 0) {
        ct_value *all = ct_ckpt_store_list(url);
        if (!all) return fail("best");
        const ct_value *last = store_latest(all);
        int rc;
        if (!last) {
            fprintf(stderr, "ctrial-ckpt: best: no checkpoint in %s\n", url);
            rc = 1;
        } else {
            char where[PATH_LEN + 256];
            snprintf(where, sizeof where, "%s/%s", url, row_str(last, "name"));
            rc = print_best(url, ct_value_dict_get(last, "metadata"), where);
        }
        ct_value_free(all);
        return rc;
    }
    return usage();
}

int main(int argc, char **argv) {
    const char *args[2];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--endpoint-url") == 0 || strncmp(a, "--endpoint-url=", 15) == 0) {
            const char *url = a[14] == '=' ? a + 15 : i + 1 < argc ? argv[++i] : NULL;
            if (!url || !url[0]) return usage();
            setenv("AWS_ENDPOINT_URL_S3", url, 1); /* over AWS_ENDPOINT_URL, as boto3 takes them */
        } else if (n < 2) {
            args[n++] = a;
        } else {
            return usage();
        }
    }
    if (n != 2) return usage();
    const char *cmd = args[0], *path = args[1];
    if (is_store(path)) return store_command(cmd, path);
    if (strcmp(cmd, "list") == 0) {
        struct stat st;
        if (stat(path, &st) != 0) {
            fprintf(stderr, "ctrial-ckpt: %s: no such file or directory\n", path);
            return 1;
        }
        return S_ISDIR(st.st_mode) ? list_dir(path) : list_pth(path);
    }
    if (strcmp(cmd, "verify") == 0) {
        if (ct_ckpt_verify(path) != 0) return fail("verify");
        printf("%s: OK\n", path);
        return 0;
    }
    /* A run's output folder stands for its checkpoints/ folder. */
    char folder[PATH_LEN];
    if (join(folder, path, "checkpoints") && !exists(folder, true)) snprintf(folder, sizeof folder, "%s", path);
    if (strcmp(cmd, "latest") == 0) {
        char buf[4096];
        if (ct_ckpt_latest(folder, buf, sizeof buf) != 0) return fail("latest");
        printf("%s\n", buf);
        return 0;
    }
    if (strcmp(cmd, "best") == 0) {
        char latest[4096];
        if (ct_ckpt_latest(folder, latest, sizeof latest) != 0) return fail("best");
        ct_value *meta = ct_ckpt_metadata(latest);
        int rc = print_best(folder, meta, latest);
        ct_value_free(meta);
        return rc;
    }
    return usage();
}
