/* cache.c - kiln's per-code-object state and the calls of replacement code.
 *
 * Invariants:
 * - A code object's CodeState lives in the code's extra slot (one index, requested once) and
 *   is freed by CPython through free_state() when the code dies; kiln never replaces the
 *   extra value once set (SetExtra would free the old one), it mutates the state instead.
 * - state->entries is an immutable tuple that is replaced as a whole, so a reader that holds
 *   a reference to it can walk it while guards run Python code.
 * - The extra slot is not traversed by the garbage collector: entries that reach back to
 *   their code object form cycles that only clear_cache()/reset() break.
 * - Arguments of an unstarted frame are borrowed from frame->localsplus; the frame stays
 *   alive until the hook releases it, after the replacement call returns.
 */
#include "frameeval.h"

static Py_ssize_t extra_index = -1;
static CodeState *all_states = NULL;

/* ------------------------------------------------------------------ CodeState */

static void
free_state(void *ptr)
{
    CodeState *state = (CodeState *)ptr;
    if (state == NULL) {
        return;
    }
    if (state->prev) {
        state->prev->next = state->next;
    }
    else {
        all_states = state->next;
    }
    if (state->next) {
        state->next->prev = state->prev;
    }
    PyObject *entries = state->entries;
    PyMem_RawFree(state);
    Py_DECREF(entries);
}

int
kiln_cache_init(void)
{
    if (extra_index >= 0) {
        return 0;
    }
    extra_index = KILN_REQUEST_EXTRA_INDEX(free_state);
    if (extra_index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "kiln.frameeval: no code-extra index left");
        return -1;
    }
    return 0;
}

CodeState *
kiln_code_state(PyCodeObject *code)
{
    void *extra = NULL;
    if (KILN_CODE_GET_EXTRA(code, extra_index, &extra) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return (CodeState *)extra;
}

CodeState *
kiln_code_state_ensure(PyCodeObject *code)
{
    void *extra = NULL;
    if (KILN_CODE_GET_EXTRA(code, extra_index, &extra) < 0) {
        return NULL;
    }
    if (extra != NULL) {
        return (CodeState *)extra;
    }
    CodeState *state = PyMem_RawCalloc(1, sizeof(CodeState));
    if (state == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    state->entries = PyTuple_New(0);
    if (state->entries == NULL) {
        PyMem_RawFree(state);
        return NULL;
    }
    if (KILN_CODE_SET_EXTRA(code, extra_index, state) < 0) {
        Py_DECREF(state->entries);
        PyMem_RawFree(state);
        return NULL;
    }
    state->next = all_states;
    if (all_states) {
        all_states->prev = state;
    }
    all_states = state;
    return state;
}

int
kiln_mark_skip(PyCodeObject *code)
{
    CodeState *state = kiln_code_state_ensure(code);
    if (state == NULL) {
        return -1;
    }
    state->skip = 1;
    return 0;
}

Py_ssize_t
kiln_reset_all(void)
{
    /* Detach every entries tuple without running any Python code (an allocation that
     * triggers the garbage collector, or a decref, could run finalizers that add or free
     * states under our feet): count, take a raw array (never collects), detach, and only
     * then drop the tuples. */
    Py_ssize_t count = 0;
    for (CodeState *s = all_states; s != NULL; s = s->next) {
        count++;
    }
    PyObject *empty = PyTuple_New(0); /* the empty-tuple singleton: no allocation */
    PyObject **dropped = PyMem_RawMalloc((count ? count : 1) * sizeof(PyObject *));
    if (empty == NULL || dropped == NULL) {
        Py_XDECREF(empty);
        PyMem_RawFree(dropped);
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t i = 0;
    for (CodeState *s = all_states; s != NULL && i < count; s = s->next, i++) {
        dropped[i] = s->entries;
        s->entries = Py_NewRef(empty);
        s->skip = 0;
    }
    Py_DECREF(empty);
    for (Py_ssize_t j = 0; j < i; j++) {
        Py_DECREF(dropped[j]);
    }
    PyMem_RawFree(dropped);
    return count;
}

int
kiln_prepend_entry(CodeState *state, PyObject *entry)
{
    for (;;) {
        PyObject *old = Py_NewRef(state->entries);
        Py_ssize_t n = PyTuple_GET_SIZE(old);
        PyObject *entries = PyTuple_New(n + 1); /* may collect, and so run any code */
        if (entries == NULL) {
            Py_DECREF(old);
            return -1;
        }
        PyTuple_SET_ITEM(entries, 0, Py_NewRef(entry));
        for (Py_ssize_t i = 0; i < n; i++) {
            PyTuple_SET_ITEM(entries, i + 1, Py_NewRef(PyTuple_GET_ITEM(old, i)));
        }
        int unchanged = state->entries == old;
        Py_DECREF(old);
        if (unchanged) {
            Py_SETREF(state->entries, entries);
            return 0;
        }
        Py_DECREF(entries); /* someone changed the entries meanwhile: start again */
    }
}

/* ------------------------------------------------------------------ CacheEntry */

static int
entry_traverse(CacheEntryObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->guard);
    Py_VISIT(self->code);
    Py_VISIT(self->function);
    return 0;
}

static int
entry_clear(CacheEntryObject *self)
{
    Py_CLEAR(self->guard);
    Py_CLEAR(self->code);
    Py_CLEAR(self->function);
    return 0;
}

static void
entry_dealloc(CacheEntryObject *self)
{
    PyObject_GC_UnTrack(self);
    entry_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
entry_repr(CacheEntryObject *self)
{
    PyObject *name = self->code ? ((PyCodeObject *)self->code)->co_qualname : NULL;
    return PyUnicode_FromFormat("<CacheEntry %R guard=%R>", name ? name : Py_None,
                                self->guard ? self->guard : Py_None);
}

static PyObject *
entry_get_guard(CacheEntryObject *self, void *closure)
{
    return Py_NewRef(self->guard ? self->guard : Py_None);
}

static PyObject *
entry_get_code(CacheEntryObject *self, void *closure)
{
    return Py_NewRef(self->code ? self->code : Py_None);
}

static PyGetSetDef entry_getset[] = {
    {"guard", (getter)entry_get_guard, NULL, "callable(L) -> truth: when true, `code` runs", NULL},
    {"code", (getter)entry_get_code, NULL, "the replacement code object", NULL},
    {NULL},
};

PyTypeObject CacheEntry_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kiln.frameeval.CacheEntry",
    .tp_basicsize = sizeof(CacheEntryObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One cached compilation of a code object: (guard, replacement code).\n\n"
              "Made by add_cache_entry(); read-only.",
    .tp_traverse = (traverseproc)entry_traverse,
    .tp_clear = (inquiry)entry_clear,
    .tp_dealloc = (destructor)entry_dealloc,
    .tp_repr = (reprfunc)entry_repr,
    .tp_getset = entry_getset,
};

/* ------------------------------------------------------------------ layouts */

static int
same_names(PyObject *a, PyObject *b, Py_ssize_t a_start, Py_ssize_t b_start, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(a, a_start + i),
                                          PyTuple_GET_ITEM(b, b_start + i), Py_EQ);
        if (eq <= 0) {
            return eq;
        }
    }
    return 1;
}

static Py_ssize_t
n_arguments(PyCodeObject *co)
{
    return co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) != 0) +
           ((co->co_flags & CO_VARKEYWORDS) != 0);
}

