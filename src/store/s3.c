/* src/store/s3.c — objects in S3 through libcurl (s3.h).
 *
 * One request, in the order the code meets it: the URL (endpoint, bucket,
 * the key's segments percent-encoded, a query already in SigV4's canonical
 * order), libcurl's SigV4 signature with an unsigned payload (the body is
 * not hashed: HTTPS protects it in transit, and S3 checks a part's size),
 * the body from memory or from a range of a file, the response into memory
 * or into a file, then the status: 2xx done, 404 CT_ENOENT, a failure that
 * may pass tried again after a growing pause, anything else CT_EIO with
 * S3's own Code and Message. */
#define _POSIX_C_SOURCE 200809L
#include "store/s3.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctrial/error.h"

enum { ERR_BODY_MAX = 64 << 10, LIST_BODY_MAX = 64 << 20, MIN_PART = 5 << 20, MAX_PARTS = 10000 };

struct cti_s3 {
    cti_s3_opts o;
    char *bucket, *endpoint, *userpwd, *sigv4, *token_header;
    CURL *curl; /* one handle: its connections are kept between requests */
};

cti_s3_opts cti_s3_default_opts(void) {
    return (cti_s3_opts){.max_attempts = 5,
                         .backoff_s = 0.25,
                         .connect_timeout_s = 10,
                         .stall_s = 60,
                         .part_bytes = (size_t)64 << 20};
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void init_libraries(void) {
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    xmlInitParser();
}

/* ---- the client ---------------------------------------------------------------- */

static const char *first_env(const char *a, const char *b) {
    const char *v = getenv(a);
    if ((!v || !*v) && b) v = getenv(b);
    return v && *v ? v : NULL;
}

void cti_s3_free(cti_s3 *s3) {
    if (!s3) return;
    if (s3->curl) curl_easy_cleanup(s3->curl);
    free(s3->bucket);
    free(s3->endpoint);
    free(s3->userpwd);
    free(s3->sigv4);
    free(s3->token_header);
    free(s3);
}

cti_s3 *cti_s3_new(const cti_s3_opts *opts) {
    cti_s3_opts o = opts ? *opts : cti_s3_default_opts();
    if (!o.bucket || !*o.bucket || strchr(o.bucket, '/')) {
        ct_set_error(CT_EINVAL, "s3: the bucket is %s%s%s (a bucket's name, without '/')", o.bucket ? "'" : "",
                     o.bucket ? o.bucket : "missing", o.bucket ? "'" : "");
        return NULL;
    }
    pthread_once(&once, init_libraries);
    if (global_rc != CURLE_OK) {
        ct_set_error(CT_EIO, "s3: libcurl did not start: %s", curl_easy_strerror(global_rc));
        return NULL;
    }
    const char *access = o.access_key ? o.access_key : first_env("AWS_ACCESS_KEY_ID", NULL);
    const char *secret = o.secret_key ? o.secret_key : first_env("AWS_SECRET_ACCESS_KEY", NULL);
    const char *token = o.session_token ? o.session_token : first_env("AWS_SESSION_TOKEN", NULL);
    const char *region = o.region ? o.region : first_env("AWS_REGION", "AWS_DEFAULT_REGION");
    const char *endpoint = o.endpoint_url ? o.endpoint_url : first_env("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL");
    if (!access || !secret) {
        ct_set_error(CT_EINVAL, "s3://%s: no credentials: set access_key and secret_key in checkpoint_storage, or "
                     "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", o.bucket);
        return NULL;
    }
    if (endpoint && strncmp(endpoint, "http://", 7) != 0 && strncmp(endpoint, "https://", 8) != 0) {
        ct_set_error(CT_EINVAL, "s3://%s: endpoint_url '%s' is not an http:// or https:// URL", o.bucket, endpoint);
        return NULL;
    }
    if (!region) region = "us-east-1";
    if (o.max_attempts < 1) o.max_attempts = 1;
    if (o.part_bytes < MIN_PART) o.part_bytes = MIN_PART;
    cti_s3 *s3 = calloc(1, sizeof *s3);
    if (!s3) goto oom;
    s3->o = o;
    s3->bucket = strdup(o.bucket);
    char aws[256];
    snprintf(aws, sizeof aws, "https://s3.%s.amazonaws.com", region);
    s3->endpoint = strdup(endpoint ? endpoint : aws);
    size_t ul = strlen(access) + strlen(secret) + 2;
    s3->userpwd = malloc(ul);
    char sig[160];
    snprintf(sig, sizeof sig, "aws:amz:%s:s3", region);
    s3->sigv4 = strdup(sig);
    s3->token_header = NULL;
    if (token) {
        size_t tl = strlen(token) + 32;
        if ((s3->token_header = malloc(tl))) snprintf(s3->token_header, tl, "x-amz-security-token: %s", token);
    }
    s3->curl = curl_easy_init();
    if (!s3->bucket || !s3->endpoint || !s3->userpwd || !s3->sigv4 || (token && !s3->token_header) || !s3->curl)
        goto oom;
    snprintf(s3->userpwd, ul, "%s:%s", access, secret);
    size_t el = strlen(s3->endpoint);
    while (el > 0 && s3->endpoint[el - 1] == '/') s3->endpoint[--el] = '\0';
    s3->o.bucket = s3->bucket;
    s3->o.endpoint_url = s3->endpoint;
    s3->o.access_key = s3->o.secret_key = s3->o.session_token = s3->o.region = NULL; /* not kept: the handle's copies */
    return s3;
oom:
    cti_s3_free(s3);
    ct_set_error(CT_ENOMEM, "s3: out of memory");
    return NULL;
}

const char *cti_s3_url(const cti_s3 *s3, const char *key) {
    static _Thread_local char buf[1280];
    snprintf(buf, sizeof buf, "s3://%s/%s", s3 ? s3->bucket : "?", key ? key : "");
    return buf;
}

/* ---- one request -------------------------------------------------------------- */

typedef struct {
    const char *method; /* GET PUT POST DELETE */
    const char *key;    /* NULL: the bucket itself */
    const char *query;  /* canonical (sorted, encoded), without '?'; NULL: none */
    const char *what;   /* for messages: "PUT", "upload part 3/9" */
    /* the body: memory, or bytes [off, off + len) of fd */
    const char *mem;
    size_t mem_len;
    int in_fd;
    int64_t off, len;
    /* the response's body on success: into out_fd, else memory up to max */
    int out_fd;
    size_t max;
} req;

typedef struct {
    long status;
    char *body; /* NUL-terminated */
    size_t n;
    bool over;  /* the body went past the limit */
    char etag[256];
    int64_t written;
    int write_errno;
} resp;

typedef struct {
    const req *r;
    int64_t pos; /* bytes of the body sent */
} body_state;

static size_t read_body(char *buf, size_t size, size_t nitems, void *ud) {
    body_state *b = ud;
    const req *r = b->r;
    int64_t total = r->in_fd >= 0 ? r->len : (int64_t)r->mem_len;
    int64_t want = (int64_t)(size * nitems), left = total - b->pos;
    if (want > left) want = left;
    if (want <= 0) return 0;
    if (r->in_fd < 0) {
        memcpy(buf, r->mem + b->pos, (size_t)want);
    } else {
        ssize_t got = pread(r->in_fd, buf, (size_t)want, r->off + b->pos);
        if (got <= 0) return CURL_READFUNC_ABORT; /* the file shrank or failed: the attempt fails */
        want = got;
    }
    b->pos += want;
    return (size_t)want;
}

static int seek_body(void *ud, curl_off_t offset, int origin) {
    body_state *b = ud;
    if (origin != SEEK_SET) return CURL_SEEKFUNC_CANTSEEK;
    b->pos = offset;
    return CURL_SEEKFUNC_OK;
}

typedef struct {
    const req *r;
    resp *p;
    CURL *curl;
} sink_state;

static size_t write_body(char *data, size_t size, size_t nmemb, void *ud) {
    sink_state *s = ud;
    size_t n = size * nmemb;
    long status = 0;
    curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
    if (s->r->out_fd >= 0 && status >= 200 && status < 300) {
        for (size_t done = 0; done < n;) {
            ssize_t w = write(s->r->out_fd, data + done, n - done);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                s->p->write_errno = errno ? errno : EIO;
                return 0; /* curl stops: CURLE_WRITE_ERROR */
            }
            done += (size_t)w;
        }
        s->p->written += (int64_t)n;
        return n;
    }
    size_t cap = status >= 200 && status < 300 ? s->r->max : ERR_BODY_MAX;
    if (s->p->n + n > cap) {
        s->p->over = true;
        return status >= 200 && status < 300 ? 0 : n; /* an error's body is only cut */
    }
    char *grown = realloc(s->p->body, s->p->n + n + 1);
    if (!grown) return 0;
    memcpy(grown + s->p->n, data, n);
    s->p->n += n;
    grown[s->p->n] = '\0';
    s->p->body = grown;
    return n;
}

