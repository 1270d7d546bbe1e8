/* frameeval.h - declarations shared by the C sources of kiln.frameeval._C.
 *
 * cache.c   per-code state in the code-extra slot (cache entries, skip mark), CacheEntry,
 *           argument-layout checks, the calls of replacement code
 * hook.c    the PEP 523 evaluation function, per-thread callbacks, install/uninstall
 * module.c  the Python-facing functions and the module object
 *
 * Every function here runs with the GIL held. None of them is safe on a free-threaded build.
 */
#ifndef KILN_FRAMEEVAL_H
#define KILN_FRAMEEVAL_H

#include "compat.h"

/* ---- cache.c ---- */

/* What kiln keeps for one code object, owned by the code's extra slot and freed with it.
 * Every live CodeState is on one doubly linked list so that reset() can reach them all. */
typedef struct CodeState {
    struct CodeState *prev;
    struct CodeState *next;
    PyObject *entries; /* tuple of CacheEntry, lookup order (newest first); never NULL */
    int skip;          /* never intercept frames of this code */
} CodeState;

/* One compiled entry: run `code` when `guard(L)` is true. */
typedef struct {
    PyObject_HEAD
    PyObject *guard;    /* callable(L) -> truth */
    PyObject *code;     /* replacement code object, same argument layout as the original */
    PyObject *function; /* function built from `code` on the last hit, or NULL */
} CacheEntryObject;

extern PyTypeObject CacheEntry_Type;

int kiln_cache_init(void);
/* The state of `code`, or NULL when it has none (no error is set). */
CodeState *kiln_code_state(PyCodeObject *code);
/* The state of `code`, created when missing; NULL with an exception on failure. */
CodeState *kiln_code_state_ensure(PyCodeObject *code);
int kiln_mark_skip(PyCodeObject *code);
/* Put `entry` first in state's entries (a new tuple); 0 or -1 with an exception. */
int kiln_prepend_entry(CodeState *state, PyObject *entry);
/* 0 when `replacement` can run in place of a frame of `original`, else -1 with ValueError. */
int kiln_check_layout(PyCodeObject *original, PyCodeObject *replacement);
/* Clear entries and skip marks of every code object; returns the number of codes touched. */
Py_ssize_t kiln_reset_all(void);
/* The dict of argument names (and bound free variables) of an unstarted frame. */
PyObject *kiln_frame_locals(_PyInterpreterFrame *frame, PyCodeObject *code);
/* Call `code` in place of the unstarted `frame`; `cached` (may be NULL) is a slot holding a
 * reusable function object. Returns a new reference, or NULL with an exception. */
PyObject *kiln_call_replacement(_PyInterpreterFrame *frame, PyObject *code, PyObject **cached);

/* ---- hook.c ---- */

extern PyObject *kiln_SKIP;     /* returned by a callback: never intercept this code again */
extern PyObject *kiln_RUN_ONLY; /* set as the callback: use cache hits, never call back */

int kiln_hook_init(void);
/* Set the calling thread's callback (None disables); returns the previous one (new ref). */
PyObject *kiln_set_callback(PyObject *callback);
/* The calling thread's callback (new reference, None when unset). */
PyObject *kiln_get_callback(void);
int kiln_hook_installed(void);
/* 0 in the interpreter that imported the module, else -1 with RuntimeError (a legacy
 * subinterpreter gets a copy of the module without running its init). */
int kiln_check_interpreter(void);
/* Keep the evaluation function installed even with no callback set; returns the old flag. */
int kiln_keep_installed(int keep);
/* Number of threads whose callback is set. */
Py_ssize_t kiln_active_threads(void);

#endif /* KILN_FRAMEEVAL_H */
