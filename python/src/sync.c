// Stream, Event and Semaphore objects. Every wait, copy and enqueue runs
// with the GIL released.
#include "accel_py.h"

PyTypeObject *apy_StreamType;
PyTypeObject *apy_EventType;
PyTypeObject *apy_SemaphoreType;

// ---------------------------------------------------------------------------
// Stream
// ---------------------------------------------------------------------------

static void stream_drop(child_t *child) {
  StreamObject *self = APY_CONTAINER(child, StreamObject, link);
  accel_stream_t *s = self->stream;
  self->stream = NULL;
  if (s != NULL) {
    APY_NOGIL(accel_stream_destroy(s));  // drains pending work
  }
}

static PyObject *stream_new(PyTypeObject *type, PyObject *args,
                            PyObject *kwargs) {
  static char *kwlist[] = {"device", "name", NULL};
  PyObject *device = NULL;
  const char *name = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|z:Stream", kwlist, &device,
                                   &name)) {
    return NULL;
  }
  accel_device_t *dev = apy_device_handle(device);
  if (dev == NULL) {
    return NULL;
  }
  accel_stream_desc_t desc = {.struct_size = sizeof(desc), .name = name};
  accel_stream_t *s = NULL;
  accel_status_t st;
  APY_NOGIL(st = accel_stream_create(dev, &desc, &s));
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  StreamObject *self = (StreamObject *)apy_alloc(type);
  if (self == NULL) {
    accel_stream_destroy(s);
    return NULL;
  }
  self->rt = (RuntimeObject *)Py_NewRef(((DeviceObject *)device)->rt);
  self->stream = s;
  self->device = Py_NewRef(device);
  child_link(self->rt, &self->link, stream_drop);
  self->link.pass = 0;
  return (PyObject *)self;
}

static void stream_dealloc(PyObject *obj) {
  StreamObject *self = (StreamObject *)obj;
  child_unlink(&self->link);
  stream_drop(&self->link);
  Py_XDECREF(self->device);
  Py_XDECREF(self->rt);
  apy_dealloc_heap(obj);
}

accel_stream_t *apy_stream_handle(PyObject *obj) {
  if (!PyObject_TypeCheck(obj, apy_StreamType)) {
    PyErr_SetString(PyExc_TypeError, "expected an accel.Stream");
    return NULL;
  }
  StreamObject *s = (StreamObject *)obj;
  if (s->stream == NULL) {
    apy_closed("accel.Stream", s->rt != NULL && s->rt->core == NULL
                                   ? "its Runtime was closed"
                                   : "Stream.close() was called");
  }
  return s->stream;
}

static PyObject *status_none(accel_status_t st) {
  return st == ACCEL_OK ? Py_NewRef(Py_None) : apy_raise(st);
}

// What query() returns for a status: done, not yet, or the stored error.
static PyObject *query_result(accel_status_t st) {
  if (st == ACCEL_ERROR_NOT_READY) {
    Py_RETURN_FALSE;
  }
  return st == ACCEL_OK ? Py_NewRef(Py_True) : apy_raise(st);
}

// synchronize(timeout=None) as a fastcall: the call that ends every
// launch-and-wait loop.
static bool fast_timeout_arg(PyObject *const *args, Py_ssize_t nargsf,
                             PyObject *kwnames, uint64_t *out_ns) {
  Py_ssize_t nargs = nargsf & PY_SSIZE_T_MAX;
  Py_ssize_t nkw = kwnames != NULL ? PyTuple_Size(kwnames) : 0;
  if (nargs + nkw > 1 ||
      (nkw == 1 && PyUnicode_CompareWithASCIIString(
                       PyTuple_GetItem(kwnames, 0), "timeout") != 0)) {
    PyErr_SetString(PyExc_TypeError,
                    "synchronize() takes one argument, timeout");
    return false;
  }
  return apy_timeout_ns(nargs + nkw == 1 ? args[0] : Py_None, out_ns);
}

static PyObject *stream_synchronize(PyObject *obj, PyObject *const *args,
                                    Py_ssize_t nargsf, PyObject *kwnames) {
  uint64_t ns;
  accel_stream_t *s = apy_stream_handle(obj);
  if (s == NULL || !fast_timeout_arg(args, nargsf, kwnames, &ns)) {
    return NULL;
  }
  accel_status_t st;
  APY_NOGIL(st = accel_stream_synchronize(s, ns));
  return status_none(st);
}

