// CommandBuffer objects and Stream.execute: record commands once, replay
// them with a binding table and constants per execute
// (include/accel/command_buffer.h; docs/command-buffers.md).
//
// A recorded buffer, semaphore or kernel is retained by the C command
// buffer, so a Python object freed after recording cannot dangle. The
// binding table of each execute is retained by the execute itself until the
// replay completed. Host calls are not offered: a Python callable on the
// stream's host thread would need the GIL inside the replay.
#include <string.h>

#include "accel_py.h"

PyTypeObject *apy_CommandBufferType;

typedef struct CommandBufferObject {
  PyObject_HEAD
  RuntimeObject *rt;
  child_t link;
  accel_command_buffer_t *cb;  // one reference; NULL once closed
  PyObject *device;
} CommandBufferObject;

static void cb_drop(child_t *child) {
  CommandBufferObject *self = APY_CONTAINER(child, CommandBufferObject, link);
  accel_command_buffer_release(self->cb);
  self->cb = NULL;
}

static PyObject *cb_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"device", "name", "reentrant", NULL};
  PyObject *device = NULL;
  const char *name = NULL;
  int reentrant = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|z$p:CommandBuffer", kwlist,
                                   &device, &name, &reentrant)) {
    return NULL;
  }
  accel_device_t *dev = apy_device_handle(device);
  if (dev == NULL) {
    return NULL;
  }
  accel_command_buffer_desc_t desc = {
      .struct_size = sizeof(desc),
      .flags = reentrant ? ACCEL_COMMAND_BUFFER_FLAG_REENTRANT : 0,
      .name = name,
  };
  accel_command_buffer_t *cb = NULL;
  accel_status_t st = accel_command_buffer_create(dev, &desc, &cb);
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  CommandBufferObject *self = (CommandBufferObject *)apy_alloc(type);
  if (self == NULL) {
    accel_command_buffer_release(cb);
    return NULL;
  }
  self->rt = (RuntimeObject *)Py_NewRef(((DeviceObject *)device)->rt);
  self->device = Py_NewRef(device);
  self->cb = cb;
  child_link(self->rt, &self->link, cb_drop);
  return (PyObject *)self;
}

static void cb_dealloc(PyObject *obj) {
  CommandBufferObject *self = (CommandBufferObject *)obj;
  child_unlink(&self->link);
  cb_drop(&self->link);
  Py_XDECREF(self->device);
  Py_XDECREF(self->rt);
  apy_dealloc_heap(obj);
}

static accel_command_buffer_t *cb_handle(PyObject *obj) {
  if (!PyObject_TypeCheck(obj, apy_CommandBufferType)) {
    PyErr_SetString(PyExc_TypeError, "expected an accel.CommandBuffer");
    return NULL;
  }
  CommandBufferObject *self = (CommandBufferObject *)obj;
  if (self->cb == NULL) {
    apy_closed("accel.CommandBuffer", "its Runtime was closed");
  }
  return self->cb;
}

// A recorded use: a Buffer, an int (a binding-table slot), or a tuple
// (Buffer | slot, offset[, length]).
static bool parse_ref(PyObject *obj, accel_command_buffer_ref_t *out) {
  *out = (accel_command_buffer_ref_t){0};
  PyObject *what = obj;
  if (PyTuple_Check(obj)) {
    Py_ssize_t n = PyTuple_Size(obj);
    if (n < 2 || n > 3) {
      PyErr_SetString(PyExc_TypeError,
                      "a reference tuple is (buffer or slot, offset[, length])");
      return false;
    }
    what = PyTuple_GetItem(obj, 0);
    out->offset = PyLong_AsUnsignedLongLong(PyTuple_GetItem(obj, 1));
    if (PyErr_Occurred()) {
      return false;
    }
    if (n == 3) {
      out->length = PyLong_AsUnsignedLongLong(PyTuple_GetItem(obj, 2));
      if (PyErr_Occurred()) {
        return false;
      }
    }
  }
  if (PyLong_Check(what)) {
    unsigned long slot = PyLong_AsUnsignedLong(what);
    if (PyErr_Occurred()) {
      return false;
    }
    if (slot > UINT32_MAX) {
      PyErr_SetString(PyExc_ValueError, "a binding-table slot exceeds 2**32-1");
      return false;
    }
    out->slot = (uint32_t)slot;
    return true;
  }
  out->buffer = apy_buffer_handle(what);
  return out->buffer != NULL;
}