static size_t read_header(char *data, size_t size, size_t nitems, void *ud) {
    resp *p = ud;
    size_t n = size * nitems;
    if (n > 5 && strncasecmp(data, "etag:", 5) == 0) {
        size_t a = 5, b = n;
        while (a < b && (data[a] == ' ' || data[a] == '\t')) a++;
        while (b > a && (data[b - 1] == '\r' || data[b - 1] == '\n' || data[b - 1] == ' ')) b--;
        snprintf(p->etag, sizeof p->etag, "%.*s", (int)(b - a), data + a);
    }
    return n;
}

/* The path of key, each segment percent-encoded as SigV4 wants
 * (unreserved characters kept, '/' between segments). NEW, or NULL. */
static char *encode_key(CURL *curl, const char *key) {
    size_t cap = strlen(key) * 3 + 1, at = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[0] = '\0';
    for (const char *s = key;;) {
        const char *slash = strchr(s, '/');
        size_t len = slash ? (size_t)(slash - s) : strlen(s);
        char *seg = curl_easy_escape(curl, s, (int)len);
        if (!seg) {
            free(out);
            return NULL;
        }
        at += (size_t)snprintf(out + at, cap - at, "%s%s", seg, slash ? "/" : "");
        curl_free(seg);
        if (!slash) break;
        s = slash + 1;
    }
    return out;
}

