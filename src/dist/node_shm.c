/* src/dist/node_shm.c — one shared-memory segment per rank, mapped by every
 * rank (node_shm.h). */
#define _GNU_SOURCE /* posix_fallocate */
#include "ctrial/config.h"
#include "ctrial/dist.h"

#if CTRIAL_HAVE_MPI /* only the MPI paths of grad_sync.c use it */
#include "dist/node_shm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "dist/comm.h"
#include "ctrial/error.h"

enum { NAME_LEN = 64 };

/* This rank's own mapping, shared by the handle and the tensors over it. */
typedef struct {
    char *base;
    size_t bytes;
    atomic_int refs;
} own_map;

struct cti_node_shm {
    int size, rank; /* in comm */
    int n, me;      /* the host's ranks, and this one's place among them */
    size_t bytes;
    char **at;      /* [n]: every host rank's segment as mapped here */
    own_map *own;
};

/* ---- the hosts ------------------------------------------------------------ */

void cti_node_layout_clear(cti_node_layout *lay) {
    free(lay->members);
    free(lay->host_of);
    memset(lay, 0, sizeof *lay);
}

/* CTRIAL_GRAD_SYNC_HOST_RANKS: 0 when unset, -1 when not a positive int. */
static int host_ranks_env(void) {
    const char *v = getenv("CTRIAL_GRAD_SYNC_HOST_RANKS");
    if (!v || !*v) return 0;
    char *end = NULL;
    errno = 0;
    long k = strtol(v, &end, 10);
    return errno || *end || k < 1 || k > INT_MAX ? -1 : (int)k;
}

/* This rank's host's lowest rank in comm: the machine's ranks, split into
 * hosts of k when k > 0. MPI_SUCCESS or an MPI error. */
static int host_leader(MPI_Comm comm, int rank, int k, int *leader) {
    MPI_Comm machine = MPI_COMM_NULL, host = MPI_COMM_NULL;
    int err = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &machine);
    int mrank = 0;
    if (err == MPI_SUCCESS) err = MPI_Comm_rank(machine, &mrank);
    if (err == MPI_SUCCESS) err = MPI_Comm_split(machine, k > 0 ? mrank / k : 0, mrank, &host);
    if (err == MPI_SUCCESS) err = MPI_Allreduce(&rank, leader, 1, MPI_INT, MPI_MIN, host);
    if (host != MPI_COMM_NULL) MPI_Comm_free(&host);
    if (machine != MPI_COMM_NULL) MPI_Comm_free(&machine);
    return err;
}

int cti_node_layout_get(MPI_Comm comm, cti_node_layout *out) {
    memset(out, 0, sizeof *out);
    int size = 0, rank = 0;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    int k = host_ranks_env();
    /* [2 * size]: every rank's host leader and whether its setting was bad;
     * members is sized for the largest host there can be */
    int mine[2] = {rank, k < 0}, *all = malloc(2 * (size_t)size * sizeof *all);
    int *count = calloc((size_t)size, sizeof *count);
    out->members = malloc((size_t)size * sizeof *out->members);
    out->host_of = malloc((size_t)size * sizeof *out->host_of);
    /* the ranks agree on having their memory before gathering into it */
    int had = all && count && out->members && out->host_of, all_had = 0;
    int err = MPI_Allreduce(&had, &all_had, 1, MPI_INT, MPI_MIN, comm);
    if (err == MPI_SUCCESS && all_had) err = host_leader(comm, rank, k < 0 ? 0 : k, &mine[0]);
    if (err == MPI_SUCCESS && all_had) err = MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, comm);
    int rc = CT_OK;
    if (err != MPI_SUCCESS) {
        rc = cti_dist_mpi_failed("grad_sync", "finding the ranks of each host", err);
    } else if (!all_had) {
        rc = ct_set_error(CT_ENOMEM, "grad_sync: rank %d: %s out of memory", rank, had ? "another rank ran" : "ran");
    } else {
        for (int q = 0; q < size; q++) {
            if (!all[2 * q + 1]) continue;
            if (q == rank)
                rc = ct_set_error(CT_EINVAL,
                                  "grad_sync: rank %d: CTRIAL_GRAD_SYNC_HOST_RANKS='%s': expected a positive number "
                                  "of ranks per host",
                                  q, getenv("CTRIAL_GRAD_SYNC_HOST_RANKS"));
            else
                rc = ct_set_error(CT_EINVAL,
                                  "grad_sync: rank %d's CTRIAL_GRAD_SYNC_HOST_RANKS is not a positive number of "
                                  "ranks per host",
                                  q);
            break;
        }
    }
    if (rc == CT_OK) {
        for (int q = 0; q < size; q++) count[all[2 * q]]++;
        out->local_size = count[mine[0]];
        out->min_local_size = size;
        for (int q = 0, m = 0; q < size; q++) {
            /* a host's leader is its lowest rank: numbered before its others */
            out->host_of[q] = all[2 * q] == q ? out->hosts : out->host_of[all[2 * q]];
            if (all[2 * q] == q) { /* q leads a host */
                if (q < mine[0]) out->host++;
                out->hosts++;
                if (count[q] < out->min_local_size) out->min_local_size = count[q];
                if (count[q] > out->max_local_size) out->max_local_size = count[q];
            }
            if (all[2 * q] != mine[0]) continue;
            if (q == rank) out->local_rank = m;
            out->members[m++] = q;
        }
    }
    free(all);
    free(count);
    if (rc != CT_OK) cti_node_layout_clear(out);
    return rc;
}