static PyObject *stream_query(PyObject *obj, PyObject *unused) {
  accel_stream_t *s = apy_stream_handle(obj);
  if (s == NULL) {
    return NULL;
  }
  return query_result(accel_stream_query(s));
}

static PyObject *stream_copy(PyObject *obj, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"dst", "src", "nbytes", "dst_offset", "src_offset",
                           NULL};
  PyObject *dst_obj, *src_obj, *nbytes_obj = Py_None;
  unsigned long long dst_off = 0, src_off = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O$KK:copy", kwlist,
                                   &dst_obj, &src_obj, &nbytes_obj, &dst_off,
                                   &src_off)) {
    return NULL;
  }
  accel_stream_t *s = apy_stream_handle(obj);
  accel_buffer_t *dst = s != NULL ? apy_buffer_handle(dst_obj) : NULL;
  accel_buffer_t *src = dst != NULL ? apy_buffer_handle(src_obj) : NULL;
  if (src == NULL) {
    return NULL;
  }
  uint64_t n;
  if (nbytes_obj == Py_None) {
    uint64_t a = accel_buffer_size(src), b = accel_buffer_size(dst);
    n = (a - (src_off < a ? src_off : a));
    uint64_t m = (b - (dst_off < b ? dst_off : b));
    n = n < m ? n : m;
  } else {
    n = PyLong_AsUnsignedLongLong(nbytes_obj);
    if (PyErr_Occurred()) {
      return NULL;
    }
  }
  accel_status_t st;
  APY_NOGIL(st = accel_stream_copy(s, dst, dst_off, src, src_off, n));
  if (st == ACCEL_OK) {
    apy_buffer_touch(dst_obj, obj);
    apy_buffer_touch(src_obj, obj);
  }
  return status_none(st);
}

static PyObject *stream_fill(PyObject *obj, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"buffer", "value", "pattern_size", "offset",
                           "nbytes", NULL};
  PyObject *buf_obj, *nbytes_obj = Py_None;
  unsigned long long value = 0, offset = 0;
  unsigned int pattern_size = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OK|I$KO:fill", kwlist,
                                   &buf_obj, &value, &pattern_size, &offset,
                                   &nbytes_obj)) {
    return NULL;
  }
  accel_stream_t *s = apy_stream_handle(obj);
  accel_buffer_t *buf = s != NULL ? apy_buffer_handle(buf_obj) : NULL;
  if (buf == NULL) {
    return NULL;
  }
  uint64_t size = accel_buffer_size(buf);
  uint64_t n = offset < size ? size - offset : 0;
  if (nbytes_obj != Py_None) {
    n = PyLong_AsUnsignedLongLong(nbytes_obj);
    if (PyErr_Occurred()) {
      return NULL;
    }
  }
  accel_status_t st;
  APY_NOGIL(st = accel_stream_fill(s, buf, offset, n, value, pattern_size));
  if (st == ACCEL_OK) {
    apy_buffer_touch(buf_obj, obj);
  }
  return status_none(st);
}

static PyObject *stream_signal(PyObject *obj, PyObject *args) {
  PyObject *sem_obj;
  unsigned long long value;
  if (!PyArg_ParseTuple(args, "OK:signal", &sem_obj, &value)) {
    return NULL;
  }
  accel_stream_t *s = apy_stream_handle(obj);
  accel_semaphore_t *sem = s != NULL ? apy_semaphore_handle(sem_obj) : NULL;
  if (sem == NULL) {
    return NULL;
  }
  accel_status_t st;
  APY_NOGIL(st = accel_stream_signal(s, sem, value));
  return status_none(st);
}

static PyObject *stream_wait(PyObject *obj, PyObject *args) {
  PyObject *what;
  unsigned long long value = 0;
  if (!PyArg_ParseTuple(args, "O|K:wait", &what, &value)) {
    return NULL;
  }
  accel_stream_t *s = apy_stream_handle(obj);
  if (s == NULL) {
    return NULL;
  }
  accel_status_t st;
  if (PyObject_TypeCheck(what, apy_EventType)) {
    accel_event_t *e = ((EventObject *)what)->event;
    if (e == NULL) {
      return apy_closed("accel.Event", "released or its Runtime was closed");
    }
    APY_NOGIL(st = accel_stream_wait_event(s, e));
  } else {
    accel_semaphore_t *sem = apy_semaphore_handle(what);
    if (sem == NULL) {
      return NULL;
    }
    APY_NOGIL(st = accel_stream_wait(s, sem, value));
  }
  return status_none(st);
}

