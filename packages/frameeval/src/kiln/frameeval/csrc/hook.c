/* hook.c - the PEP 523 evaluation function and the per-thread callbacks.
 *
 * Invariants:
 * - The evaluation function is installed when the first thread sets a callback and the
 *   previous one is restored when the last thread clears its callback (or exits): never
 *   per frame. With keep_installed it is installed at once and stays until turned off,
 *   for callers that set and clear callbacks around every call.
 * - A thread's callback is owned by a ThreadOwner object stored in that thread's state dict,
 *   so it is released when the thread exits; the thread-local slot only borrows it (and the
 *   owner, which the state dict keeps until the thread state is cleared).
 * - While a thread runs its callback, a guard, or any other Python code on behalf of the
 *   hook, slot.busy is set and every frame that starts on that thread runs untouched.
 * - Every frame that the hook does not hand to the previous evaluation function is released
 *   with kiln_release_frame(), on success and on error alike.
 * - Frames that are never intercepted: generator/coroutine/async-generator frames and their
 *   resumes, frames already started, throw() paths, frames with f_locals (module and class
 *   bodies, exec/eval), frames that are not function frames, frames that already have a
 *   frame object, frames of skipped code (replacement code is always skipped), and every
 *   frame the interpreter starts on its own (trace/profile/monitoring functions, whatever
 *   the garbage collector runs): those are not part of the compiled program.
 * - A collection skips frames of the thread running it only: a finalizer that releases the
 *   GIL lets other threads run while the interpreter's `collecting` flag is still set, and
 *   their frames are intercepted as usual. The collecting thread is recorded by a gc.callbacks
 *   entry put first at import; when it is not known (that entry removed, or moved behind a
 *   user's callback that runs first), every thread's frames are skipped during a collection.
 */
#include "frameeval.h"
#include "pythread.h"

PyObject *kiln_SKIP = NULL;
PyObject *kiln_RUN_ONLY = NULL;

typedef struct {
    PyObject *callback; /* borrowed from this thread's ThreadOwner; NULL when unset */
    PyObject *owner;    /* this thread's ThreadOwner (borrowed from its state dict) or NULL */
    int busy;           /* inside the callback, a guard, or kiln's own Python calls */
    _PyInterpreterFrame *delegated; /* the frame handed to a previous, non-default hook */
} ThreadSlot;

static _Thread_local ThreadSlot slot;

static _PyFrameEvalFunction previous_eval = NULL;
static PyInterpreterState *hooked_interp = NULL; /* the interpreter that imported us */
static Py_ssize_t active_threads = 0;
static int keep_installed = 0; /* leave the hook in place when the last callback goes */
/* The thread running the current garbage collection, set by gc_phase when the collection
 * starts and cleared when it stops; NULL when unknown. Compared, never dereferenced. */
static PyThreadState *collector = NULL;

/* gc.callbacks entry: record which thread runs the collection. */
static PyObject *
gc_phase(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *phase;
    PyObject *info;
    if (!PyArg_UnpackTuple(args, "gc_phase", 2, 2, &phase, &info)) {
        return NULL;
    }
    int starts = PyUnicode_Check(phase) && PyUnicode_CompareWithASCIIString(phase, "start") == 0;
    collector = starts ? PyThreadState_Get() : NULL;
    Py_RETURN_NONE;
}

static PyMethodDef gc_phase_def = {
    "kiln_frameeval_gc_phase", gc_phase, METH_VARARGS,
    "gc.callbacks entry of kiln.frameeval: records which thread runs a collection."};

/* True while `tstate` runs a function the interpreter called on its own: a trace, profile
 * or monitoring function, or (in the collecting thread) what a collection runs. */
static inline int
started_by_interpreter(PyThreadState *tstate)
{
    if (KILN_TRACING(tstate)) {
        return 1;
    }
    return KILN_GC_COLLECTING(tstate) && (collector == NULL || collector == tstate);
}
static PyObject *owner_key = NULL;

/* ------------------------------------------------------------------ evaluation */

