/* tests/config/test_yaml.c — YAML experiment configs: a config written as
 * Determined's users write it (comments, block and flow style, anchors)
 * loads to the same tree and the same ct_fit_opts as its JSON form; plain
 * scalars resolve by the YAML 1.2 core schema (as Determined's CLI reads
 * configs) and quoted ones stay strings; each malformed input is
 * CT_ECONFIG naming the file, line and column; a file's extension picks
 * the parser. */
#define _DEFAULT_SOURCE /* mkstemps */
#include <stdlib.h>
#include <unistd.h>

#include "config/experiment.h"
#include "config/yaml.h"
#include "ct_test.h"

static const char *yaml_config =
    "# the MNIST example's const.yaml, as Determined ships it\n"
    "name: mnist_pytorch_const\n"
    "hyperparameters:\n"
    "  learning_rate: 1.0\n"
    "  global_batch_size: 64\n"
    "  n_filters1: 32\n"
    "  dropout1: .25   # a float without a leading zero\n"
    "  schedule: {type: const, val: [1, 2, 3]}\n"
    "searcher:\n"
    "  name: single\n"
    "  metric: validation_loss\n"
    "  smaller_is_better: true\n"
    "  max_length:\n"
    "    batches: 937\n"
    "min_validation_period: &period\n"
    "  batches: 100\n"
    "min_checkpoint_period: *period\n"
    "reproducibility:\n"
    "  experiment_seed: 0x2A\n"
    "max_restarts: 0\n"
    "entrypoint: model_def:MNistTrial\n";

static const char *json_config =
    "{\"name\": \"mnist_pytorch_const\", \"hyperparameters\": {\"learning_rate\": 1.0, \"global_batch_size\": 64,"
    " \"n_filters1\": 32, \"dropout1\": 0.25, \"schedule\": {\"type\": \"const\", \"val\": [1, 2, 3]}},"
    " \"searcher\": {\"name\": \"single\", \"metric\": \"validation_loss\", \"smaller_is_better\": true,"
    " \"max_length\": {\"batches\": 937}}, \"min_validation_period\": {\"batches\": 100},"
    " \"min_checkpoint_period\": {\"batches\": 100}, \"reproducibility\": {\"experiment_seed\": 42},"
    " \"max_restarts\": 0, \"entrypoint\": \"model_def:MNistTrial\"}";

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_same_as_json(void) {
    char yaml_path[] = "/tmp/ct_yaml_XXXXXX.yaml", json_path[] = "/tmp/ct_yaml_XXXXXX.json";
    int fd1 = mkstemps(yaml_path, 5), fd2 = mkstemps(json_path, 5);
    CHECK(fd1 >= 0 && fd2 >= 0);
    close(fd1);
    close(fd2);
    write_text(yaml_path, yaml_config);
    write_text(json_path, json_config);
    cti_config a, b;
    CHECK_OK(cti_config_init(&a));
    CHECK_OK(cti_config_init(&b));
    CHECK_OK(cti_config_load_file(&a, yaml_path));
    CHECK_OK(cti_config_load_file(&b, json_path));
    CHECK_OK(cti_config_finish(&a, 1));
    CHECK_OK(cti_config_finish(&b, 1));
    CHECK(a.whole && b.whole && ct_value_equal(a.whole, b.whole));
    CHECK(ct_value_equal(a.hparams, b.hparams));
    CHECK(a.fit.seed == 42 && a.fit.max_length.unit == CT_BATCHES && a.fit.max_length.n == 937);
    CHECK(a.fit.validation_period.n == 100 && a.fit.checkpoint_period.n == 100);
    cti_config_free(&a);
    cti_config_free(&b);
    /* .yml too; a JSON file named .json is read as JSON (its own messages) */
    write_text(json_path, "{\"name\": \"x\",}");
    CHECK_OK(cti_config_init(&a));
    CHECK(cti_config_load_file(&a, json_path) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, ".json:1:");
    cti_config_free(&a);
    unlink(yaml_path);
    unlink(json_path);
    char yml_path[] = "/tmp/ct_yaml_XXXXXX.yml";
    fd1 = mkstemps(yml_path, 4);
    close(fd1);
    write_text(yml_path, "searcher:\n  name: bayes\n");
    CHECK_OK(cti_config_init(&a));
    CHECK(cti_config_load_file(&a, yml_path) == CT_ECONFIG); /* parsed as YAML: the searcher is refused by name */
    CHECK_ERR(CT_ECONFIG, "searcher.name");
    cti_config_free(&a);
    unlink(yml_path);
}

/* The value of key `x` in "x: TEXT". */
static json_t *value_of(const char *text) {
    char doc[256];
    snprintf(doc, sizeof doc, "x: %s\n", text);
    json_t *j = cti_yaml_to_json(doc, strlen(doc), "t.yaml");
    json_t *v = j ? json_incref(json_object_get(j, "x")) : NULL;
    json_decref(j);
    return v;
}

static bool is_int(const char *text, json_int_t want) {
    json_t *v = value_of(text);
    bool ok = json_is_integer(v) && json_integer_value(v) == want;
    if (!ok) fprintf(stderr, "  %s: not the integer %lld\n", text, (long long)want);
    json_decref(v);
    return ok;
}

