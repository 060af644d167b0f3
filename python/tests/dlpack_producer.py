"""A DLPack producer written with ctypes, independent of accel and numpy:
capsules over memory it owns, with deleters that count their calls. The
reference for the deleter and capsule rules the tests check."""
import ctypes


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


class DLManagedTensor(ctypes.Structure):
    pass


VERSIONED_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
LEGACY_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
    ("deleter", VERSIONED_DELETER), ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor)]
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
    ("deleter", LEGACY_DELETER)]

assert ctypes.sizeof(DLTensor) == 48
assert ctypes.sizeof(DLManagedTensorVersioned) == 80
assert ctypes.sizeof(DLManagedTensor) == 64

READ_ONLY = 1
KDLCPU, KDLCUDA = 1, 2
KDLFLOAT = 2

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class Producer:
    """Float32 tensors over memory this object owns. `deleted` counts
    deleter calls; `on_delete` (optional) runs in each."""

    def __init__(self, on_delete=None):
        self.deleted = 0
        self.on_delete = on_delete
        self._keep = []
        self._versioned_deleter = VERSIONED_DELETER(self._delete)
        self._legacy_deleter = LEGACY_DELETER(self._delete)

    def _delete(self, _ptr):
        self.deleted += 1
        if self.on_delete is not None:
            self.on_delete()

    def last_tensor(self):
        """The managed tensor behind the last capsule (to edit it)."""
        return self._keep[-1][2]

    def capsule(self, values, shape=None, versioned=True, flags=0,
                device=(KDLCPU, 0), version=(1, 1)):
        n = len(values)
        memory = (ctypes.c_float * n)(*values)
        shape = shape or (n,)
        shape_arr = (ctypes.c_int64 * len(shape))(*shape)
        tensor = DLTensor(
            data=ctypes.cast(memory, ctypes.c_void_p), device=DLDevice(*device),
            ndim=len(shape), dtype=DLDataType(KDLFLOAT, 32, 1),
            shape=shape_arr, strides=None, byte_offset=0)
        if versioned:
            mt = DLManagedTensorVersioned(
                version=DLPackVersion(*version), manager_ctx=None,
                deleter=self._versioned_deleter, flags=flags, dl_tensor=tensor)
            name = b"dltensor_versioned"
        else:
            mt = DLManagedTensor(dl_tensor=tensor, manager_ctx=None,
                                 deleter=self._legacy_deleter)
            name = b"dltensor"
        self._keep.append((memory, shape_arr, mt))
        return _capsule_new(ctypes.addressof(mt), name, None), memory