/* S3's <Code> and <Message> from an error body, or what there is. */
static void describe_failure(const resp *p, char *out, size_t len);

static bool transient_status(long status, const resp *p) {
    if (status == 500 || status == 502 || status == 503 || status == 504 || status == 429) return true;
    /* S3 answers 400 RequestTimeout when the client's body was too slow */
    return status == 400 && p->body && strstr(p->body, "<Code>RequestTimeout</Code>");
}

static bool transient_curl(CURLcode rc) {
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR: return true;
    default: return false;
    }
}

/* The pause before attempt `next` (2, 3, ...): backoff_s doubled each
 * time, at most 20 s, times a random 0.5 to 1.5 so that ranks retrying
 * together spread out. */
static void pause_before(const cti_s3 *s3, int next) {
    double d = s3->o.backoff_s;
    for (int i = 2; i < next && d < 20; i++) d *= 2;
    if (d > 20) d = 20;
    d *= 0.5 + (double)(rand() % 1000) / 1000.0;
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* One request with its retries. On success *p holds the status (2xx), the
 * ETag and the body (memory sinks); returns CT_OK. Otherwise a status with
 * the error set; p->status is the last status (0: no response). */
static int perform(cti_s3 *s3, const req *r, resp *p) {
    char *path = r->key ? encode_key(s3->curl, r->key) : strdup("");
    if (!path) return ct_set_error(CT_ENOMEM, "s3: out of memory");
    size_t ul = strlen(s3->endpoint) + strlen(s3->bucket) + strlen(path) + (r->query ? strlen(r->query) : 0) + 8;
    char *url = malloc(ul);
    if (!url) {
        free(path);
        return ct_set_error(CT_ENOMEM, "s3: out of memory");
    }
    snprintf(url, ul, "%s/%s%s%s%s%s", s3->endpoint, s3->bucket, r->key ? "/" : "", path, r->query ? "?" : "",
             r->query ? r->query : "");
    free(path);
    char reason[600] = "";
    int code = CT_EIO, tries = 0;
    bool done = false;
    while (!done && tries < s3->o.max_attempts) {
        if (++tries > 1) pause_before(s3, tries);
        free(p->body);
        memset(p, 0, sizeof *p);
        if (r->out_fd >= 0 && (ftruncate(r->out_fd, 0) != 0 || lseek(r->out_fd, 0, SEEK_SET) != 0)) {
            snprintf(reason, sizeof reason, "could not reset the file being written: %s", strerror(errno));
            break;
        }
        CURL *c = s3->curl;
        curl_easy_reset(c);
        struct curl_slist *h = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
        if (h && s3->token_header) h = curl_slist_append(h, s3->token_header);
        if (h && r->method[0] == 'P' && r->method[1] == 'O') h = curl_slist_append(h, "Content-Type: application/xml");
        if (!h) {
            free(url);
            return ct_set_error(CT_ENOMEM, "s3: out of memory");
        }
        body_state bs = {r, 0};
        sink_state ss = {r, p, c};
        char errbuf[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s3->sigv4);
        curl_easy_setopt(c, CURLOPT_USERPWD, s3->userpwd);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(s3->o.connect_timeout_s * 1000));
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)(s3->o.stall_s < 1 ? 1 : s3->o.stall_s));
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &ss);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, read_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, p);
        if (getenv("CTRIAL_S3_VERBOSE")) curl_easy_setopt(c, CURLOPT_VERBOSE, 1L); /* every request on stderr */
        int64_t body_len = r->in_fd >= 0 ? r->len : (int64_t)r->mem_len;
        if (strcmp(r->method, "PUT") == 0) {
            curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(c, CURLOPT_READFUNCTION, read_body);
            curl_easy_setopt(c, CURLOPT_READDATA, &bs);
            curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, seek_body);
            curl_easy_setopt(c, CURLOPT_SEEKDATA, &bs);
            curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)body_len);
        } else if (strcmp(r->method, "POST") == 0) {
            curl_easy_setopt(c, CURLOPT_POST, 1L);
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->mem ? r->mem : "");
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(r->mem ? r->mem_len : 0));
        } else if (strcmp(r->method, "DELETE") == 0) {
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
        }
        CURLcode rc = curl_easy_perform(c);
        curl_slist_free_all(h);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &p->status);
        if (rc != CURLE_OK) {
            if (rc == CURLE_WRITE_ERROR && p->write_errno) {
                snprintf(reason, sizeof reason, "writing the download failed: %s", strerror(p->write_errno));
                break;
            }
            if (rc == CURLE_WRITE_ERROR && p->over) {
                snprintf(reason, sizeof reason, "the object is larger than %zu bytes", r->max);
                break;
            }
            snprintf(reason, sizeof reason, "%s%s%s", curl_easy_strerror(rc), errbuf[0] ? ": " : "", errbuf);
            if (!transient_curl(rc)) break;
            continue;
        }
        if (p->status >= 200 && p->status < 300) {
            done = true;
            code = CT_OK;
        } else if (p->status == 404) {
            code = CT_ENOENT;
            describe_failure(p, reason, sizeof reason);
            break;
        } else {
            describe_failure(p, reason, sizeof reason);
            if (!transient_status(p->status, p)) break;
        }
    }
    if (!done) {
        char after[48] = "";
        if (tries > 1) snprintf(after, sizeof after, " after %d attempts", tries);
        ct_set_error(code, "%s: %s failed%s: %s (endpoint %s)", cti_s3_url(s3, r->key), r->what, after,
                     reason[0] ? reason : "no answer", s3->endpoint);
    }
    free(url);
    return done ? CT_OK : code;
}

