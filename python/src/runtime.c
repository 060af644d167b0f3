// Runtime and Device objects, the shared C runtime (core_t) and the list of
// a Runtime's live objects.
#include <string.h>

#include "accel_py.h"

PyTypeObject *apy_RuntimeType;
PyTypeObject *apy_DeviceType;
_Atomic long apy_live_exports;

void core_retain(core_t *core) {
  // Relaxed: a new reference is taken from an existing one.
  atomic_fetch_add_explicit(&core->refs, 1, memory_order_relaxed);
}

void core_release(core_t *core) {
  // Acq_rel: the last release sees every other holder's use of the runtime.
  if (atomic_fetch_sub_explicit(&core->refs, 1, memory_order_acq_rel) == 1) {
    accel_runtime_destroy(core->runtime);
    free(core);
  }
}

void child_link(RuntimeObject *rt, child_t *child, void (*drop)(child_t *)) {
  child->drop = drop;
  child->pass = 1;
  child->next = rt->children.next;
  child->prev = &rt->children;
  rt->children.next->prev = child;
  rt->children.next = child;
}

void child_unlink(child_t *child) {
  if (child->next != NULL) {
    child->prev->next = child->next;
    child->next->prev = child->prev;
    child->next = child->prev = NULL;
  }
}

PyObject *apy_alloc(PyTypeObject *type) {
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  return alloc(type, 0);
}

void apy_dealloc_heap(PyObject *self) {
  PyTypeObject *type = Py_TYPE(self);
  freefunc free_fn = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_fn(self);
  Py_DECREF(type);
}

// ---------------------------------------------------------------------------
// Runtime
// ---------------------------------------------------------------------------

// Live Runtimes (guarded by the GIL), so that interpreter exit can close
// them while Python still runs: a deleter of an imported tensor (numpy's,
// torch's) then runs in a working interpreter.
static RuntimeObject *g_live_runtimes;

static PyObject *runtime_new(PyTypeObject *type, PyObject *args,
                             PyObject *kwargs) {
  static char *kwlist[] = {"host_devices", "visible_devices", NULL};
  unsigned int host_devices = 0;
  const char *visible = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|Iz:Runtime", kwlist,
                                   &host_devices, &visible)) {
    return NULL;
  }
  core_t *core = calloc(1, sizeof(*core));
  if (core == NULL) {
    return PyErr_NoMemory();
  }
  accel_runtime_options_t opts;
  accel_runtime_options_init(&opts);
  opts.host_device_count = host_devices;
  opts.visible_devices = visible;
  accel_status_t st;
  APY_NOGIL(st = accel_runtime_create(&opts, &core->runtime));
  if (st != ACCEL_OK) {
    free(core);
    return apy_raise(st);
  }
  atomic_init(&core->refs, 1);
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  RuntimeObject *self = (RuntimeObject *)alloc(type, 0);
  if (self == NULL) {
    core_release(core);
    return NULL;
  }
  self->core = core;
  self->children.next = self->children.prev = &self->children;
  self->live_next = g_live_runtimes;
  if (g_live_runtimes != NULL) {
    g_live_runtimes->live_prev = self;
  }
  g_live_runtimes = self;
  return (PyObject *)self;
}

// Releases every live object's handle, then the Python side's hold on the C
// runtime (destroyed now, or when the last export goes).
static void runtime_close_impl(RuntimeObject *self) {
  if (self->core == NULL) {
    return;
  }
  // Streams first (they drain), so that work still running finishes before
  // the buffers it uses lose their Python references.
  // Each drop may release the GIL (a stream drains), so the scan restarts
  // from the head rather than trusting a saved next pointer.
  for (int pass = 0; pass < 2; ++pass) {
    for (;;) {
      child_t *c = self->children.next;
      while (c != &self->children && c->pass != pass) {
        c = c->next;
      }
      if (c == &self->children) {
        break;
      }
      child_unlink(c);
      c->drop(c);
    }
  }
  core_t *core = self->core;
  self->core = NULL;
  APY_NOGIL(core_release(core));
}

