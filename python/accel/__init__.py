"""accel: a host-side runtime for ML accelerators, from Python.

Devices, buffers, streams, events, semaphores, executables, kernels and
command buffers of
the accel C runtime; tensors in and out through DLPack (numpy, PyTorch) and
the buffer protocol; launches; perf counters and Perfetto traces.
See python/README.md.
"""
import atexit as _atexit
import threading as _threading

from ._accel import (  # noqa: F401
    AbortedError, Buffer, BusyError, ClosedError, CommandBuffer, Device, DeviceLostError,
    Error, Event, Executable, FormatError, InternalError, InvalidArgumentError,
    IOError, Kernel, NotFoundError, NotReadyError, OutOfMemoryError, Runtime,
    Semaphore, Stream, TimeoutError, UnavailableError, UnsupportedError,
    VersionError, api_version, counters, from_dlpack,
)
from . import _accel
from ._profile import Profile, profile, summarize  # noqa: F401

__all__ = [
    "AbortedError", "Buffer", "BusyError", "ClosedError", "CommandBuffer",
    "Device",
    "DeviceLostError", "Error", "Event", "Executable", "FormatError",
    "InternalError", "InvalidArgumentError", "IOError", "Kernel",
    "NotFoundError", "NotReadyError", "OutOfMemoryError", "Profile",
    "Runtime", "Semaphore", "Stream", "TimeoutError", "UnavailableError",
    "UnsupportedError", "VersionError", "api_version", "asarray", "counters",
    "default_device", "default_runtime", "empty", "from_dlpack", "profile",
    "summarize",
]

_default_lock = _threading.Lock()
_default = None


def default_runtime():
    """The process's default Runtime, created on first use (closed at exit)."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Runtime()
        return _default


def default_device():
    """Device 0 of the default runtime: where asarray and from_dlpack place
    tensors when no device is given."""
    return default_runtime().device(0)


@_atexit.register
def _close_runtimes_at_exit():
    # Every Runtime still alive (the default one and the user's): objects
    # keep working until here, then raise ClosedError; the deleters of
    # imported tensors run now, once, while the interpreter still works.
    global _default
    _default = None
    _accel._close_all_runtimes()


def _dtype_name(dtype):
    if isinstance(dtype, str):
        return dtype
    try:
        import numpy
    except ImportError:  # pragma: no cover - only without numpy
        raise TypeError("dtype must be a str without numpy") from None
    return numpy.dtype(dtype).name


_DTYPE_BITS = {
    "bool": 8, "int8": 8, "uint8": 8, "float8_e4m3fn": 8, "float8_e5m2": 8,
    "int16": 16, "uint16": 16, "float16": 16, "bfloat16": 16,
    "int32": 32, "uint32": 32, "float32": 32,
    "int64": 64, "uint64": 64, "float64": 64, "complex64": 64,
    "complex128": 128,
}


def empty(shape, dtype="float32", device=None):
    """A new typed Buffer of `shape` (row-major) on `device` (default:
    default_device()); its contents are undefined."""
    device = device if device is not None else default_device()
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(n) for n in shape)
    name = _dtype_name(dtype)
    if name not in _DTYPE_BITS:
        raise ValueError(f"unknown dtype {name!r}")
    count = 1
    for n in shape:
        count *= n
    buf = device.alloc(max(1, count * _DTYPE_BITS[name] // 8))
    return buf.view(name, shape)


def asarray(obj, device=None, copy=None):
    """`obj` as a Buffer on `device` (default: default_device()).

    A Buffer on that device is returned as is (copy=True: copied); an object
    with __dlpack__ (numpy, torch) is imported without copying where the
    device can address its memory; anything else goes through
    numpy.asarray first. copy=False raises accel.UnsupportedError instead of
    copying."""
    device = device if device is not None else default_device()
    if isinstance(obj, Buffer) and obj.device == device and not copy:
        return obj
    if not hasattr(obj, "__dlpack__"):
        import numpy
        obj = numpy.ascontiguousarray(obj)
    return from_dlpack(obj, device, copy=copy)


def _buffer_numpy(self):
    """A numpy array over this buffer's memory (zero copy; read-only
    buffers give read-only arrays)."""
    import numpy
    return numpy.from_dlpack(self)


Buffer.numpy = _buffer_numpy


def _device_load(self, path):
    """load(path) -> Executable: loads an .axe file for this device."""
    return Executable(self, path)


def _device_event(self):
    """event() -> Event"""
    return Event(self)


def _device_semaphore(self, value=0):
    """semaphore(value=0) -> Semaphore"""
    return Semaphore(self, value)


Device.load = _device_load
Device.event = _device_event
Device.semaphore = _device_semaphore