/* ---- XML ---------------------------------------------------------------------- */

static xmlDocPtr parse_xml(const char *body, size_t n) {
    if (!body || n == 0 || n > INT32_MAX) return NULL;
    return xmlReadMemory(body, (int)n, "s3.xml", NULL,
                         XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NOBLANKS);
}

/* The first element named `name` below node (depth first), or NULL. */
static xmlNodePtr find(xmlNodePtr node, const char *name) {
    for (xmlNodePtr c = node ? node->children : NULL; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE) continue;
        if (xmlStrcmp(c->name, (const xmlChar *)name) == 0) return c;
        xmlNodePtr d = find(c, name);
        if (d) return d;
    }
    return NULL;
}

/* The text of the element `name` below node into out (empty when absent). */
static void text_of(xmlNodePtr node, const char *name, char *out, size_t len) {
    out[0] = '\0';
    xmlNodePtr e = find(node, name);
    xmlChar *t = e ? xmlNodeGetContent(e) : NULL;
    if (t) snprintf(out, len, "%s", (const char *)t);
    xmlFree(t);
}

static void describe_failure(const resp *p, char *out, size_t len) {
    char codebuf[128] = "", msg[400] = "";
    xmlDocPtr doc = parse_xml(p->body, p->n);
    if (doc) {
        xmlNodePtr root = xmlDocGetRootElement(doc);
        if (root && xmlStrcmp(root->name, (const xmlChar *)"Error") == 0) {
            text_of((xmlNodePtr)doc, "Code", codebuf, sizeof codebuf);
            text_of((xmlNodePtr)doc, "Message", msg, sizeof msg);
        }
        xmlFreeDoc(doc);
    }
    if (codebuf[0]) snprintf(out, len, "HTTP %ld %s: %s", p->status, codebuf, msg);
    else snprintf(out, len, "HTTP %ld", p->status);
}