PyObject *apy_close_all_runtimes(PyObject *module, PyObject *unused) {
  // A close may release the GIL (streams drain): restart from the head,
  // skipping those already closed.
  for (;;) {
    RuntimeObject *rt = g_live_runtimes;
    while (rt != NULL && rt->core == NULL) {
      rt = rt->live_next;
    }
    if (rt == NULL) {
      break;
    }
    runtime_close_impl(rt);
  }
  return Py_NewRef(Py_None);
}

static PyObject *runtime_close(PyObject *self, PyObject *unused) {
  runtime_close_impl((RuntimeObject *)self);
  return Py_NewRef(Py_None);
}

static void runtime_dealloc(PyObject *self) {
  RuntimeObject *rt = (RuntimeObject *)self;
  runtime_close_impl(rt);
  if (rt->live_prev != NULL) {
    rt->live_prev->live_next = rt->live_next;
  } else if (g_live_runtimes == rt) {
    g_live_runtimes = rt->live_next;
  }
  if (rt->live_next != NULL) {
    rt->live_next->live_prev = rt->live_prev;
  }
  apy_dealloc_heap(self);
}

static PyObject *runtime_enter(PyObject *self, PyObject *unused) {
  return Py_NewRef(self);
}

static PyObject *runtime_exit(PyObject *self, PyObject *args) {
  runtime_close_impl((RuntimeObject *)self);
  Py_RETURN_FALSE;
}

static bool runtime_live(RuntimeObject *self) {
  if (self->core == NULL) {
    apy_closed("accel.Runtime", "Runtime.close() was called");
    return false;
  }
  return true;
}

static PyObject *runtime_devices(PyObject *obj, void *closure) {
  RuntimeObject *self = (RuntimeObject *)obj;
  if (!runtime_live(self)) {
    return NULL;
  }
  uint32_t n = 0;
  accel_status_t st = accel_device_count(self->core->runtime, &n);
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  PyObject *list = PyList_New(n);
  for (uint32_t i = 0; list != NULL && i < n; ++i) {
    accel_device_t *dev = NULL;
    st = accel_device_get(self->core->runtime, i, &dev);
    PyObject *d = st == ACCEL_OK ? apy_device_new(self, dev) : apy_raise(st);
    if (d == NULL) {
      Py_CLEAR(list);
      break;
    }
    PyList_SetItem(list, i, d);
  }
  return list;
}

static PyObject *runtime_device(PyObject *obj, PyObject *arg) {
  RuntimeObject *self = (RuntimeObject *)obj;
  if (!runtime_live(self)) {
    return NULL;
  }
  unsigned long i = PyLong_AsUnsignedLong(arg);
  if (i == (unsigned long)-1 && PyErr_Occurred()) {
    return NULL;
  }
  accel_device_t *dev = NULL;
  accel_status_t st = accel_device_get(self->core->runtime, (uint32_t)i, &dev);
  return st == ACCEL_OK ? apy_device_new(self, dev) : apy_raise(st);
}

static PyObject *runtime_closed(PyObject *obj, void *closure) {
  return PyBool_FromLong(((RuntimeObject *)obj)->core == NULL);
}

static PyObject *runtime_exports(PyObject *obj, void *closure) {
  return PyLong_FromLong(atomic_load(&apy_live_exports));
}