// bytes(obj) for constants (bytes, or anything with the buffer protocol),
// as a new reference; None gives NULL with no exception and *len 0.
static PyObject *constants_bytes(PyObject *obj, const char **data,
                                 Py_ssize_t *len) {
  *data = NULL;
  *len = 0;
  if (obj == NULL || obj == Py_None) {
    return NULL;
  }
  PyObject *b = PyObject_Bytes(obj);
  if (b != NULL && PyBytes_AsStringAndSize(b, (char **)data, len) < 0) {
    Py_CLEAR(b);
  }
  return b;
}

static PyObject *recorded(accel_status_t st) {
  return st == ACCEL_OK ? Py_NewRef(Py_None) : apy_raise(st);
}

// launch(kernel, grid, *refs, constants=b"", constants_offset=None)
static PyObject *cb_launch(PyObject *obj, PyObject *args, PyObject *kwargs) {
  accel_command_buffer_t *cb = cb_handle(obj);
  if (cb == NULL) {
    return NULL;
  }
  Py_ssize_t nargs = PyTuple_Size(args);
  if (nargs < 2) {
    PyErr_SetString(PyExc_TypeError,
                    "launch(kernel, grid, *refs, constants=b\"\", "
                    "constants_offset=None)");
    return NULL;
  }
  PyObject *constants_obj = NULL, *offset_obj = NULL;
  if (kwargs != NULL) {
    constants_obj = PyDict_GetItemString(kwargs, "constants");
    offset_obj = PyDict_GetItemString(kwargs, "constants_offset");
    Py_ssize_t known = (constants_obj != NULL) + (offset_obj != NULL);
    if (PyDict_Size(kwargs) > known) {
      PyErr_SetString(PyExc_TypeError,
                      "launch(): the keyword arguments are constants and "
                      "constants_offset");
      return NULL;
    }
  }
  PyObject *kobj = PyTuple_GetItem(args, 0);
  if (!PyObject_TypeCheck(kobj, apy_KernelType)) {
    PyErr_SetString(PyExc_TypeError, "launch(): expected an accel.Kernel");
    return NULL;
  }
  KernelObject *k = (KernelObject *)kobj;
  if (k->kernel == NULL) {
    return apy_closed("accel.Kernel", "its Runtime was closed");
  }
  uint32_t grid[3];
  if (!apy_parse_grid(PyTuple_GetItem(args, 1), grid)) {
    return NULL;
  }
  Py_ssize_t nb = nargs - 2;
  if (nb > 256) {
    PyErr_SetString(PyExc_ValueError, "a launch binds at most 256 buffers");
    return NULL;
  }
  accel_command_buffer_ref_t refs[256];
  for (Py_ssize_t i = 0; i < nb; ++i) {
    if (!parse_ref(PyTuple_GetItem(args, 2 + i), &refs[i])) {
      return NULL;
    }
  }
  accel_command_buffer_launch_desc_t d = {
      .struct_size = sizeof(d),
      .workgroup_count = {grid[0], grid[1], grid[2]},
      .binding_count = (uint32_t)nb,
      .bindings = refs,
  };
  const char *cdata = NULL;
  Py_ssize_t clen = 0;
  PyObject *cbytes = NULL;
  if (offset_obj != NULL && offset_obj != Py_None) {
    if (constants_obj != NULL && constants_obj != Py_None) {
      PyErr_SetString(PyExc_TypeError,
                      "launch(): constants and constants_offset exclude "
                      "each other (the offset takes the launch's constants "
                      "from each execute)");
      return NULL;
    }
    unsigned long off = PyLong_AsUnsignedLong(offset_obj);
    if (PyErr_Occurred()) {
      return NULL;
    }
    if (off > UINT32_MAX) {
      PyErr_SetString(PyExc_ValueError, "constants_offset exceeds 2**32-1");
      return NULL;
    }
    d.flags = ACCEL_COMMAND_BUFFER_LAUNCH_CONSTANTS_FROM_EXECUTE;
    d.constants_offset = (uint32_t)off;
    d.constants_size = k->constants_size;
  } else {
    cbytes = constants_bytes(constants_obj, &cdata, &clen);
    if (cbytes == NULL && PyErr_Occurred()) {
      return NULL;
    }
    d.constants = cdata;
    d.constants_size = (uint32_t)clen;
  }
  accel_status_t st = accel_command_buffer_launch(cb, k->kernel, &d);
  Py_XDECREF(cbytes);
  return recorded(st);
}