/* ---- the calls ------------------------------------------------------------------ */

static req request(const char *method, const char *key, const char *what) {
    return (req){.method = method, .key = key, .what = what, .in_fd = -1, .out_fd = -1, .max = ERR_BODY_MAX};
}

int cti_s3_put_bytes(cti_s3 *s3, const char *key, const void *data, size_t n) {
    if (!s3 || !key || (!data && n)) return ct_set_error(CT_EINVAL, "cti_s3_put_bytes: NULL argument");
    req r = request("PUT", key, "PUT");
    r.mem = data;
    r.mem_len = n;
    resp p = {0};
    int rc = perform(s3, &r, &p);
    free(p.body);
    return rc;
}

/* A query value percent-encoded (NEW, curl_free), or NULL. */
static char *escape(cti_s3 *s3, const char *s) { return curl_easy_escape(s3->curl, s, 0); }

static void abort_upload(cti_s3 *s3, const char *key, const char *qid) {
    char q[1200];
    snprintf(q, sizeof q, "uploadId=%s", qid);
    req r = request("DELETE", key, "abort the multipart upload");
    r.query = q;
    resp p = {0};
    char keep[4096];
    int code = ct_last_code();
    snprintf(keep, sizeof keep, "%s", ct_last_error());
    perform(s3, &r, &p); /* best effort; the upload's own failure is what the caller hears */
    free(p.body);
    ct_set_error(code, "%s", keep);
}

/* A file in parts: CreateMultipartUpload, UploadPart for each part_bytes
 * (each with its own retries), CompleteMultipartUpload; aborted on any
 * failure. */
static int put_parts(cti_s3 *s3, const char *key, int fd, int64_t size) {
    int64_t part = (int64_t)s3->o.part_bytes;
    if ((size + part - 1) / part > MAX_PARTS) part = (size + MAX_PARTS - 1) / MAX_PARTS;
    int nparts = (int)((size + part - 1) / part);
    req r = request("POST", key, "start a multipart upload");
    r.query = "uploads=";
    resp p = {0};
    int rc = perform(s3, &r, &p);
    char id[1024] = "";
    if (rc == CT_OK) {
        xmlDocPtr doc = parse_xml(p.body, p.n);
        if (doc) text_of((xmlNodePtr)doc, "UploadId", id, sizeof id);
        xmlFreeDoc(doc);
        if (!id[0]) rc = ct_set_error(CT_EIO, "%s: the store started a multipart upload without an UploadId",
                                      cti_s3_url(s3, key));
    }
    free(p.body);
    if (rc != CT_OK) return rc;
    char *qid = escape(s3, id);
    size_t xml_cap = (size_t)nparts * 360 + 128, xml_n = 0;
    char *xml = malloc(xml_cap);
    if (!qid || !xml) {
        curl_free(qid);
        free(xml);
        return ct_set_error(CT_ENOMEM, "s3: out of memory");
    }
    xml_n += (size_t)snprintf(xml, xml_cap, "<CompleteMultipartUpload>");
    for (int i = 0; i < nparts && rc == CT_OK; i++) {
        char q[1200], what[64];
        snprintf(q, sizeof q, "partNumber=%d&uploadId=%s", i + 1, qid);
        snprintf(what, sizeof what, "upload part %d of %d", i + 1, nparts);
        req u = request("PUT", key, what);
        u.query = q;
        u.in_fd = fd;
        u.off = (int64_t)i * part;
        u.len = u.off + part <= size ? part : size - u.off;
        resp up = {0};
        rc = perform(s3, &u, &up);
        if (rc == CT_OK && !up.etag[0])
            rc = ct_set_error(CT_EIO, "%s: part %d came back without an ETag", cti_s3_url(s3, key), i + 1);
        if (rc == CT_OK)
            xml_n += (size_t)snprintf(xml + xml_n, xml_cap - xml_n,
                                      "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", i + 1, up.etag);
        free(up.body);
    }
    if (rc == CT_OK) {
        snprintf(xml + xml_n, xml_cap - xml_n, "</CompleteMultipartUpload>");
        char q[1200];
        snprintf(q, sizeof q, "uploadId=%s", qid);
        req c = request("POST", key, "complete the multipart upload");
        c.query = q;
        c.mem = xml;
        c.mem_len = strlen(xml);
        resp cp = {0};
        rc = perform(s3, &c, &cp);
        /* S3 may answer 200 with an <Error> body when completing fails late */
        if (rc == CT_OK && cp.body && strstr(cp.body, "<Error>")) {
            char why[600];
            describe_failure(&cp, why, sizeof why);
            rc = ct_set_error(CT_EIO, "%s: completing the multipart upload failed: %s", cti_s3_url(s3, key),
                              strstr(why, ": ") ? strstr(why, ": ") + 2 : why);
        }
        free(cp.body);
    }
    if (rc != CT_OK) abort_upload(s3, key, qid);
    curl_free(qid);
    free(xml);
    return rc;
}