static PyMethodDef k_runtime_methods[] = {
    {"close", runtime_close, METH_NOARGS,
     "close(): releases every object of this runtime (they raise\n"
     "accel.ClosedError from then on) and the runtime itself once no\n"
     "DLPack export or buffer view of its memory is left. Idempotent."},
    {"device", runtime_device, METH_O, "device(index) -> Device"},
    {"__enter__", runtime_enter, METH_NOARGS, NULL},
    {"__exit__", runtime_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef k_runtime_getset[] = {
    {"devices", runtime_devices, NULL, "The visible devices, in order.", NULL},
    {"closed", runtime_closed, NULL, "True once close() was called.", NULL},
    {"_live_exports", runtime_exports, NULL,
     "Live DLPack exports and buffer views of every runtime (for tests).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot k_runtime_slots[] = {
    {Py_tp_new, runtime_new},
    {Py_tp_dealloc, runtime_dealloc},
    {Py_tp_methods, k_runtime_methods},
    {Py_tp_getset, k_runtime_getset},
    {Py_tp_doc,
     "Runtime(host_devices=0, visible_devices=None)\n\n"
     "An accel runtime: its devices and every object made from them. Use\n"
     "it as a context manager or call close(); objects may be dropped in\n"
     "any order."},
    {0, NULL},
};

static PyType_Spec k_runtime_spec = {
    "accel.Runtime", sizeof(RuntimeObject), 0, Py_TPFLAGS_DEFAULT,
    k_runtime_slots,
};

// ---------------------------------------------------------------------------
// Device
// ---------------------------------------------------------------------------

static void device_drop(child_t *child) {
  APY_CONTAINER(child, DeviceObject, link)->device = NULL;
}

PyObject *apy_device_new(RuntimeObject *rt, accel_device_t *device) {
  DeviceObject *self = (DeviceObject *)apy_alloc(apy_DeviceType);
  if (self == NULL) {
    return NULL;
  }
  self->rt = (RuntimeObject *)Py_NewRef(rt);
  self->device = device;
  child_link(rt, &self->link, device_drop);
  return (PyObject *)self;
}

static void device_dealloc(PyObject *obj) {
  DeviceObject *self = (DeviceObject *)obj;
  child_unlink(&self->link);
  Py_XDECREF(self->rt);
  apy_dealloc_heap(obj);
}

accel_device_t *apy_device_handle(PyObject *obj) {
  if (!PyObject_TypeCheck(obj, apy_DeviceType)) {
    PyErr_SetString(PyExc_TypeError, "expected an accel.Device");
    return NULL;
  }
  DeviceObject *d = (DeviceObject *)obj;
  if (d->device == NULL) {
    apy_closed("accel.Device", "its Runtime was closed");
  }
  return d->device;
}

static PyObject *device_info(PyObject *obj, void *closure) {
  accel_device_t *dev = apy_device_handle(obj);
  if (dev == NULL) {
    return NULL;
  }
  accel_device_info_t info = {.struct_size = sizeof(info)};
  accel_status_t st = accel_device_info(dev, &info);
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  return Py_BuildValue(
      "{s:I,s:s,s:s,s:s,s:s,s:s,s:K,s:K,s:i,s:I,s:I,s:I}", "index", info.index,
      "id", info.id, "name", info.name, "backend", info.backend, "target",
      info.target, "pci_bus_id", info.pci_bus_id, "memory_bytes",
      (unsigned long long)info.memory_bytes, "page_size",
      (unsigned long long)info.page_size, "numa_node", info.numa_node,
      "compute_queue_count", info.compute_queue_count, "copy_queue_count",
      info.copy_queue_count, "caps", info.caps);
}

static PyObject *device_id(PyObject *obj, void *closure) {
  accel_device_t *dev = apy_device_handle(obj);
  if (dev == NULL) {
    return NULL;
  }
  accel_device_info_t info = {.struct_size = sizeof(info)};
  accel_status_t st = accel_device_info(dev, &info);
  return st == ACCEL_OK ? PyUnicode_FromString(info.id) : apy_raise(st);
}

static PyObject *device_runtime(PyObject *obj, void *closure) {
  return Py_NewRef(((DeviceObject *)obj)->rt);
}

static PyObject *device_dlpack_device(PyObject *obj, PyObject *unused) {
  accel_device_t *dev = apy_device_handle(obj);
  if (dev == NULL) {
    return NULL;
  }
  accel_dl_device_t d;
  accel_status_t st = accel_dlpack_device(dev, &d);
  return st == ACCEL_OK ? Py_BuildValue("(ii)", d.device_type, d.device_id)
                        : apy_raise(st);
}

static PyObject *device_alloc(PyObject *obj, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"nbytes", "zero", NULL};
  unsigned long long nbytes = 0;
  int zero = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "K|$p:alloc", kwlist, &nbytes,
                                   &zero)) {
    return NULL;
  }
  accel_device_t *dev = apy_device_handle(obj);
  if (dev == NULL) {
    return NULL;
  }
  accel_buffer_desc_t desc = {
      .struct_size = sizeof(desc),
      .size_bytes = nbytes,
      .flags = zero ? ACCEL_BUFFER_FLAG_ZERO : 0,
  };
  accel_buffer_t *buf = NULL;
  accel_status_t st;
  APY_NOGIL(st = accel_buffer_alloc(dev, &desc, &buf));
  if (st != ACCEL_OK) {
    return apy_raise(st);
  }
  return apy_buffer_new(((DeviceObject *)obj)->rt, obj, buf, false);
}

