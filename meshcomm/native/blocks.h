/* A side of a call that the face hands as a list of arrays, one block per member (blocks.c). */
#ifndef MESHCOMM_NATIVE_BLOCKS_H
#define MESHCOMM_NATIVE_BLOCKS_H

#include <Python.h>

/* Scratch memory a lane keeps for lists whose blocks lie apart, lent to one call at a time. */
typedef struct {
    char *memory;
    Py_ssize_t bytes;
    int lent;
} Scratch;

typedef struct {
    Py_buffer stack[8], *items; /* each block's buffer, held while the call runs */
    Py_ssize_t taken;
    Py_buffer whole;  /* one buffer over all the blocks: buf and len */
    char *borrowed;   /* the scratch `whole` lies in, or NULL when the blocks make one span themselves */
    char *allocated;  /* or memory taken for this call alone, the lane's scratch being lent already */
    Scratch *scratch;
} Blocks;

/* Whether the blocks lay apart, and `whole` is the lane's scratch (or memory of the call's own). */
static inline int blocks_apart(const Blocks *blocks) { return blocks->borrowed || blocks->allocated; }

int take_blocks(PyObject *list, Py_ssize_t count, Py_ssize_t block_bytes, PyObject *array_type, PyObject *like,
                int writable, Scratch *scratch, Blocks *blocks);
void copy_out_blocks(Blocks *blocks);
void release_blocks(Blocks *blocks);
void free_scratch(Scratch *scratch);

#endif