int cti_s3_put_file(cti_s3 *s3, const char *key, const char *path) {
    if (!s3 || !key || !path) return ct_set_error(CT_EINVAL, "cti_s3_put_file: NULL argument");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return ct_set_error(e == ENOENT ? CT_ENOENT : CT_EIO, "%s: cannot read %s: %s", cti_s3_url(s3, key), path,
                            strerror(e));
    }
    int rc;
    if ((size_t)st.st_size > s3->o.part_bytes) {
        rc = put_parts(s3, key, fd, (int64_t)st.st_size);
    } else {
        req r = request("PUT", key, "PUT");
        r.in_fd = fd;
        r.off = 0;
        r.len = (int64_t)st.st_size;
        resp p = {0};
        rc = perform(s3, &r, &p);
        free(p.body);
    }
    close(fd);
    return rc;
}

int cti_s3_get_file(cti_s3 *s3, const char *key, const char *path, int64_t *size) {
    if (!s3 || !key || !path) return ct_set_error(CT_EINVAL, "cti_s3_get_file: NULL argument");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ct_set_error(CT_EIO, "%s: cannot write %s: %s", cti_s3_url(s3, key), path, strerror(errno));
    req r = request("GET", key, "GET");
    r.out_fd = fd;
    resp p = {0};
    int rc = perform(s3, &r, &p);
    curl_off_t cl = -1; /* libcurl fails a body shorter than its Content-Length itself; this says so plainly */
    if (rc == CT_OK && curl_easy_getinfo(s3->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) == CURLE_OK && cl >= 0 &&
        cl != p.written)
        rc = ct_set_error(CT_EIO, "%s: the download stopped at %lld of %lld bytes", cti_s3_url(s3, key),
                          (long long)p.written, (long long)cl);
    if (close(fd) != 0 && rc == CT_OK)
        rc = ct_set_error(CT_EIO, "%s: writing %s failed: %s", cti_s3_url(s3, key), path, strerror(errno));
    if (rc != CT_OK) unlink(path);
    else if (size) *size = p.written;
    free(p.body);
    return rc;
}

int cti_s3_get_bytes(cti_s3 *s3, const char *key, size_t max, char **out, size_t *n) {
    if (!s3 || !key || !out || !n) return ct_set_error(CT_EINVAL, "cti_s3_get_bytes: NULL argument");
    *out = NULL;
    *n = 0;
    req r = request("GET", key, "GET");
    r.max = max;
    resp p = {0};
    int rc = perform(s3, &r, &p);
    if (rc != CT_OK) {
        free(p.body);
        return rc;
    }
    if (!p.body && !(p.body = calloc(1, 1))) return ct_set_error(CT_ENOMEM, "s3: out of memory");
    *out = p.body;
    *n = p.n;
    return CT_OK;
}

void cti_s3_objects_free(cti_s3_object *objs, size_t n) {
    for (size_t i = 0; objs && i < n; i++) free(objs[i].key);
    free(objs);
}