/* Hand the frame to the evaluation function that was installed before ours. When that is
 * another PEP 523 hook which itself chains back to us (it was installed over ours and ours
 * was installed again over it), the same frame comes back here: evaluate it by default
 * instead of looping until the C stack overflows. */
static inline PyObject *
run_default(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag)
{
    if (previous_eval == _PyEval_EvalFrameDefault || slot.delegated == frame) {
        return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    }
    _PyInterpreterFrame *outer = slot.delegated;
    slot.delegated = frame;
    PyObject *result = previous_eval(tstate, frame, throwflag);
    slot.delegated = outer;
    return result;
}

static PyObject *
run_replacement(PyThreadState *tstate, _PyInterpreterFrame *frame, PyObject *code,
                PyObject **cached)
{
    PyObject *result = kiln_call_replacement(frame, code, cached);
    kiln_release_frame(tstate, frame);
    return result;
}

/* The first entry whose guard passes (new reference), NULL with no error on a miss, NULL
 * with an error when a guard raised. `*locals` is built on first need. */
static CacheEntryObject *
lookup(_PyInterpreterFrame *frame, PyCodeObject *co, PyObject *entries, PyObject **locals)
{
    Py_ssize_t n = PyTuple_GET_SIZE(entries);
    if (n == 0) {
        return NULL;
    }
    if (*locals == NULL && (*locals = kiln_frame_locals(frame, co)) == NULL) {
        return NULL;
    }
    Py_INCREF(entries);
    CacheEntryObject *hit = NULL;
    slot.busy = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        CacheEntryObject *entry = (CacheEntryObject *)PyTuple_GET_ITEM(entries, i);
        if (entry->guard == NULL || entry->code == NULL) {
            continue; /* cleared by the garbage collector: cannot happen while listed */
        }
        PyObject *verdict = PyObject_CallOneArg(entry->guard, *locals);
        int truth = verdict ? PyObject_IsTrue(verdict) : -1;
        Py_XDECREF(verdict);
        if (truth < 0) {
            break;
        }
        if (truth) {
            hit = (CacheEntryObject *)Py_NewRef(entry);
            break;
        }
    }
    slot.busy = 0;
    Py_DECREF(entries);
    return hit;
}

/* Ask the callback; returns the frame's result, like an evaluation function. */
static PyObject *
consult_callback(PyThreadState *tstate, _PyInterpreterFrame *frame, PyCodeObject *co,
                 PyObject *callback, PyObject *locals)
{
    Py_INCREF(callback);
    slot.busy = 1;
    PyObject *args[3] = {(PyObject *)co, locals, KILN_FRAME_FUNC(frame)};
    PyObject *answer = PyObject_Vectorcall(callback, args, 3, NULL);
    Py_DECREF(callback);
    if (answer == NULL) {
        slot.busy = 0;
        goto error;
    }
    if (answer == Py_None || answer == (PyObject *)co) {
        /* The frame's own code means "run it as it is", like None. */
        slot.busy = 0;
        Py_DECREF(answer);
        return run_default(tstate, frame, 0);
    }
    if (answer == kiln_SKIP) {
        Py_DECREF(answer);
        int failed = kiln_mark_skip(co);
        slot.busy = 0;
        if (failed) {
            goto error;
        }
        return run_default(tstate, frame, 0);
    }
    if (!PyCode_Check(answer)) {
        slot.busy = 0;
        PyErr_Format(PyExc_TypeError,
                     "kiln.frameeval callback must return None, SKIP or a code object, not %.100s",
                     Py_TYPE(answer)->tp_name);
        Py_DECREF(answer);
        goto error;
    }
    int failed = kiln_check_layout(co, (PyCodeObject *)answer) ||
                 kiln_mark_skip((PyCodeObject *)answer);
    slot.busy = 0;
    if (failed) {
        Py_DECREF(answer);
        goto error;
    }
    PyObject *result = run_replacement(tstate, frame, answer, NULL);
    Py_DECREF(answer);
    return result;
error:
    kiln_release_frame(tstate, frame);
    return NULL;
}