static PyObject *stream_close(PyObject *obj, PyObject *unused) {
  StreamObject *self = (StreamObject *)obj;
  child_unlink(&self->link);
  stream_drop(&self->link);
  return Py_NewRef(Py_None);
}

static PyObject *stream_device(PyObject *obj, void *closure) {
  StreamObject *self = (StreamObject *)obj;
  return self->device != NULL ? Py_NewRef(self->device) : Py_NewRef(Py_None);
}

static PyObject *stream_enter(PyObject *self, PyObject *unused) {
  return Py_NewRef(self);
}

static PyObject *stream_exit(PyObject *self, PyObject *args) {
  PyObject *r = stream_close(self, NULL);
  Py_XDECREF(r);
  if (r == NULL) {
    return NULL;
  }
  Py_RETURN_FALSE;
}

static PyMethodDef k_stream_methods[] = {
    {"synchronize", (PyCFunction)(void (*)(void))stream_synchronize,
     METH_FASTCALL | METH_KEYWORDS,
     "synchronize(timeout=None): waits (GIL released) until every command\n"
     "submitted so far has completed; raises the stream's error if one\n"
     "failed, accel.TimeoutError after |timeout| seconds."},
    {"query", stream_query, METH_NOARGS,
     "query() -> bool: True if all submitted work completed."},
    {"copy", (PyCFunction)(void (*)(void))stream_copy,
     METH_VARARGS | METH_KEYWORDS,
     "copy(dst, src, nbytes=None, *, dst_offset=0, src_offset=0):\n"
     "enqueues a copy between buffers (nbytes None: as much as fits)."},
    {"fill", (PyCFunction)(void (*)(void))stream_fill,
     METH_VARARGS | METH_KEYWORDS,
     "fill(buffer, value, pattern_size=1, *, offset=0, nbytes=None)."},
    {"signal", stream_signal, METH_VARARGS,
     "signal(semaphore, value): enqueues a signal."},
    {"execute", (PyCFunction)(void (*)(void))apy_stream_execute,
     METH_VARARGS | METH_KEYWORDS,
     "execute(command_buffer, bindings=(), constants=None): enqueues a\n"
     "replay of a finalized CommandBuffer; bindings fill its binding-table\n"
     "slots in order (a Buffer or (Buffer, offset[, length]) each),\n"
     "constants is its constants block (bytes or a numpy array)."},
    {"wait", stream_wait, METH_VARARGS,
     "wait(semaphore, value) or wait(event): later work waits for it."},
    {"close", stream_close, METH_NOARGS,
     "close(): drains and destroys the stream (idempotent)."},
    {"__enter__", stream_enter, METH_NOARGS, NULL},
    {"__exit__", stream_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef k_stream_getset[] = {
    {"device", stream_device, NULL, "The Device.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot k_stream_slots[] = {
    {Py_tp_new, stream_new},
    {Py_tp_dealloc, stream_dealloc},
    {Py_tp_methods, k_stream_methods},
    {Py_tp_getset, k_stream_getset},
    {Py_tp_doc,
     "Stream(device, name=None): an in-order queue of device work."},
    {0, NULL},
};

static PyType_Spec k_stream_spec = {
    "accel.Stream", sizeof(StreamObject), 0, Py_TPFLAGS_DEFAULT,
    k_stream_slots,
};

// ---------------------------------------------------------------------------
// Event
// ---------------------------------------------------------------------------

static void event_drop(child_t *child) {
  EventObject *self = APY_CONTAINER(child, EventObject, link);
  accel_event_release(self->event);
  self->event = NULL;
}

static PyObject *event_new(PyTypeObject *type, PyObject *args,
                           PyObject *kwargs) {
  static char *kwlist[] = {"device", NULL};
  PyObject *device;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Event", kwlist, &device)) {
    return NULL;
  }
  accel_device_t *dev = apy_device_handle(device);
  if (dev == NULL) {
    return NULL;
  }
  accel_event_t *e = NULL;
  accel_status_t st = accel_event_create(dev, 0, &e);
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  EventObject *self = (EventObject *)apy_alloc(type);
  if (self == NULL) {
    accel_event_release(e);
    return NULL;
  }
  self->rt = (RuntimeObject *)Py_NewRef(((DeviceObject *)device)->rt);
  self->event = e;
  child_link(self->rt, &self->link, event_drop);
  return (PyObject *)self;
}

static void event_dealloc(PyObject *obj) {
  EventObject *self = (EventObject *)obj;
  child_unlink(&self->link);
  event_drop(&self->link);
  Py_XDECREF(self->rt);
  apy_dealloc_heap(obj);
}

static accel_event_t *event_handle(PyObject *obj) {
  EventObject *e = (EventObject *)obj;
  if (e->event == NULL) {
    apy_closed("accel.Event", "its Runtime was closed");
  }
  return e->event;
}

static PyObject *event_record(PyObject *obj, PyObject *stream_obj) {
  accel_event_t *e = event_handle(obj);
  accel_stream_t *s = e != NULL ? apy_stream_handle(stream_obj) : NULL;
  if (s == NULL) {
    return NULL;
  }
  accel_status_t st;
  APY_NOGIL(st = accel_event_record(e, s));
  return status_none(st);
}

static PyObject *event_synchronize(PyObject *obj, PyObject *const *args,
                                   Py_ssize_t nargsf, PyObject *kwnames) {
  uint64_t ns;
  accel_event_t *e = event_handle(obj);
  if (e == NULL || !fast_timeout_arg(args, nargsf, kwnames, &ns)) {
    return NULL;
  }
  accel_status_t st;
  APY_NOGIL(st = accel_event_synchronize(e, ns));
  return status_none(st);
}

static PyObject *event_query(PyObject *obj, PyObject *unused) {
  accel_event_t *e = event_handle(obj);
  if (e == NULL) {
    return NULL;
  }
  return query_result(accel_event_query(e));
}

static PyObject *event_elapsed_ns(PyObject *obj, PyObject *end_obj) {
  accel_event_t *e = event_handle(obj);
  if (e == NULL) {
    return NULL;
  }
  if (!PyObject_TypeCheck(end_obj, apy_EventType)) {
    PyErr_SetString(PyExc_TypeError, "expected an accel.Event");
    return NULL;
  }
  accel_event_t *end = event_handle(end_obj);
  if (end == NULL) {
    return NULL;
  }
  int64_t ns = 0;
  accel_status_t st = accel_event_elapsed_ns(e, end, &ns);
  return st == ACCEL_OK ? PyLong_FromLongLong(ns) : apy_raise(st);
}

static PyMethodDef k_event_methods[] = {
    {"record", event_record, METH_O, "record(stream): marks this point."},
    {"synchronize", (PyCFunction)(void (*)(void))event_synchronize,
     METH_FASTCALL | METH_KEYWORDS,
     "synchronize(timeout=None): waits (GIL released) for the last record."},
    {"query", event_query, METH_NOARGS, "query() -> bool"},
    {"elapsed_ns", event_elapsed_ns, METH_O,
     "elapsed_ns(end) -> int: device time from this event to |end|."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot k_event_slots[] = {
    {Py_tp_new, event_new},
    {Py_tp_dealloc, event_dealloc},
    {Py_tp_methods, k_event_methods},
    {Py_tp_doc, "Event(device): a point in a stream, with a timestamp."},
    {0, NULL},
};

static PyType_Spec k_event_spec = {
    "accel.Event", sizeof(EventObject), 0, Py_TPFLAGS_DEFAULT, k_event_slots,
};

// ---------------------------------------------------------------------------
// Semaphore
// ---------------------------------------------------------------------------

static void semaphore_drop(child_t *child) {
  SemaphoreObject *self = APY_CONTAINER(child, SemaphoreObject, link);
  accel_semaphore_release(self->semaphore);
  self->semaphore = NULL;
}

static PyObject *semaphore_new(PyTypeObject *type, PyObject *args,
                               PyObject *kwargs) {
  static char *kwlist[] = {"device", "value", NULL};
  PyObject *device;
  unsigned long long value = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|K:Semaphore", kwlist,
                                   &device, &value)) {
    return NULL;
  }
  accel_device_t *dev = apy_device_handle(device);
  if (dev == NULL) {
    return NULL;
  }
  accel_semaphore_t *sem = NULL;
  accel_status_t st = accel_semaphore_create(dev, value, &sem);
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  SemaphoreObject *self = (SemaphoreObject *)apy_alloc(type);
  if (self == NULL) {
    accel_semaphore_release(sem);
    return NULL;
  }
  self->rt = (RuntimeObject *)Py_NewRef(((DeviceObject *)device)->rt);
  self->semaphore = sem;
  child_link(self->rt, &self->link, semaphore_drop);
  return (PyObject *)self;
}

static void semaphore_dealloc(PyObject *obj) {
  SemaphoreObject *self = (SemaphoreObject *)obj;
  child_unlink(&self->link);
  semaphore_drop(&self->link);
  Py_XDECREF(self->rt);
  apy_dealloc_heap(obj);
}

accel_semaphore_t *apy_semaphore_handle(PyObject *obj) {
  if (!PyObject_TypeCheck(obj, apy_SemaphoreType)) {
    PyErr_SetString(PyExc_TypeError, "expected an accel.Semaphore");
    return NULL;
  }
  SemaphoreObject *s = (SemaphoreObject *)obj;
  if (s->semaphore == NULL) {
    apy_closed("accel.Semaphore", "its Runtime was closed");
  }
  return s->semaphore;
}

static PyObject *semaphore_value(PyObject *obj, void *closure) {
  accel_semaphore_t *sem = apy_semaphore_handle(obj);
  if (sem == NULL) {
    return NULL;
  }
  uint64_t v = 0;
  accel_status_t st = accel_semaphore_query(sem, &v);
  return st == ACCEL_OK ? PyLong_FromUnsignedLongLong(v) : apy_raise(st);
}

static PyObject *semaphore_signal(PyObject *obj, PyObject *arg) {
  accel_semaphore_t *sem = apy_semaphore_handle(obj);
  if (sem == NULL) {
    return NULL;
  }
  unsigned long long v = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) {
    return NULL;
  }
  accel_status_t st;
  APY_NOGIL(st = accel_semaphore_signal(sem, v));
  return status_none(st);
}

static PyObject *semaphore_wait(PyObject *obj, PyObject *args,
                                PyObject *kwargs) {
  static char *kwlist[] = {"value", "timeout", NULL};
  unsigned long long value;
  PyObject *timeout = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "K|O:wait", kwlist, &value,
                                   &timeout)) {
    return NULL;
  }
  uint64_t ns;
  accel_semaphore_t *sem = apy_semaphore_handle(obj);
  if (sem == NULL || !apy_timeout_ns(timeout, &ns)) {
    return NULL;
  }
  accel_status_t st;
  APY_NOGIL(st = accel_semaphore_wait(sem, value, ns));
  return status_none(st);
}

