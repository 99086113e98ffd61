/* fuzz/record_tensors.h — tensors as plain records, so that the fuzzers of
 * module pth (fuzz_pth.c, fuzz_pkl.c) run its loader and saver with modules
 * pth and base alone: no libtorch. A storage is a block of host memory
 * (every other one claims to be on cuda:0, so that saving copies it out in
 * ranges as it would from a GPU) and a tensor a view of one. The table
 * aborts the run where the engine asks for something a correct engine
 * never asks: a view or a range outside its storage, a released storage, a
 * host pointer of a device storage. */
#ifndef CTRIAL_FUZZ_RECORD_TENSORS_H
#define CTRIAL_FUZZ_RECORD_TENSORS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/value_tensor.h"
#include "pth/pth.h"

typedef struct storage storage;
struct storage {
    int refs;
    bool on_device; /* described as cuda:0: read through storage_read */
    bool checked;   /* against the archive's entries */
    uint64_t nbytes;
    unsigned char *bytes;
    storage *partner; /* its counterpart in the value loaded back */
};

/* This program links no shim: a ct_tensor is a view of a storage. */
struct ct_tensor {
    int refs;
    storage *st;
    ct_dtype dtype;
    int64_t offset;
    int ndim;
    int64_t size[CT_PTH_MAX_DIMS], stride[CT_PTH_MAX_DIMS];
    bool requires_grad;
};

/* pth's tensor table over the records above. */
extern const cti_pth_tensors record_tensors;
/* Storages alive now: 0 once every value made from them is freed. */
extern long record_live_storages;

/* A NEW storage of nbytes bytes (0xA5 in every byte); *data its memory. */
void *record_storage_new(uint64_t nbytes, unsigned char **data);
/* Drops one reference to a storage. */
void record_storage_release(void *storage);
/* The tensor of a tensor leaf (aborts for another kind). Borrowed. */
ct_tensor *record_tensor_of(const ct_value *leaf);
/* a and b are equal; their tensors share storages alike: pairing each
 * storage of a with the storage of b in the same place never pairs one
 * with two (aborts otherwise). The storages' partner fields are clear
 * again after the check, so any value can be checked again. */
void record_check_sharing(const ct_value *a, const ct_value *b);

#endif