static PyObject *device_stream(PyObject *obj, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {"name", NULL};
  const char *name = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|z:stream", kwlist, &name)) {
    return NULL;
  }
  PyObject *call_args = Py_BuildValue("(Oz)", obj, name);
  if (call_args == NULL) {
    return NULL;
  }
  PyObject *s = PyObject_CallObject((PyObject *)apy_StreamType, call_args);
  Py_DECREF(call_args);
  return s;
}

static PyObject *device_richcompare(PyObject *a, PyObject *b, int op) {
  if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(b, apy_DeviceType)) {
    Py_RETURN_NOTIMPLEMENTED;
  }
  DeviceObject *x = (DeviceObject *)a, *y = (DeviceObject *)b;
  bool same = x->rt == y->rt && x->device == y->device;
  return PyBool_FromLong(op == Py_EQ ? same : !same);
}

static Py_hash_t device_hash(PyObject *obj) {
  DeviceObject *d = (DeviceObject *)obj;
  Py_hash_t h = (Py_hash_t)((uintptr_t)d->device >> 4) ^ (Py_hash_t)(uintptr_t)d->rt;
  return h == -1 ? -2 : h;
}

static PyObject *device_repr(PyObject *obj) {
  DeviceObject *d = (DeviceObject *)obj;
  if (d->device == NULL) {
    return PyUnicode_FromString("<accel.Device (closed)>");
  }
  accel_device_info_t info = {.struct_size = sizeof(info)};
  accel_device_info(d->device, &info);
  return PyUnicode_FromFormat("<accel.Device %s \"%s\">", info.id, info.name);
}

static PyMethodDef k_device_methods[] = {
    {"alloc", (PyCFunction)(void (*)(void))device_alloc,
     METH_VARARGS | METH_KEYWORDS,
     "alloc(nbytes, *, zero=False) -> Buffer: an untyped buffer."},
    {"stream", (PyCFunction)(void (*)(void))device_stream,
     METH_VARARGS | METH_KEYWORDS, "stream(name=None) -> Stream"},
    {"__dlpack_device__", device_dlpack_device, METH_NOARGS,
     "The DLPack (device_type, device_id) of this device's memory."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef k_device_getset[] = {
    {"info", device_info, NULL, "accel_device_info_t as a dict.", NULL},
    {"id", device_id, NULL, "The stable id (\"host:0\").", NULL},
    {"runtime", device_runtime, NULL, "The Runtime.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot k_device_slots[] = {
    {Py_tp_dealloc, device_dealloc},
    {Py_tp_methods, k_device_methods},
    {Py_tp_getset, k_device_getset},
    {Py_tp_richcompare, device_richcompare},
    {Py_tp_hash, device_hash},
    {Py_tp_repr, device_repr},
    {Py_tp_doc, "A device of a Runtime (Runtime.devices)."},
    {0, NULL},
};

static PyType_Spec k_device_spec = {
    "accel.Device", sizeof(DeviceObject), 0, Py_TPFLAGS_DEFAULT,
    k_device_slots,
};

int apy_runtime_types_init(PyObject *module) {
  apy_RuntimeType = (PyTypeObject *)PyType_FromSpec(&k_runtime_spec);
  apy_DeviceType = (PyTypeObject *)PyType_FromSpec(&k_device_spec);
  if (apy_RuntimeType == NULL || apy_DeviceType == NULL) {
    return -1;
  }
  if (PyModule_AddObject(module, "Runtime", Py_NewRef(apy_RuntimeType)) < 0 ||
      PyModule_AddObject(module, "Device", Py_NewRef(apy_DeviceType)) < 0) {
    return -1;
  }
  return 0;
}