static PyObject *
kiln_eval_frame(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag)
{
    if (slot.callback == NULL || slot.busy || throwflag || frame == slot.delegated ||
        started_by_interpreter(tstate) ||
        frame->owner != FRAME_OWNED_BY_THREAD || frame->f_locals != NULL ||
        frame->frame_obj != NULL || !PyFunction_Check(KILN_FRAME_FUNC(frame))) {
        return run_default(tstate, frame, throwflag);
    }
    PyCodeObject *co = KILN_FRAME_CODE(frame);
    if (!(co->co_flags & CO_OPTIMIZED) || (co->co_flags & KILN_CO_NOT_A_PLAIN_FUNCTION) ||
        !KILN_FRAME_AT_START(frame, co)) {
        return run_default(tstate, frame, throwflag);
    }
    CodeState *state = kiln_code_state(co);
    if (state != NULL && state->skip) {
        return run_default(tstate, frame, 0);
    }

    PyObject *locals = NULL;
    if (state != NULL) {
        CacheEntryObject *hit = lookup(frame, co, state->entries, &locals);
        if (hit != NULL) {
            Py_XDECREF(locals);
            PyObject *result = run_replacement(tstate, frame, hit->code, &hit->function);
            Py_DECREF(hit);
            return result;
        }
        if (PyErr_Occurred()) {
            Py_XDECREF(locals);
            kiln_release_frame(tstate, frame);
            return NULL;
        }
    }
    /* Guards ran Python code: the callback may have changed meanwhile. */
    PyObject *callback = slot.callback;
    if (callback == NULL || callback == kiln_RUN_ONLY) {
        Py_XDECREF(locals);
        return run_default(tstate, frame, 0);
    }
    if (locals == NULL && (locals = kiln_frame_locals(frame, co)) == NULL) {
        kiln_release_frame(tstate, frame);
        return NULL;
    }
    PyObject *result = consult_callback(tstate, frame, co, callback, locals);
    Py_DECREF(locals);
    return result;
}

/* ------------------------------------------------------------------ install */

static void
install(void)
{
    PyInterpreterState *interp = hooked_interp;
    _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (current != kiln_eval_frame) {
        previous_eval = current;
        _PyInterpreterState_SetEvalFrameFunc(interp, kiln_eval_frame);
    }
}

static void
uninstall(void)
{
    /* May run while a thread state is cleared at exit or finalization: no current-thread
     * lookups here. */
    PyInterpreterState *interp = hooked_interp;
    /* When another hook was installed over ours, it may still call us: keep previous_eval
     * valid and leave its hook in place. */
    if (_PyInterpreterState_GetEvalFrameFunc(interp) == kiln_eval_frame) {
        _PyInterpreterState_SetEvalFrameFunc(interp, previous_eval);
    }
}

int
kiln_check_interpreter(void)
{
    if (PyInterpreterState_Get() != hooked_interp) {
        PyErr_SetString(PyExc_RuntimeError,
                        "kiln.frameeval works in the main interpreter only");
        return -1;
    }
    return 0;
}

int
kiln_hook_installed(void)
{
    return _PyInterpreterState_GetEvalFrameFunc(hooked_interp) == kiln_eval_frame;
}

Py_ssize_t
kiln_active_threads(void)
{
    return active_threads;
}

/* ------------------------------------------------------------------ per-thread owner */

typedef struct {
    PyObject_HEAD
    PyObject *callback;    /* strong; NULL when unset */
    unsigned long thread;  /* the owning thread's identifier */
} ThreadOwnerObject;

static void
callback_changed(PyObject *old, PyObject *new)
{
    if (old == NULL && new != NULL && ++active_threads == 1) {
        install();
    }
    else if (old != NULL && new == NULL && --active_threads == 0 && !keep_installed) {
        uninstall();
    }
}

int
kiln_keep_installed(int keep)
{
    int previous = keep_installed;
    keep_installed = keep;
    if (keep && active_threads == 0) {
        install();
    }
    else if (!keep && active_threads == 0) {
        uninstall();
    }
    return previous;
}