/* ---- the segments ---------------------------------------------------------- */

void *cti_node_shm_ref(cti_node_shm *m) {
    atomic_fetch_add(&m->own->refs, 1);
    return m->own;
}

void cti_node_shm_unref(void *data, void *ctx) {
    (void)data;
    own_map *o = ctx;
    if (atomic_fetch_sub(&o->refs, 1) != 1) return;
    munmap(o->base, o->bytes);
    free(o);
}

char *cti_node_shm_at(const cti_node_shm *m, int q) { return m->at[q]; }

void cti_node_shm_free(cti_node_shm *m) {
    if (!m) return;
    for (int q = 0; m->at && q < m->n; q++)
        if (q != m->me && m->at[q]) munmap(m->at[q], m->bytes);
    if (m->own) cti_node_shm_unref(NULL, m->own);
    free(m->at);
    free(m);
}

/* Every rank's answer: true when all of them said yes. */
static bool all_agree(bool mine) {
    int64_t v = mine;
    return ct_dist_allreduce_i64(&v, 1, CT_DIST_MIN) == 0 && v == 1;
}

/* ---- names left behind ---------------------------------------------------- */

/* A segment's name lives from its creation until every rank of the host
 * has mapped it; a rank killed in between (or the job, stuck there, ended
 * by its timeout) leaves it in /dev/shm until reboot. So the creator holds
 * an exclusive flock(2) on the segment while its name exists, which the
 * kernel drops when the process dies, and every set-up first removes the
 * ctrial segments of this user that nobody holds: their creator is gone.
 * A segment modified less than STALE_AFTER seconds ago is left alone (its
 * creator may be between shm_open and flock). Safe across jobs, users (only this
 * user's are touched) and PID namespaces (a lock, not a process id). */
enum { STALE_AFTER = 5 };

int cti_node_shm_remove_stale(void) {
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    int removed = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "ctrial-", 7) != 0 || strlen(e->d_name) + 2 > NAME_LEN) continue;
        char name[NAME_LEN];
        snprintf(name, sizeof name, "/%s", e->d_name);
        int fd = shm_open(name, O_RDONLY, 0);
        if (fd < 0) continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && S_ISREG(st.st_mode) &&
            now - st.st_mtime > STALE_AFTER && flock(fd, LOCK_EX | LOCK_NB) == 0)
            removed += shm_unlink(name) == 0;
        close(fd); /* drops the lock taken to look */
    }
    closedir(d);
    return removed;
}

/* Creates, reserves and maps this rank's segment under a fresh name, and
 * locks it (*held: the descriptor that holds the lock, open until the name
 * is removed). */
