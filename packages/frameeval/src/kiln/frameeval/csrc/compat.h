/* compat.h - every CPython-version difference that kiln.frameeval depends on, in one place.
 *
 * Supported: CPython 3.11, 3.12 and 3.13 (verified on 3.11.7, 3.12.1 and 3.13.0).
 * The rest of the C sources use only the KILN_* names defined here and never test
 * PY_VERSION_HEX themselves.
 *
 *   KILN_FRAME_CODE(f)            the frame's code object (PyCodeObject *)
 *   KILN_FRAME_FUNC(f)            the frame's function object (PyObject *, strong in the frame)
 *   KILN_FRAME_AT_START(f, co)    true when no instruction of the frame has run yet
 *   KILN_CODE_GET_EXTRA / SET_EXTRA / REQUEST_EXTRA_INDEX   the code-extra API (PEP 523)
 *   KILN_TRACING(ts)              true while the thread runs a trace, profile or monitoring
 *                                 function
 *   KILN_GC_COLLECTING(ts)        true while a garbage collection runs, in any thread (the
 *                                 collector runs gc.callbacks, finalizers and weakref
 *                                 callbacks; one of those may release the GIL, and other
 *                                 threads run meanwhile with the flag still set)
 *   kiln_release_frame(ts, f)     release a thread-owned frame that the default evaluator
 *                                 will not run (3.11: the caller does it, so nothing;
 *                                 3.12: clear and pop by hand; 3.13: exported helper)
 */
#ifndef KILN_FRAMEEVAL_COMPAT_H
#define KILN_FRAMEEVAL_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#  error "kiln.frameeval supports CPython 3.11, 3.12 and 3.13 only"
#endif
#ifdef Py_GIL_DISABLED
#  error "kiln.frameeval relies on the GIL: free-threaded builds are not supported"
#endif

/* The internal frame layout is needed to read arguments from an unstarted frame. */
#define Py_BUILD_CORE
#include "internal/pycore_frame.h"
/* 3.12's public objimpl.h maps _PyGC_FINALIZED to a function that pycore_gc.h (pulled in
 * by pycore_interp.h) then defines again as a static inline: drop the public alias. */
#ifdef _PyGC_FINALIZED
#  undef _PyGC_FINALIZED
#endif
#include "internal/pycore_interp.h"    /* the GC state: interp->gc.collecting */
#if PY_VERSION_HEX >= 0x030D0000
#  include "internal/pycore_ceval.h"   /* _PyEval_FrameClearAndPop */
#endif
#undef Py_BUILD_CORE

/* tstate->tracing is raised around every trace/profile (3.12+: monitoring) callback; the
 * collector's `collecting` flag (per interpreter) covers its callbacks, finalizers and
 * weakref callbacks. The same fields on 3.11, 3.12 and 3.13. */
#define KILN_TRACING(ts) ((ts)->tracing > 0)
#define KILN_GC_COLLECTING(ts) ((ts)->interp->gc.collecting)

#define KILN_CO_NOT_A_PLAIN_FUNCTION \
    (CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR)

/* ---------------------------------------------------------------- 3.11 */
#if PY_VERSION_HEX < 0x030C0000

#define KILN_FRAME_CODE(f) ((f)->f_code)
#define KILN_FRAME_FUNC(f) ((PyObject *)(f)->f_func)
#define KILN_FRAME_AT_START(f, co) ((f)->prev_instr == _PyCode_CODE(co) - 1)
#define KILN_CODE_GET_EXTRA(co, i, p) _PyCode_GetExtra((PyObject *)(co), (i), (p))
#define KILN_CODE_SET_EXTRA(co, i, v) _PyCode_SetExtra((PyObject *)(co), (i), (v))
#define KILN_REQUEST_EXTRA_INDEX(free) _PyEval_RequestCodeExtraIndex(free)

/* _PyEval_Vector clears and pops the frame after the evaluation function returns. */
static inline void
kiln_release_frame(PyThreadState *tstate, _PyInterpreterFrame *frame)
{
    (void)tstate;
    (void)frame;
}

/* ---------------------------------------------------------------- 3.12 */
#elif PY_VERSION_HEX < 0x030D0000

#define KILN_FRAME_CODE(f) ((f)->f_code)
#define KILN_FRAME_FUNC(f) ((f)->f_funcobj)
#define KILN_FRAME_AT_START(f, co) ((f)->prev_instr == _PyCode_CODE(co) - 1)
#define KILN_CODE_GET_EXTRA(co, i, p) PyUnstable_Code_GetExtra((PyObject *)(co), (i), (p))
#define KILN_CODE_SET_EXTRA(co, i, v) PyUnstable_Code_SetExtra((PyObject *)(co), (i), (v))
#define KILN_REQUEST_EXTRA_INDEX(free) PyUnstable_Eval_RequestCodeExtraIndex(free)

/* 3.12 leaves the frame to the evaluation function, and the helpers that clear and pop it
 * (_PyFrame_ClearExceptCode, _PyThreadState_PopFrame) are not exported. This is their
 * effect for the only frames kiln releases: thread-owned, unstarted, unlinked, with no
 * frame object (the hook declines frames that have one). */
static inline void
kiln_release_frame(PyThreadState *tstate, _PyInterpreterFrame *frame)
{
    for (int i = 0; i < frame->stacktop; i++) {
        Py_CLEAR(frame->localsplus[i]);
    }
    frame->stacktop = 0;
    Py_CLEAR(frame->f_locals);
    Py_DECREF(frame->f_funcobj);
    Py_DECREF(frame->f_code);

    PyObject **base = (PyObject **)frame;
    _PyStackChunk *chunk = tstate->datastack_chunk;
    if (base == &chunk->data[0]) {
        /* The frame opened this chunk: return to the previous one and free it. */
        _PyStackChunk *previous = chunk->previous;
        PyObjectArenaAllocator arena;
        PyObject_GetArenaAllocator(&arena);
        tstate->datastack_top = &previous->data[previous->top];
        tstate->datastack_chunk = previous;
        tstate->datastack_limit = (PyObject **)(((char *)previous) + previous->size);
        arena.free(arena.ctx, chunk, chunk->size);
    }
    else {
        tstate->datastack_top = base;
    }
}

/* ---------------------------------------------------------------- 3.13 */
#else

#define KILN_FRAME_CODE(f) _PyFrame_GetCode(f)
#define KILN_FRAME_FUNC(f) ((f)->f_funcobj)
#define KILN_FRAME_AT_START(f, co) ((f)->instr_ptr == _PyCode_CODE(co))
#define KILN_CODE_GET_EXTRA(co, i, p) PyUnstable_Code_GetExtra((PyObject *)(co), (i), (p))
#define KILN_CODE_SET_EXTRA(co, i, v) PyUnstable_Code_SetExtra((PyObject *)(co), (i), (v))
#define KILN_REQUEST_EXTRA_INDEX(free) PyUnstable_Eval_RequestCodeExtraIndex(free)

static inline void
kiln_release_frame(PyThreadState *tstate, _PyInterpreterFrame *frame)
{
    _PyEval_FrameClearAndPop(tstate, frame);
}

#endif

#endif /* KILN_FRAMEEVAL_COMPAT_H */
