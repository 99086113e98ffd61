/* tests/common/cases.h — what the C dump programs behind the parity
 * scripts share: a CASES.json array in, every case's results in OUT.pth
 * (one dict, by case name) for the script to compare with PyTorch's.
 *
 *     int main(int argc, char **argv) {
 *         json_t *cases = ct_test_load_cases(argc, argv);
 *         if (!cases) return 2;
 *         ct_value *all = ct_value_dict();
 *         ...                                  // a case at a time
 *         return ct_test_save_results(argv[2], all, cases);
 *     }
 */
#ifndef CT_TEST_CASES_H
#define CT_TEST_CASES_H

#include <jansson.h>
#include <stdio.h>

#include <ctrial/ctrial.h>

/* argv: PROG CASES.json OUT.pth. The cases (NEW array), or NULL after
 * saying why on stderr (usage, or where the JSON is wrong). */
static inline json_t *ct_test_load_cases(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s CASES.json OUT.pth\n", argv[0]);
        return NULL;
    }
    json_error_t err;
    json_t *cases = json_load_file(argv[1], 0, &err);
    if (!json_is_array(cases)) {
        fprintf(stderr, "%s:%d: %s\n", argv[1], err.line, err.text);
        json_decref(cases);
        return NULL;
    }
    return cases;
}

/* torch.save(all, path); frees all and cases. The program's exit code: 0,
 * or 1 after saying why. */
static inline int ct_test_save_results(const char *path, ct_value *all, json_t *cases) {
    int rc = ct_pth_save(path, all, NULL, NULL);
    if (rc != 0) fprintf(stderr, "%s: %s\n", path, ct_last_error());
    ct_value_free(all);
    json_decref(cases);
    return rc != 0;
}

#endif