static PyMethodDef k_semaphore_methods[] = {
    {"signal", semaphore_signal, METH_O,
     "signal(value): sets the counter from the host."},
    {"wait", (PyCFunction)(void (*)(void))semaphore_wait,
     METH_VARARGS | METH_KEYWORDS,
     "wait(value, timeout=None): waits (GIL released) until the counter\n"
     "reaches |value|; accel.TimeoutError after |timeout| seconds."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef k_semaphore_getset[] = {
    {"value", semaphore_value, NULL, "The current counter.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot k_semaphore_slots[] = {
    {Py_tp_new, semaphore_new},
    {Py_tp_dealloc, semaphore_dealloc},
    {Py_tp_methods, k_semaphore_methods},
    {Py_tp_getset, k_semaphore_getset},
    {Py_tp_doc,
     "Semaphore(device, value=0): a timeline semaphore (a 64-bit counter\n"
     "that only grows)."},
    {0, NULL},
};

static PyType_Spec k_semaphore_spec = {
    "accel.Semaphore", sizeof(SemaphoreObject), 0, Py_TPFLAGS_DEFAULT,
    k_semaphore_slots,
};

int apy_sync_types_init(PyObject *module) {
  apy_StreamType = (PyTypeObject *)PyType_FromSpec(&k_stream_spec);
  apy_EventType = (PyTypeObject *)PyType_FromSpec(&k_event_spec);
  apy_SemaphoreType = (PyTypeObject *)PyType_FromSpec(&k_semaphore_spec);
  if (apy_StreamType == NULL || apy_EventType == NULL ||
      apy_SemaphoreType == NULL) {
    return -1;
  }
  if (PyModule_AddObject(module, "Stream", Py_NewRef(apy_StreamType)) < 0 ||
      PyModule_AddObject(module, "Event", Py_NewRef(apy_EventType)) < 0 ||
      PyModule_AddObject(module, "Semaphore", Py_NewRef(apy_SemaphoreType)) <
          0) {
    return -1;
  }
  return 0;
}