int
kiln_check_layout(PyCodeObject *original, PyCodeObject *replacement)
{
    const char *why = NULL;
    int flags = CO_VARARGS | CO_VARKEYWORDS;
    if (!(replacement->co_flags & CO_OPTIMIZED)) {
        why = "it is not the code of a function";
    }
    else if (replacement->co_flags & KILN_CO_NOT_A_PLAIN_FUNCTION) {
        why = "it is a generator, coroutine or async generator";
    }
    else if (original->co_argcount != replacement->co_argcount ||
             original->co_posonlyargcount != replacement->co_posonlyargcount ||
             original->co_kwonlyargcount != replacement->co_kwonlyargcount ||
             (original->co_flags & flags) != (replacement->co_flags & flags)) {
        why = "its argument counts or */** parameters differ";
    }
    else if (original->co_nfreevars != replacement->co_nfreevars) {
        why = "its number of free variables differs";
    }
    if (why == NULL) {
        int eq = same_names(original->co_localsplusnames, replacement->co_localsplusnames, 0, 0,
                            n_arguments(original));
        if (eq < 0) {
            return -1;
        }
        if (eq == 0) {
            why = "its argument names differ";
        }
    }
    if (why == NULL && original->co_nfreevars) {
        int nfree = original->co_nfreevars;
        int eq = same_names(original->co_localsplusnames, replacement->co_localsplusnames,
                            original->co_nlocalsplus - nfree, replacement->co_nlocalsplus - nfree,
                            nfree);
        if (eq < 0) {
            return -1;
        }
        if (eq == 0) {
            why = "its free variable names differ";
        }
    }
    if (why != NULL) {
        PyErr_Format(PyExc_ValueError, "replacement %R cannot run in place of %R: %s",
                     replacement->co_qualname, original->co_qualname, why);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ frame access */

PyObject *
kiln_frame_locals(_PyInterpreterFrame *frame, PyCodeObject *co)
{
    PyObject *locals = PyDict_New();
    if (locals == NULL) {
        return NULL;
    }
    PyObject *names = co->co_localsplusnames;
    Py_ssize_t nargs = n_arguments(co);
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *value = frame->localsplus[i];
        if (value != NULL && PyDict_SetItem(locals, PyTuple_GET_ITEM(names, i), value) < 0) {
            goto error;
        }
    }
    if (co->co_nfreevars) {
        /* Free-variable slots are filled by COPY_FREE_VARS, which has not run yet: read the
         * function's closure, in the same order. */
        PyObject *closure = ((PyFunctionObject *)KILN_FRAME_FUNC(frame))->func_closure;
        Py_ssize_t offset = co->co_nlocalsplus - co->co_nfreevars;
        for (Py_ssize_t j = 0; closure != NULL && j < co->co_nfreevars; j++) {
            PyObject *value = PyCell_GET(PyTuple_GET_ITEM(closure, j));
            if (value != NULL &&
                PyDict_SetItem(locals, PyTuple_GET_ITEM(names, offset + j), value) < 0) {
                goto error;
            }
        }
    }
    return locals;
error:
    Py_DECREF(locals);
    return NULL;
}

/* A function that runs `code` with the frame's globals and the original closure. *cached
 * (when given) keeps one for frames without a closure, reused while globals and builtins are
 * the same; a function with a closure is never kept, so that a cache entry does not keep the
 * last frame's captured values alive. */
static PyObject *
replacement_function(_PyInterpreterFrame *frame, PyObject *code, PyObject **cached)
{
    PyFunctionObject *original = (PyFunctionObject *)KILN_FRAME_FUNC(frame);
    PyObject *closure = original->func_closure;
    if (closure != NULL) {
        cached = NULL;
    }
    if (cached != NULL && *cached != NULL) {
        PyFunctionObject *fn = (PyFunctionObject *)*cached;
        if (fn->func_globals == frame->f_globals && fn->func_builtins == frame->f_builtins) {
            return Py_NewRef(fn);
        }
    }
    PyObject *fn = PyFunction_New(code, frame->f_globals);
    if (fn == NULL) {
        return NULL;
    }
    if (closure != NULL && PyFunction_SetClosure(fn, closure) < 0) {
        Py_DECREF(fn);
        return NULL;
    }
    if (cached != NULL) {
        Py_XSETREF(*cached, Py_NewRef(fn));
    }
    return fn;
}

#define KILN_SMALL_ARGS 16

PyObject *
kiln_call_replacement(_PyInterpreterFrame *frame, PyObject *code, PyObject **cached)
{
    PyCodeObject *co = KILN_FRAME_CODE(frame);
    PyObject **lp = frame->localsplus;
    Py_ssize_t argcount = co->co_argcount, kwonly = co->co_kwonlyargcount;
    Py_ssize_t slot = argcount + kwonly;
    PyObject *varargs = (co->co_flags & CO_VARARGS) ? lp[slot++] : NULL;
    PyObject *varkw = (co->co_flags & CO_VARKEYWORDS) ? lp[slot++] : NULL;
    for (Py_ssize_t i = 0; i < slot; i++) {
        if (lp[i] == NULL) {
            PyErr_SetString(PyExc_SystemError, "kiln.frameeval: unbound argument at frame start");
            return NULL;
        }
    }
    Py_ssize_t nvar = varargs ? PyTuple_GET_SIZE(varargs) : 0;
    Py_ssize_t nkw = kwonly + (varkw ? PyDict_GET_SIZE(varkw) : 0);
    Py_ssize_t npos = argcount + nvar, total = npos + nkw;

    PyObject *fn = replacement_function(frame, code, cached);
    if (fn == NULL) {
        return NULL;
    }
    /* One spare slot in front for PY_VECTORCALL_ARGUMENTS_OFFSET. */
    PyObject *small[KILN_SMALL_ARGS + 1];
    PyObject **buf = small;
    if (total > KILN_SMALL_ARGS) {
        buf = PyMem_Malloc((total + 1) * sizeof(PyObject *));
        if (buf == NULL) {
            Py_DECREF(fn);
            return PyErr_NoMemory();
        }
    }
    PyObject **args = buf + 1;
    PyObject *kwnames = NULL;
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < argcount; i++) {
        args[i] = lp[i];
    }
    for (Py_ssize_t i = 0; i < nvar; i++) {
        args[argcount + i] = PyTuple_GET_ITEM(varargs, i);
    }
    if (nkw) {
        kwnames = PyTuple_New(nkw);
        if (kwnames == NULL) {
            goto done;
        }
        for (Py_ssize_t i = 0; i < kwonly; i++) {
            PyTuple_SET_ITEM(kwnames, i,
                             Py_NewRef(PyTuple_GET_ITEM(co->co_localsplusnames, argcount + i)));
            args[npos + i] = lp[argcount + i];
        }
        Py_ssize_t pos = 0, k = kwonly;
        PyObject *key, *value;
        while (varkw != NULL && k < nkw && PyDict_Next(varkw, &pos, &key, &value)) {
            PyTuple_SET_ITEM(kwnames, k, Py_NewRef(key));
            args[npos + k] = value;
            k++;
        }
        if (k != nkw) {
            PyErr_SetString(PyExc_RuntimeError, "kiln.frameeval: **kwargs changed size");
            goto done;
        }
    }
    result = PyObject_Vectorcall(fn, args, (size_t)npos | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                 kwnames);
done:
    Py_XDECREF(kwnames);
    if (buf != small) {
        PyMem_Free(buf);
    }
    Py_DECREF(fn);
    return result;
}