/* Appends one page's <Contents> to *objs; *token: the next page's token
 * ("" on the last page). Returns a status. */
static int read_page(cti_s3 *s3, const char *prefix, const resp *p, cti_s3_object **objs, size_t *n, size_t *cap,
                     char *token, size_t token_len) {
    xmlDocPtr doc = parse_xml(p->body, p->n);
    xmlNodePtr root = doc ? xmlDocGetRootElement(doc) : NULL;
    if (!root || xmlStrcmp(root->name, (const xmlChar *)"ListBucketResult") != 0) {
        xmlFreeDoc(doc);
        return ct_set_error(CT_EIO, "%s: the listing is not a ListBucketResult", cti_s3_url(s3, prefix));
    }
    int rc = CT_OK;
    for (xmlNodePtr c = root->children; c && rc == CT_OK; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || xmlStrcmp(c->name, (const xmlChar *)"Contents") != 0) continue;
        char key[1100], size[32];
        text_of(c, "Key", key, sizeof key);
        text_of(c, "Size", size, sizeof size);
        if (!key[0]) continue;
        if (*n == *cap) {
            size_t ncap = *cap ? *cap * 2 : 64;
            cti_s3_object *g = realloc(*objs, ncap * sizeof *g);
            if (!g) {
                rc = ct_set_error(CT_ENOMEM, "s3: out of memory");
                break;
            }
            *objs = g;
            *cap = ncap;
        }
        char *k = strdup(key);
        if (!k) {
            rc = ct_set_error(CT_ENOMEM, "s3: out of memory");
            break;
        }
        (*objs)[*n].key = k;
        (*objs)[*n].size = strtoll(size, NULL, 10);
        (*n)++;
    }
    char truncated[16];
    text_of((xmlNodePtr)doc, "IsTruncated", truncated, sizeof truncated);
    text_of((xmlNodePtr)doc, "NextContinuationToken", token, token_len);
    if (strcmp(truncated, "true") != 0) token[0] = '\0';
    else if (!token[0]) rc = ct_set_error(CT_EIO, "%s: a truncated listing without a continuation token",
                                          cti_s3_url(s3, prefix));
    xmlFreeDoc(doc);
    return rc;
}

int cti_s3_list(cti_s3 *s3, const char *prefix, cti_s3_object **out, size_t *count) {
    if (!s3 || !prefix || !out || !count) return ct_set_error(CT_EINVAL, "cti_s3_list: NULL argument");
    *out = NULL;
    *count = 0;
    size_t cap = 0;
    char token[2048] = "";
    char *qprefix = escape(s3, prefix);
    if (!qprefix) return ct_set_error(CT_ENOMEM, "s3: out of memory");
    int rc = CT_OK;
    do {
        char *qtoken = token[0] ? escape(s3, token) : NULL;
        size_t ql = strlen(qprefix) + (qtoken ? strlen(qtoken) : 0) + 64;
        char *q = malloc(ql);
        if (!q || (token[0] && !qtoken)) {
            free(q);
            curl_free(qtoken);
            rc = ct_set_error(CT_ENOMEM, "s3: out of memory");
            break;
        }
        /* SigV4's canonical order: by parameter name */
        snprintf(q, ql, "%s%s%slist-type=2&prefix=%s", qtoken ? "continuation-token=" : "", qtoken ? qtoken : "",
                 qtoken ? "&" : "", qprefix);
        curl_free(qtoken);
        req r = request("GET", NULL, "list");
        r.query = q;
        r.max = LIST_BODY_MAX;
        resp p = {0};
        rc = perform(s3, &r, &p);
        free(q);
        if (rc == CT_OK) rc = read_page(s3, prefix, &p, out, count, &cap, token, sizeof token);
        free(p.body);
    } while (rc == CT_OK && token[0]);
    curl_free(qprefix);
    if (rc != CT_OK) {
        cti_s3_objects_free(*out, *count);
        *out = NULL;
        *count = 0;
    }
    return rc;
}

int cti_s3_delete(cti_s3 *s3, const char *key) {
    if (!s3 || !key) return ct_set_error(CT_EINVAL, "cti_s3_delete: NULL argument");
    req r = request("DELETE", key, "DELETE");
    resp p = {0};
    int rc = perform(s3, &r, &p);
    free(p.body);
    return rc == CT_ENOENT ? CT_OK : rc;
}
