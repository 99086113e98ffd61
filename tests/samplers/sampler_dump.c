#define _POSIX_C_SOURCE 200809L /* strtok_r */
/* Reads one sampler chain per stdin line, e.g.
 *     shuffle:100:42 repeat shard:1:3 batch:7:0 skip:5 | 40
 * (stages left to right, then how many next() calls to make), builds it with
 * ct_sampler_*, and prints one JSON line per chain: its ct_sampler_len and
 * the items in order, with null for each end of pass, or {"error": "..."}
 * when building or drawing fails. sampler_parity.py compares these with
 * numpy and Python. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

static ct_sampler *stage(ct_sampler *s, char *word) {
    char *name = strtok(word, ":");
    char *a = strtok(NULL, ":");
    char *b = strtok(NULL, ":");
    long long x = a ? atoll(a) : 0, y = b ? atoll(b) : 0;
    if (!strcmp(name, "sequential")) return ct_sampler_sequential(x);
    if (!strcmp(name, "shuffle")) return ct_sampler_shuffle(x, (uint64_t)strtoull(b ? b : "0", NULL, 10));
    if (!strcmp(name, "repeat")) return ct_sampler_repeat(s);
    if (!strcmp(name, "shard")) return ct_sampler_shard(s, (int)x, (int)y);
    if (!strcmp(name, "batch")) return ct_sampler_batch(s, x, y != 0);
    if (!strcmp(name, "skip")) return ct_sampler_skip(s, x);
    ct_set_error(CT_EINVAL, "unknown stage '%s'", name);
    ct_sampler_free(s);
    return NULL;
}

static void print_error(void) {
    printf("{\"error\": \"");
    for (const char *c = ct_last_error(); *c; c++)
        if (*c == '"' || *c == '\\') printf("\\%c", *c); else putchar(*c);
    printf("\"}\n");
    ct_clear_error();
}

int main(void) {
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        char *bar = strchr(line, '|');
        if (!bar) continue;
        *bar = '\0';
        long long calls = atoll(bar + 1);
        ct_sampler *s = NULL;
        bool ok = true;
        for (char *save = NULL, *w = strtok_r(line, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
            char word[256];
            snprintf(word, sizeof word, "%s", w);
            s = stage(s, word);
            if (!s) { ok = false; break; }
        }
        if (!ok) { print_error(); continue; }
        int64_t cap = ct_sampler_max_item(s);
        int64_t *buf = malloc((size_t)cap * sizeof *buf);
        printf("{\"len\": %lld, \"items\": [", (long long)ct_sampler_len(s));
        for (long long c = 0; c < calls; c++) {
            int64_t n = ct_sampler_next(s, buf, cap);
            if (n < 0) { printf("], "); ok = false; break; }
            if (c) printf(", ");
            if (n == 0) { printf("null"); continue; }
            printf("[");
            for (int64_t i = 0; i < n; i++) printf(i ? ", %lld" : "%lld", (long long)buf[i]);
            printf("]");
        }
        if (ok) printf("]}\n");
        else {
            printf("\"error\": \"%s\"}\n", ct_last_error());
            ct_clear_error();
        }
        free(buf);
        ct_sampler_free(s);
    }
    return 0;
}
