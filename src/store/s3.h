/* src/store/s3.h — objects in S3 and S3-compatible stores (MinIO, Ceph,
 * moto, R2), for checkpoints kept there. Internal to ctrial.
 *
 *     cti_s3_opts o = cti_s3_default_opts();
 *     o.bucket = "ckpts";
 *     o.endpoint_url = "http://127.0.0.1:9000";  // NULL: AWS itself
 *     cti_s3 *s3 = cti_s3_new(&o);
 *     cti_s3_put_file(s3, "run1/ckpt-000100-1a2b3c4d/state_dict.pth", path);
 *     cti_s3_object *objs; size_t n;
 *     cti_s3_list(s3, "run1/", &objs, &n);
 *     ...
 *     cti_s3_objects_free(objs, n);
 *     cti_s3_free(s3);
 *
 * Requests go through libcurl, which signs them (AWS Signature Version 4,
 * CURLOPT_AWS_SIGV4) and speaks HTTPS; responses are read with libxml2.
 * Keys are the objects' whole names in the bucket (no leading '/'); each
 * path segment is percent-encoded on the way out.
 *
 * Credentials and region, as boto3 finds them (Determined's S3 storage is
 * boto3): the options first, then AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
 * and AWS_SESSION_TOKEN; region from AWS_REGION, then AWS_DEFAULT_REGION,
 * then us-east-1. Without an endpoint the bucket is addressed at
 * https://s3.REGION.amazonaws.com/BUCKET (path style, which every S3-
 * compatible store takes too); AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL
 * name an endpoint as boto3 reads them.
 *
 * Failures that may pass (no connection, a timeout, a connection cut, HTTP
 * 500, 502, 503, 504, 429, S3's RequestTimeout and SlowDown) are tried
 * again after a pause that doubles each time (with jitter), up to
 * max_attempts in all; the others fail at once. A file larger than
 * part_bytes goes up in parts (multipart upload, each part retried on its
 * own); an upload that fails is aborted, so no parts are left behind. A
 * server that sends nothing for stall_s seconds counts as a timeout.
 * Errors are CT_EIO naming the URL, the request, the attempts and what the
 * server or the connection said; CT_ENOENT (an object that does not
 * exist) is never retried. If a call fails, nothing it was asked to
 * write counts: an upload is not there, a download's file is removed. */
#ifndef CTRIAL_STORE_S3_H
#define CTRIAL_STORE_S3_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *bucket;        /* required */
    const char *endpoint_url;  /* "http://host:port" of an S3-compatible store; NULL: AWS */
    const char *access_key;    /* NULL: AWS_ACCESS_KEY_ID */
    const char *secret_key;    /* NULL: AWS_SECRET_ACCESS_KEY */
    const char *session_token; /* NULL: AWS_SESSION_TOKEN (temporary credentials) */
    const char *region;        /* NULL: AWS_REGION, AWS_DEFAULT_REGION, us-east-1 */
    int max_attempts;          /* tries per request, the first included (5) */
    double backoff_s;          /* the first pause before trying again (0.25 s); doubles each time, at most 20 s */
    double connect_timeout_s;  /* (10) */
    double stall_s;            /* a response silent this long is a timeout (60) */
    size_t part_bytes;         /* files larger than this go up in parts of this size (64 MiB; at least 5 MiB, S3's least) */
} cti_s3_opts;

cti_s3_opts cti_s3_default_opts(void);

typedef struct cti_s3 cti_s3;

/* A client for one bucket (nothing is sent yet). NEW, or NULL + error:
 * CT_EINVAL for no bucket, no credentials (naming where they were looked
 * for) or an endpoint that is not an http(s) URL. */
cti_s3 *cti_s3_new(const cti_s3_opts *opts);
void cti_s3_free(cti_s3 *s3);

/* "s3://bucket/key" for messages; a static buffer per thread. */
const char *cti_s3_url(const cti_s3 *s3, const char *key);

/* Uploads the file at path as key (in parts when it is larger than
 * part_bytes). Returns a status. */
int cti_s3_put_file(cti_s3 *s3, const char *key, const char *path);
/* Uploads n bytes as key. Returns a status. */
int cti_s3_put_bytes(cti_s3 *s3, const char *key, const void *data, size_t n);
/* Downloads key into the file at path (created or replaced; removed on
 * failure). *size (may be NULL): its bytes. Returns a status: CT_ENOENT
 * when there is no such object. */
int cti_s3_get_file(cti_s3 *s3, const char *key, const char *path, int64_t *size);
/* Downloads key into memory: *out NEW (malloc'd, NUL-terminated, the
 * caller frees it), *n its bytes; more than max bytes is CT_EIO. Returns a
 * status: CT_ENOENT when there is no such object. */
int cti_s3_get_bytes(cti_s3 *s3, const char *key, size_t max, char **out, size_t *n);

typedef struct {
    char *key;
    int64_t size;
} cti_s3_object;

/* Every object whose key begins with prefix, in key order (all pages of
 * ListObjectsV2). *out NEW (cti_s3_objects_free), *n its count. Returns a
 * status. */
int cti_s3_list(cti_s3 *s3, const char *prefix, cti_s3_object **out, size_t *n);
void cti_s3_objects_free(cti_s3_object *objs, size_t n);
/* Deletes key (an object that is not there is no error, as in S3). Returns
 * a status. */
int cti_s3_delete(cti_s3 *s3, const char *key);

#endif
