/* An all_gather's output and a reduce_scatter's input, and a gather's output and a scatter's input on the root,
 * come from the face as a list of arrays, one block per member (group/lanes.py's LISTED). A lane (_core.c) runs
 * such a call on one buffer over the blocks: the blocks themselves when they lie one after another, as the chunks
 * of one array do, else scratch memory it copies through. It takes only what the face's checks would pass: a list
 * or tuple of one numpy array per member, each of the tensor's dtype and bytes, C-contiguous (and writable, for an
 * output); anything else it leaves to the face, which names what is wrong. */
#include "blocks.h"

#include "arrays.h"

#include <string.h>

static PyObject *DTYPE; /* "dtype", interned */

/* 1 when `item` is a block the lane takes: an array of `like`'s dtype, of `block_bytes` bytes; 0 when not; -1 with
 * an error set. */
static int is_block(PyObject *item, PyObject *array_type, PyObject *dtype, Py_ssize_t block_bytes, int writable,
                    Py_buffer *view) {
    if ((PyObject *)Py_TYPE(item) != array_type) return 0;
    PyObject *its = PyObject_GetAttr(item, DTYPE);
    if (!its) return -1;
    Py_DECREF(its);
    if (its != dtype) return 0; /* numpy's built-in dtypes are one object each; any other is the face's to judge */
    int taken = bytes_of(item, array_type, writable, view);
    if (taken <= 0) return taken;
    if (view->len != block_bytes) {
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

/* The lane's scratch for one call, grown to `bytes` at need; memory of the call's own (`*allocated`) while another
 * thread's call has it. */
static char *lend_scratch(Scratch *scratch, Py_ssize_t bytes, char **allocated) {
    if (scratch->lent) return *allocated = PyMem_Malloc(bytes);
    if (bytes > scratch->bytes) {
        char *grown = PyMem_Realloc(scratch->memory, bytes);
        if (!grown) return NULL;
        scratch->memory = grown;
        scratch->bytes = bytes;
    }
    scratch->lent = 1;
    return scratch->memory;
}

/* 1 with `blocks` holding the `count` blocks of `list` and one buffer over them (copied in when they lie apart and
 * are an input); 0 when the lane does not take them, before anything moved; -1 with an error set. */
int take_blocks(PyObject *list, Py_ssize_t count, Py_ssize_t block_bytes, PyObject *array_type, PyObject *like,
                int writable, Scratch *scratch, Blocks *blocks) {
    memset(blocks, 0, sizeof(*blocks));
    if (!DTYPE && !(DTYPE = PyUnicode_InternFromString("dtype"))) return -1;
    if (!(PyList_CheckExact(list) || PyTuple_CheckExact(list)) || PySequence_Fast_GET_SIZE(list) != count) return 0;
    PyObject *dtype = PyObject_GetAttr(like, DTYPE);
    if (!dtype) return -1;
    Py_DECREF(dtype); /* held by `like`, which the caller holds */
    blocks->items = count <= 8 ? blocks->stack : PyMem_Malloc(sizeof(Py_buffer) * count);
    if (!blocks->items) {
        PyErr_NoMemory();
        return -1;
    }
    int spanned = 1;
    for (Py_ssize_t i = 0; i < count; i++) {
        /* the list is read item by item: nothing the lane calls here runs Python code that could change it */
        int taken = is_block(PySequence_Fast_GET_ITEM(list, i), array_type, dtype, block_bytes, writable,
                             &blocks->items[i]);
        if (taken <= 0) {
            release_blocks(blocks);
            return taken;
        }
        blocks->taken++;
        spanned &= i == 0 || (char *)blocks->items[i].buf == (char *)blocks->items[i - 1].buf + block_bytes;
    }
    blocks->whole.len = count * block_bytes;
    if (spanned || blocks->whole.len == 0) {
        blocks->whole.buf = count ? blocks->items[0].buf : NULL;
        return 1;
    }
    blocks->scratch = scratch;
    char *memory = lend_scratch(scratch, blocks->whole.len, &blocks->allocated);
    if (!memory) {
        release_blocks(blocks);
        PyErr_NoMemory();
        return -1;
    }
    blocks->borrowed = blocks->allocated ? NULL : memory;
    blocks->whole.buf = memory;
    if (!writable)
        for (Py_ssize_t i = 0; i < count; i++) memcpy(memory + i * block_bytes, blocks->items[i].buf, block_bytes);
    return 1;
}

/* After the call wrote into the buffer over the blocks: the blocks get their bytes, when they lie apart. */
void copy_out_blocks(Blocks *blocks) {
    if (!blocks_apart(blocks)) return;
    const char *from = blocks->whole.buf;
    for (Py_ssize_t i = 0; i < blocks->taken; i++) memcpy(blocks->items[i].buf, from + i * blocks->items[i].len,
                                                            blocks->items[i].len);
}

void release_blocks(Blocks *blocks) {
    for (Py_ssize_t i = 0; i < blocks->taken; i++) PyBuffer_Release(&blocks->items[i]);
    if (blocks->items && blocks->items != blocks->stack) PyMem_Free(blocks->items);
    if (blocks->borrowed) blocks->scratch->lent = 0;
    PyMem_Free(blocks->allocated);
    memset(blocks, 0, sizeof(*blocks));
}

void free_scratch(Scratch *scratch) {
    PyMem_Free(scratch->memory);
    memset(scratch, 0, sizeof(*scratch));
}
