/* tests/store/s3_tool.c — src/store/s3.c as a command, for test_s3.py:
 *
 *     s3_tool ENDPOINT BUCKET put-file KEY PATH | put-bytes KEY TEXT |
 *             get-file KEY PATH | get-bytes KEY | list PREFIX | delete KEY
 *
 * prints what it got (get-bytes: the bytes; list: "KEY SIZE" lines;
 * get-file: the size) and exits 0, or prints "error CT_NAME: message" on
 * stderr and exits 1. S3_PART_BYTES, S3_MAX_ATTEMPTS, S3_BACKOFF_S and
 * S3_STALL_S set the options; credentials come from the environment
 * (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), as in a run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/error.h"
#include "store/s3.h"

static double env_num(const char *name, double dflt) {
    const char *v = getenv(name);
    return v && *v ? atof(v) : dflt;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: s3_tool ENDPOINT BUCKET CMD ARGS...\n");
        return 2;
    }
    cti_s3_opts o = cti_s3_default_opts();
    o.endpoint_url = strcmp(argv[1], "-") == 0 ? NULL : argv[1];
    o.bucket = argv[2];
    o.part_bytes = (size_t)env_num("S3_PART_BYTES", (double)o.part_bytes);
    o.max_attempts = (int)env_num("S3_MAX_ATTEMPTS", o.max_attempts);
    o.backoff_s = env_num("S3_BACKOFF_S", o.backoff_s);
    o.stall_s = env_num("S3_STALL_S", o.stall_s);
    cti_s3 *s3 = cti_s3_new(&o);
    int rc = s3 ? CT_OK : ct_last_code();
    const char *cmd = argv[3];
    if (rc != CT_OK) {
    } else if (strcmp(cmd, "put-file") == 0 && argc == 6) {
        rc = cti_s3_put_file(s3, argv[4], argv[5]);
    } else if (strcmp(cmd, "put-bytes") == 0 && argc == 6) {
        rc = cti_s3_put_bytes(s3, argv[4], argv[5], strlen(argv[5]));
    } else if (strcmp(cmd, "get-file") == 0 && argc == 6) {
        int64_t size = -1;
        rc = cti_s3_get_file(s3, argv[4], argv[5], &size);
        if (rc == CT_OK) printf("%lld\n", (long long)size);
    } else if (strcmp(cmd, "get-bytes") == 0 && argc == 5) {
        char *data = NULL;
        size_t n = 0;
        rc = cti_s3_get_bytes(s3, argv[4], (size_t)env_num("S3_MAX_BYTES", 1 << 20), &data, &n);
        if (rc == CT_OK) fwrite(data, 1, n, stdout);
        free(data);
    } else if (strcmp(cmd, "list") == 0 && argc == 5) {
        cti_s3_object *objs = NULL;
        size_t n = 0;
        rc = cti_s3_list(s3, argv[4], &objs, &n);
        for (size_t i = 0; rc == CT_OK && i < n; i++) printf("%s %lld\n", objs[i].key, (long long)objs[i].size);
        cti_s3_objects_free(objs, n);
    } else if (strcmp(cmd, "delete") == 0 && argc == 5) {
        rc = cti_s3_delete(s3, argv[4]);
    } else {
        fprintf(stderr, "s3_tool: unknown command or arguments: %s\n", cmd);
        cti_s3_free(s3);
        return 2;
    }
    if (rc != CT_OK) fprintf(stderr, "error %s: %s\n", ct_err_name(rc), ct_last_error());
    cti_s3_free(s3);
    return rc == CT_OK ? 0 : 1;
}