static void
owner_dealloc(ThreadOwnerObject *self)
{
    PyObject *callback = self->callback;
    self->callback = NULL;
    if (callback != NULL) {
        callback_changed(callback, NULL);
        Py_DECREF(callback);
    }
    if (self->thread == PyThread_get_thread_ident() && slot.owner == (PyObject *)self) {
        slot.callback = NULL;
        slot.owner = NULL;
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject ThreadOwner_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kiln.frameeval._ThreadOwner",
    .tp_basicsize = sizeof(ThreadOwnerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Holds one thread's frameeval callback; freed with the thread's state.",
    .tp_dealloc = (destructor)owner_dealloc,
};

/* This thread's owner (borrowed), created when `create`; NULL with no error if missing. */
static ThreadOwnerObject *
thread_owner(int create)
{
    if (slot.owner != NULL) {
        return (ThreadOwnerObject *)slot.owner;
    }
    PyObject *dict = PyThreadState_GetDict();
    if (dict == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError, "kiln.frameeval: no thread state dict");
        }
        return NULL;
    }
    PyObject *owner = PyDict_GetItemWithError(dict, owner_key);
    if (owner != NULL || PyErr_Occurred() || !create) {
        slot.owner = owner;
        return (ThreadOwnerObject *)owner;
    }
    ThreadOwnerObject *made = PyObject_New(ThreadOwnerObject, &ThreadOwner_Type);
    if (made == NULL) {
        return NULL;
    }
    made->callback = NULL;
    made->thread = PyThread_get_thread_ident();
    int failed = PyDict_SetItem(dict, owner_key, (PyObject *)made);
    Py_DECREF(made);
    if (failed) {
        return NULL;
    }
    slot.owner = (PyObject *)made;
    return made;
}

PyObject *
kiln_set_callback(PyObject *callback)
{
    if (callback == Py_None) {
        callback = NULL;
    }
    if (callback != NULL && callback != kiln_RUN_ONLY && !PyCallable_Check(callback)) {
        PyErr_Format(PyExc_TypeError,
                     "callback must be None, RUN_ONLY or callable, not %.100s",
                     Py_TYPE(callback)->tp_name);
        return NULL;
    }
    ThreadOwnerObject *owner = thread_owner(callback != NULL);
    if (owner == NULL) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    PyObject *old = owner->callback;
    owner->callback = Py_XNewRef(callback);
    slot.callback = callback;
    callback_changed(old, callback);
    return old ? old : Py_NewRef(Py_None);
}

PyObject *
kiln_get_callback(void)
{
    return Py_NewRef(slot.callback ? slot.callback : Py_None);
}

/* ------------------------------------------------------------------ init */

/* Put gc_phase first in gc.callbacks (once per process: the module initializes once). */
static int
register_gc_phase(void)
{
    static int registered = 0;
    if (registered) {
        return 0;
    }
    PyObject *fn = PyCFunction_New(&gc_phase_def, NULL);
    if (fn == NULL) {
        return -1;
    }
    PyObject *gc = PyImport_ImportModule("gc");
    PyObject *callbacks = gc ? PyObject_GetAttrString(gc, "callbacks") : NULL;
    Py_XDECREF(gc);
    int rc = -1;
    if (callbacks != NULL && PyList_Check(callbacks)) {
        rc = PyList_Insert(callbacks, 0, fn);
    }
    else if (callbacks != NULL) {
        PyErr_SetString(PyExc_TypeError, "gc.callbacks is not a list");
    }
    Py_XDECREF(callbacks);
    Py_DECREF(fn);
    registered = rc == 0;
    return rc;
}

int
kiln_hook_init(void)
{
    if (previous_eval == NULL) {
        previous_eval = _PyEval_EvalFrameDefault;
        hooked_interp = PyInterpreterState_Get();
    }
    if (PyType_Ready(&ThreadOwner_Type) < 0) {
        return -1;
    }
    if (owner_key == NULL) {
        owner_key = PyUnicode_InternFromString("kiln.frameeval.thread_owner");
        if (owner_key == NULL) {
            return -1;
        }
    }
    return register_gc_phase();
}
