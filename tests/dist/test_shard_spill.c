/* A sharded optimizer's state gathered for a checkpoint (src/dist/shard.c,
 * internal), under mpirun -np 2 and as one process: where rank 0 keeps
 * what it receives.
 *
 * Checked, with Adam stepped once on every rank's share of a small MLP:
 *   - rank 0's state dict holds every parameter's entry; the tensors of
 *     its own entries are its optimizer's (not in the spill file), those
 *     received from rank 1 lie in the spill file's regions
 *     (cti_shard_is_spilled), with values that are rank 1's;
 *   - nothing is left in the spill directory (the file is unlinked);
 *   - a tensor that shares a received tensor's bytes (a background
 *     snapshot's, ct_detach) keeps its region mapped and listed after the
 *     state dict is freed, and the region leaves the list with its last
 *     tensor;
 *   - one process: every entry its own, nothing spilled. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ct_test.h"
#include "dist/shard.h"

static int R, P;

/* The spill directory's entries other than . and .. */
static int entries_in(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.' || (e->d_name[1] && e->d_name[1] != '.');
    if (d) closedir(d);
    return n;
}

int main(void) {
    if (!ct_test_dist_init(&R, &P)) return 1;
    ct_set_num_threads(1);
    ct_manual_seed(3);
    ct_module *layers[2] = {ct_nn_linear(6, 8, true), ct_nn_linear(8, 2, true)};
    ct_module *net = ct_nn_sequential(2, layers);
    ct_adam_opts ao = ct_adam_defaults();
    ct_optim *opt = ct_optim_adam(net, &ao);
    cti_shard *sh = cti_shard_new(opt, R, P);
    CHECK(sh != NULL);
    /* One step of each rank's share on the same batch. */
    {
        ct_scope *sc = ct_scope_begin();
        ct_manual_seed(4);
        ct_tensor *x = ct_randn(CT_SHAPE(5, 6), NULL);
        CHECK_OK(ct_backward(ct_sum(ct_nn_forward(net, x))));
        ct_scope_end(sc);
    }
    CHECK_OK(ct_optim_step(opt));

    char dir[] = "/tmp/ct_shard_spill_XXXXXX";
    int64_t made = R != 0 || mkdtemp(dir) != NULL;
    CHECK_OK(ct_dist_allreduce_i64(&made, 1, CT_DIST_MIN));
    ct_value *sd = NULL;
    CHECK_OK(cti_shard_state_dict(sh, opt, 0, R == 0 ? dir : NULL, &sd));
    size_t n = ct_optim_num_params(opt);
    ct_tensor *kept = NULL; /* a received tensor's bytes, shared (rank 0) */
    const void *kept_at = NULL;
    double kept_sum = 0;
    if (R == 0) {
        const ct_value *state = ct_value_dict_get(sd, "state");
        CHECK(ct_value_len(state) == n);
        CHECK(entries_in(dir) == 0); /* the spill file is unlinked */
        for (size_t e = 0; e < ct_value_len(state); e++) {
            int64_t id = -1;
            const ct_value *entry = ct_value_dict_at(state, e, NULL, &id);
            bool mine = cti_shard_owner_of(sh, (size_t)id) == R;
            ct_tensor *avg = ct_value_get_tensor(ct_value_dict_get(entry, "exp_avg"));
            CHECK(avg != NULL);
            if (!avg) continue;
            bool spilled = cti_shard_is_spilled(ct_data_ptr(avg));
            if (spilled == mine) fprintf(stderr, "entry %lld: %s, spilled %d\n", (long long)id, mine ? "own" : "received", spilled);
            CHECK(spilled == !mine);
            if (!mine && !kept) {
                kept = ct_keep(ct_detach(avg));
                kept_at = ct_data_ptr(avg);
                ct_tensor *s = ct_sum(avg);
                ct_item(s, &kept_sum);
                ct_tensor_free(s);
                CHECK(kept_sum != 0); /* rank 1 stepped it */
            }
        }
        CHECK((kept != NULL) == (P > 1));
    } else {
        CHECK(sd == NULL);
    }
    /* Two ranks: rank 1's first entry's exp_avg, summed by rank 1, against
     * rank 0's received copy. */
    if (P == 2) {
        double theirs = 0;
        ct_value *mine = R == 1 ? ct_optim_state_dict(opt) : NULL;
        const ct_value *st = mine ? ct_value_dict_get(mine, "state") : NULL;
        for (size_t e = 0; R == 1 && e < ct_value_len(st); e++) {
            int64_t id = -1;
            const ct_value *entry = ct_value_dict_at(st, e, NULL, &id);
            if (cti_shard_owner_of(sh, (size_t)id) != 1) continue;
            ct_tensor *s = ct_sum(ct_value_get_tensor(ct_value_dict_get(entry, "exp_avg")));
            ct_item(s, &theirs);
            ct_tensor_free(s);
            break; /* (both state dicts are in parameter order) */
        }
        ct_value_free(mine);
        CHECK_OK(ct_dist_broadcast_bytes(&theirs, sizeof theirs, 1));
        if (R == 0) CHECK(theirs == kept_sum);
    }
    ct_value_free(sd);
    if (kept) {
        CHECK(cti_shard_is_spilled(kept_at)); /* still mapped: the detached tensor holds it */
        double again = 0;
        ct_tensor *s = ct_sum(kept);
        ct_item(s, &again);
        ct_tensor_free(s);
        CHECK(again == kept_sum);
        ct_tensor_free(kept);
        CHECK(!cti_shard_is_spilled(kept_at)); /* its last tensor went: unmapped, off the list */
    }
    if (R == 0) CHECK(rmdir(dir) == 0);
    cti_shard_free(sh);
    ct_optim_free(opt);
    ct_nn_free(net);
    return ct_test_dist_result("dist_shard_spill");
}
