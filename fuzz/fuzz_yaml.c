/* libFuzzer target: YAML experiment configs (module config:
 * cti_yaml_to_json, then cti_config_load_file of the same text as a .yaml
 * file), with no libtorch.
 *
 * Beyond "no crash, no leak, no undefined behaviour" (aliases expanded
 * past the limit, nesting past 64, every malformed stream), it checks that
 *  - a failure is CT_ECONFIG (or CT_ENOMEM) with a message that names the
 *    input, and reading again gives the same code and message;
 *  - a success is a JSON object, and the same text loaded as a config file
 *    either loads or fails with CT_ECONFIG (the tree's keys and values are
 *    then checked as JSON configs are).
 * Built by fuzz/CMakeLists.txt, run by fuzz/run.sh. */
#define _DEFAULT_SOURCE /* mkstemps */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/experiment.h"
#include "config/yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_clear_error();
    json_t *j = cti_yaml_to_json((const char *)data, size, "fuzz.yaml");
    if (!j) {
        int code = ct_last_code();
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        if ((code != CT_ECONFIG && code != CT_ENOMEM) || strncmp(msg, "fuzz.yaml", 9) != 0) abort();
        json_t *again = cti_yaml_to_json((const char *)data, size, "fuzz.yaml");
        if (again || ct_last_code() != code || strcmp(ct_last_error(), msg) != 0) abort();
        return 0;
    }
    if (!json_is_object(j)) abort();
    json_decref(j);
    char path[] = "/tmp/ct_fuzz_yaml_XXXXXX.yaml";
    int fd = mkstemps(path, 5);
    if (fd < 0) return 0;
    if (size && write(fd, data, size) != (ssize_t)size) abort();
    close(fd);
    cti_config c;
    if (cti_config_init(&c) == 0) {
        int rc = cti_config_load_file(&c, path);
        if (rc && rc != CT_ECONFIG && rc != CT_ENOMEM) abort();
    }
    cti_config_free(&c);
    unlink(path);
    return 0;
}