static PyObject *cb_fill(PyObject *obj, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"dst", "nbytes", "value", "pattern_size", NULL};
  PyObject *dst_obj;
  unsigned long long nbytes, value = 0;
  unsigned int pattern_size = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OK|KI:fill", kwlist,
                                   &dst_obj, &nbytes, &value, &pattern_size)) {
    return NULL;
  }
  accel_command_buffer_t *cb = cb_handle(obj);
  accel_command_buffer_ref_t dst;
  if (cb == NULL || !parse_ref(dst_obj, &dst)) {
    return NULL;
  }
  return recorded(
      accel_command_buffer_fill(cb, &dst, nbytes, value, pattern_size));
}

static PyObject *cb_copy(PyObject *obj, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"dst", "src", "nbytes", NULL};
  PyObject *dst_obj, *src_obj;
  unsigned long long nbytes;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOK:copy", kwlist, &dst_obj,
                                   &src_obj, &nbytes)) {
    return NULL;
  }
  accel_command_buffer_t *cb = cb_handle(obj);
  accel_command_buffer_ref_t dst, src;
  if (cb == NULL || !parse_ref(dst_obj, &dst) || !parse_ref(src_obj, &src)) {
    return NULL;
  }
  return recorded(accel_command_buffer_copy(cb, &dst, &src, nbytes));
}

static PyObject *cb_sem_op(PyObject *obj, PyObject *args, bool signal) {
  PyObject *sem_obj;
  unsigned long long value;
  if (!PyArg_ParseTuple(args, signal ? "OK:signal" : "OK:wait", &sem_obj,
                        &value)) {
    return NULL;
  }
  accel_command_buffer_t *cb = cb_handle(obj);
  accel_semaphore_t *sem = cb != NULL ? apy_semaphore_handle(sem_obj) : NULL;
  if (sem == NULL) {
    return NULL;
  }
  return recorded(signal ? accel_command_buffer_signal(cb, sem, value)
                         : accel_command_buffer_wait(cb, sem, value));
}

static PyObject *cb_signal(PyObject *obj, PyObject *args) {
  return cb_sem_op(obj, args, true);
}

static PyObject *cb_wait(PyObject *obj, PyObject *args) {
  return cb_sem_op(obj, args, false);
}

static PyObject *cb_finalize(PyObject *obj, PyObject *unused) {
  accel_command_buffer_t *cb = cb_handle(obj);
  return cb != NULL ? recorded(accel_command_buffer_finalize(cb)) : NULL;
}

static PyObject *cb_info_field(PyObject *obj, void *closure) {
  accel_command_buffer_t *cb = cb_handle(obj);
  if (cb == NULL) {
    return NULL;
  }
  accel_command_buffer_info_t info = {.struct_size = sizeof(info)};
  accel_status_t st = accel_command_buffer_info(cb, &info);
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  const char *field = closure;
  if (strcmp(field, "command_count") == 0) {
    return PyLong_FromUnsignedLong(info.command_count);
  }
  if (strcmp(field, "binding_count") == 0) {
    return PyLong_FromUnsignedLong(info.binding_count);
  }
  if (strcmp(field, "constants_size") == 0) {
    return PyLong_FromUnsignedLong(info.constants_size);
  }
  if (strcmp(field, "finalized") == 0) {
    return PyBool_FromLong(info.finalized);
  }
  if (strcmp(field, "reentrant") == 0) {
    return PyBool_FromLong(
        (info.flags & ACCEL_COMMAND_BUFFER_FLAG_REENTRANT) != 0);
  }
  return PyLong_FromUnsignedLongLong(info.execute_count);
}