static bool is_real(const char *text, double want) {
    json_t *v = value_of(text);
    bool ok = json_is_real(v) && json_real_value(v) == want;
    if (!ok) fprintf(stderr, "  %s: not the float %g\n", text, want);
    json_decref(v);
    return ok;
}

static bool is_str(const char *text, const char *want) {
    json_t *v = value_of(text);
    bool ok = json_is_string(v) && strcmp(json_string_value(v), want) == 0;
    if (!ok) fprintf(stderr, "  %s: not the string '%s'\n", text, want);
    json_decref(v);
    return ok;
}

static bool is_kind(const char *text, json_type type) {
    json_t *v = value_of(text);
    bool ok = v && json_typeof(v) == type;
    json_decref(v);
    return ok;
}

static void test_scalars(void) {
    CHECK(is_int("0", 0) && is_int("-17", -17) && is_int("+3", 3) && is_int("0o17", 15) && is_int("0x1F", 31));
    CHECK(is_real("1.0", 1.0) && is_real(".0001", 0.0001) && is_real("1e-4", 1e-4) && is_real("-2.5E+3", -2500.0));
    CHECK(is_real("3.", 3.0));
    CHECK(is_kind("true", JSON_TRUE) && is_kind("False", JSON_FALSE) && is_kind("null", JSON_NULL));
    CHECK(is_kind("~", JSON_NULL) && is_kind("", JSON_NULL));
    /* YAML 1.2, not 1.1: these are strings */
    CHECK(is_str("yes", "yes") && is_str("off", "off") && is_str("0777x", "0777x") && is_str("1_000", "1_000"));
    CHECK(is_str("1.2.3", "1.2.3") && is_str("e5", "e5") && is_str("model_def:Trial", "model_def:Trial"));
    CHECK(is_str("-.nan", "-.nan")); /* the core schema's NaN has no sign */
    /* quoted, and tagged */
    CHECK(is_str("\"42\"", "42") && is_str("'true'", "true") && is_str("!!str 3", "3"));
    CHECK(is_int("!!int \"7\"", 7));
    CHECK(is_kind("[1, a, {b: 2}]", JSON_ARRAY) && is_kind("{a: 1}", JSON_OBJECT));
}

static void refused(const char *text, const char *needle) {
    json_t *j = cti_yaml_to_json(text, strlen(text), "bad.yaml");
    CHECK(j == NULL);
    json_decref(j);
    CHECK_ERR(CT_ECONFIG, needle);
}

static void test_errors(void) {
    refused("a: 1\na: 2\n", "bad.yaml:2:1: duplicate key 'a'");
    refused("a:\n  b: [1, 2\n", "bad.yaml:3:1:");
    refused("a: 1\n\tb: 2\n", "bad.yaml:2:");
    refused("? [1, 2]\n: x\n", "bad.yaml:1:3: a key must be a plain value");
    refused("a: .inf\n", "bad.yaml:1:4: infinity and NaN have no JSON form");
    refused("a: .NaN\n", "bad.yaml:1:4: infinity and NaN have no JSON form");
    refused("a: 1e999\n", "bad.yaml:1:4: a number too large for a double");
    refused("- 1\n- 2\n", "bad.yaml:1:1: the config must be a mapping of keys");
    refused("a: 1\n---\nb: 2\n", "bad.yaml: more than one YAML document");
    refused("", "bad.yaml: empty (no YAML document in it)");
    refused("# only a comment\n", "bad.yaml: empty");
    refused("a: &x [1, *x]\n", "bad.yaml:1:11: an alias inside its own anchor (a loop)");
    refused("a: *nowhere\n", "bad.yaml:1:4: an alias to an anchor not defined before it");
    refused("? {a: 1}\n: x\n", "a key must be a plain value");
    /* a billion laughs: nine levels of nine aliases */
    char bomb[2048] = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
    for (int i = 1; i < 9; i++) {
        char line[128];
        snprintf(line, sizeof line, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i - 1,
                 i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
        strcat(bomb, line);
    }
    refused(bomb, "more than a million values once aliases are expanded");
    /* ... of large strings (the fault campaign's): a 1 MiB string anchor
     * aliased through five nested lists of ten is 100 GB expanded and only
     * 10^5 values; refused where the first alias past 64 MiB is counted, before
     * it is copied. Determined's CLI reads it with ruamel.yaml, whose aliases
     * are shared references, and then sends the master its JSON, which
     * writes every alias out: 100 GB. Its own configs are kilobytes. */
    size_t big = 1 << 20;
    char *strings = malloc(big + 4096);
    strcpy(strings, "l0: &l0 \"");
    memset(strings + strlen(strings), 'x', big);
    strcpy(strings + 9 + big, "\"\n");
    for (int i = 1; i <= 5; i++) {
        char line[160];
        snprintf(line, sizeof line, "l%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d]\n", i, i,
                 i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
        strcat(strings, line);
    }
    refused(strings, "more than 64 MiB of text once aliases are expanded");
    free(strings);
    /* deeper than 64 */
    char deep[1024] = "a: ";
    for (int i = 0; i < 70; i++) strcat(deep, "[");
    for (int i = 0; i < 70; i++) strcat(deep, "]");
    strcat(deep, "\n");
    refused(deep, "nested more than 64 deep");
}

int main(void) {
    test_same_as_json();
    test_scalars();
    test_errors();
    return ct_test_result("config_yaml");
}
