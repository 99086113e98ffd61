/* libFuzzer target: ct_pth_load_buffer (the reader of ct_pth_load, on
 * memory) on arbitrary bytes. Beyond "no crash, no leak, no undefined
 * behaviour": bad bytes are always CT_EFORMAT with no value out, and a
 * value that loads must save (ct_pth_save) and load back equal, unless it
 * holds one storage under two dtypes, which ct_pth_save refuses as
 * torch.save does. Built and run by fuzz/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <ctrial/ctrial.h>

#include "pth/pth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ct_value *v = (ct_value *)&v;
    if (ct_pth_load_buffer(data, size, "fuzz.pth", &v) != 0) {
        if (ct_last_code() != CT_EFORMAT || v) abort(); /* bad bytes are a format error, always */
        ct_clear_error();
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_pth_%ld.pth", (long)getpid());
    if (ct_pth_save(path, v, NULL, NULL) != 0) {
        if (ct_last_code() != CT_EDTYPE) abort();
        ct_clear_error();
    } else {
        ct_value *back = NULL;
        if (ct_pth_load(path, &back) != 0 || !ct_value_equal(v, back)) abort();
        ct_value_free(back);
    }
    unlink(path);
    ct_value_free(v);
    return 0;
}