static bool create_own(cti_node_shm *m, char *name, int *held, char *why, size_t why_len) {
    static unsigned seq;
    snprintf(name, NAME_LEN, "/ctrial-%ld-%d-%u-%llx", (long)getpid(), m->rank, ++seq,
             (unsigned long long)(cti_clock_monotonic() * 1e9));
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        snprintf(why, why_len, "rank %d: shm_open %s: %s", m->rank, name, strerror(errno));
        name[0] = '\0';
        return false;
    }
    int err = flock(fd, LOCK_EX | LOCK_NB) != 0 ? errno : 0;
    if (!err) err = ftruncate(fd, (off_t)m->bytes) != 0 ? errno : posix_fallocate(fd, 0, (off_t)m->bytes);
    void *p = err ? MAP_FAILED : mmap(NULL, m->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!err && p == MAP_FAILED) err = errno;
    if (err) {
        snprintf(why, why_len, "rank %d: reserving %zu bytes of shared memory (%s): %s", m->rank, m->bytes, name,
                 strerror(err));
        shm_unlink(name);
        close(fd);
        name[0] = '\0';
        return false;
    }
    m->own = malloc(sizeof *m->own);
    if (!m->own) {
        munmap(p, m->bytes);
        shm_unlink(name);
        close(fd);
        name[0] = '\0';
        snprintf(why, why_len, "rank %d: out of memory", m->rank);
        return false;
    }
    *held = fd;
    m->own->base = p;
    m->own->bytes = m->bytes;
    atomic_init(&m->own->refs, 1);
    m->at[m->me] = p;
    return true;
}

/* Maps every other rank of the host's segment read-only, by the names
 * all_names holds (NAME_LEN bytes per rank of comm). */
static bool map_peers(cti_node_shm *m, const int *members, const char *all_names, char *why, size_t why_len) {
    for (int i = 0; i < m->n; i++) {
        int q = members[i];
        if (q == m->rank) continue;
        const char *name = all_names + (size_t)q * NAME_LEN;
        int fd = shm_open(name, O_RDONLY, 0);
        if (fd < 0) {
            snprintf(why, why_len, "rank %d: opening rank %d's segment %s: %s", m->rank, q, name, strerror(errno));
            return false;
        }
        void *p = mmap(NULL, m->bytes, PROT_READ, MAP_SHARED, fd, 0);
        int err = errno;
        close(fd);
        if (p == MAP_FAILED) {
            snprintf(why, why_len, "rank %d: mapping rank %d's segment: %s", m->rank, q, strerror(err));
            return false;
        }
        m->at[i] = p;
    }
    return true;
}

/* Every rank's name into all (NAME_LEN bytes each, in rank order):
 * gathered on rank 0 and sent to every rank. */
static bool exchange_names(const cti_node_shm *m, const char *name, char *all) {
    void *gathered = NULL;
    size_t *lens = calloc((size_t)m->size, sizeof *lens);
    bool ok = lens && ct_dist_gather_bytes(name, NAME_LEN, 0, &gathered, lens) == 0;
    if (ok && m->rank == 0) memcpy(all, gathered, (size_t)m->size * NAME_LEN);
    ok = ct_dist_broadcast_bytes(all, (size_t)m->size * NAME_LEN, 0) == 0 && ok;
    free(gathered);
    free(lens);
    return ok;
}

cti_node_shm *cti_node_shm_new(MPI_Comm comm, int n, const int *members, size_t bytes, bool want, char *why,
                             size_t why_len) {
    snprintf(why, why_len, "%s", "");
    cti_node_shm *m = calloc(1, sizeof *m);
    int size = 0, rank = 0;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    if (m) {
        m->size = size;
        m->rank = rank;
        m->n = n;
        m->me = -1;
        for (int i = 0; i < n; i++)
            if (members[i] == rank) m->me = i;
        m->bytes = bytes ? bytes : 1;
        m->at = calloc((size_t)n, sizeof *m->at);
    }
    char *all = calloc((size_t)size, NAME_LEN);
    bool ok = m && m->at && all && m->me >= 0;
    if (!ok) snprintf(why, why_len, "rank %d: out of memory", rank);
    else if (!want) snprintf(why, why_len, "rank %d: not asked to", rank);
    if (!all_agree(ok && want)) {
        if (!why[0]) snprintf(why, why_len, "%s", "another rank did not take part");
        cti_node_shm_free(m);
        free(all);
        return NULL;
    }
    char name[NAME_LEN] = "";
    int held = -1;
    cti_node_shm_remove_stale();
    ok = create_own(m, name, &held, why, why_len);
    ok = exchange_names(m, name, all) && ok;
    ok = all_agree(ok) && map_peers(m, members, all, why, why_len);
    ok = all_agree(ok);
    /* Every rank has mapped every segment (or given up): the names can go,
     * and then the lock that marked this one as in use. */
    if (name[0]) shm_unlink(name);
    if (held >= 0) close(held);
    free(all);
    if (!ok) {
        if (!why[0]) snprintf(why, why_len, "another rank could not share memory");
        cti_node_shm_free(m);
        return NULL;
    }
    return m;
}

#endif /* CTRIAL_HAVE_MPI */