static PyMethodDef k_cb_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))cb_launch,
     METH_VARARGS | METH_KEYWORDS,
     "launch(kernel, grid, *refs, constants=b\"\", constants_offset=None):\n"
     "records a launch. A ref is a Buffer, an int (a binding-table slot\n"
     "each execute fills) or a tuple (buffer or slot, offset[, length]).\n"
     "constants_offset takes the kernel's constants from each execute's\n"
     "constants block at that byte offset instead of |constants|."},
    {"fill", (PyCFunction)(void (*)(void))cb_fill, METH_VARARGS | METH_KEYWORDS,
     "fill(dst, nbytes, value=0, pattern_size=1): records a fill."},
    {"copy", (PyCFunction)(void (*)(void))cb_copy, METH_VARARGS | METH_KEYWORDS,
     "copy(dst, src, nbytes): records a copy between refs."},
    {"signal", cb_signal, METH_VARARGS,
     "signal(semaphore, value): records a signal."},
    {"wait", cb_wait, METH_VARARGS, "wait(semaphore, value): records a wait."},
    {"finalize", cb_finalize, METH_NOARGS,
     "finalize(): ends recording; the buffer becomes executable."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef k_cb_getset[] = {
    {"command_count", cb_info_field, NULL, "Commands recorded.",
     "command_count"},
    {"binding_count", cb_info_field, NULL,
     "Binding-table slots an execute must supply.", "binding_count"},
    {"constants_size", cb_info_field, NULL,
     "Bytes of constants an execute must supply.", "constants_size"},
    {"finalized", cb_info_field, NULL, "True once finalize() was called.",
     "finalized"},
    {"reentrant", cb_info_field, NULL,
     "True if it may execute on several streams at once.", "reentrant"},
    {"execute_count", cb_info_field, NULL, "Executes submitted so far.",
     "execute_count"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot k_cb_slots[] = {
    {Py_tp_new, cb_new},
    {Py_tp_dealloc, cb_dealloc},
    {Py_tp_methods, k_cb_methods},
    {Py_tp_getset, k_cb_getset},
    {Py_tp_doc,
     "CommandBuffer(device, name=None, *, reentrant=False): commands\n"
     "recorded once (checked as the stream calls check them) and replayed\n"
     "by Stream.execute with a binding table and constants per execute."},
    {0, NULL},
};

static PyType_Spec k_cb_spec = {
    "accel.CommandBuffer", sizeof(CommandBufferObject), 0, Py_TPFLAGS_DEFAULT,
    k_cb_slots,
};

// Stream.execute(command_buffer, bindings=(), constants=None)
PyObject *apy_stream_execute(PyObject *stream_obj, PyObject *args,
                             PyObject *kwargs) {
  static char *kwlist[] = {"command_buffer", "bindings", "constants", NULL};
  PyObject *cb_obj, *bindings_obj = NULL, *constants_obj = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:execute", kwlist,
                                   &cb_obj, &bindings_obj, &constants_obj)) {
    return NULL;
  }
  accel_stream_t *s = apy_stream_handle(stream_obj);
  accel_command_buffer_t *cb = s != NULL ? cb_handle(cb_obj) : NULL;
  if (cb == NULL) {
    return NULL;
  }
  PyObject *seq = NULL;
  Py_ssize_t n = 0;
  if (bindings_obj != NULL && bindings_obj != Py_None) {
    seq = PySequence_Tuple(bindings_obj);
    if (seq == NULL) {
      return NULL;
    }
    n = PyTuple_Size(seq);
  }
  accel_command_buffer_binding_t *table =
      n > 0 ? PyMem_Calloc((size_t)n, sizeof(*table)) : NULL;
  if (n > 0 && table == NULL) {
    Py_DECREF(seq);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    accel_command_buffer_ref_t r;
    PyObject *item = PyTuple_GetItem(seq, i);
    if (!parse_ref(item, &r)) {
      goto fail;
    }
    if (r.buffer == NULL) {
      PyErr_Format(PyExc_TypeError,
                   "execute(): binding %zd must be a Buffer or (Buffer, "
                   "offset[, length]), not a slot number", i);
      goto fail;
    }
    table[i] = (accel_command_buffer_binding_t){
        .buffer = r.buffer, .offset = r.offset, .length = r.length};
  }
  const char *cdata = NULL;
  Py_ssize_t clen = 0;
  PyObject *cbytes = constants_bytes(constants_obj, &cdata, &clen);
  if (cbytes == NULL && PyErr_Occurred()) {
    goto fail;
  }
  if (clen > (Py_ssize_t)UINT32_MAX) {
    Py_DECREF(cbytes);
    PyErr_SetString(PyExc_ValueError, "execute(): constants exceed 4 GiB");
    goto fail;
  }
  accel_command_buffer_execute_desc_t d = {
      .struct_size = sizeof(d),
      .binding_count = (uint32_t)n,
      .bindings = table,
      .constants = cdata,
      .constants_size = (uint32_t)clen,
  };
  accel_status_t st;
  APY_NOGIL(st = accel_stream_execute(s, cb, &d));
  Py_XDECREF(cbytes);
  if (st == ACCEL_OK) {
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject *item = PyTuple_GetItem(seq, i);
      apy_buffer_touch(PyTuple_Check(item) ? PyTuple_GetItem(item, 0) : item,
                       stream_obj);
    }
  }
  PyMem_Free(table);
  Py_XDECREF(seq);
  return recorded(st);
fail:
  PyMem_Free(table);
  Py_XDECREF(seq);
  return NULL;
}

int apy_command_buffer_type_init(PyObject *module) {
  apy_CommandBufferType = (PyTypeObject *)PyType_FromSpec(&k_cb_spec);
  if (apy_CommandBufferType == NULL) {
    return -1;
  }
  return PyModule_AddObject(module, "CommandBuffer",
                            Py_NewRef(apy_CommandBufferType));
}
