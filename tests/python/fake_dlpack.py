"""Host memory that says over DLPack that it lives elsewhere (a CUDA device by default): what a
torch CUDA tensor looks like to the binding, made without a GPU, so that the binding's checks of
device arrays run on the CPU. Nothing that trusts the claim may read the memory: the core asks the
CUDA driver about every pointer before it copies one."""

import ctypes

import numpy as np

KDL_CPU, KDL_CUDA, KDL_ROCM = 1, 2, 10


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _ManagedTensor(ctypes.Structure):  # DLManagedTensor (unversioned); no deleter
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

# DLPack dtype codes of the NumPy kinds used here (ml_dtypes' bfloat16 is DLPack's bfloat).
_CODES = {"i": 0, "u": 1, "f": 2, "c": 5}


class FakeDeviceArray:
    """`array`'s memory as a DLPack tensor on (`device_type`, `device_id`); `shape` and `strides`
    (in elements) describe another view of the same memory; `null_data`: a NULL data pointer, as
    torch and CuPy give an empty device array."""

    def __init__(self, array, device_id=0, device_type=KDL_CUDA, shape=None, strides=None,
                 null_data=False):
        self.array = np.ascontiguousarray(array)
        self.shape = tuple(shape or self.array.shape)
        code = 4 if self.array.dtype.name == "bfloat16" else _CODES[self.array.dtype.kind]
        ndim = len(self.shape)
        self._shape = (ctypes.c_int64 * ndim)(*self.shape)
        self._strides = (ctypes.c_int64 * ndim)(*strides) if strides else None
        t = _Tensor(None if null_data else self.array.ctypes.data, _Device(device_type, device_id),
                    ndim,
                    _DataType(code, self.array.dtype.itemsize * 8, 1),
                    ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64)),
                    ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
                    if self._strides else None, 0)
        self._managed = _ManagedTensor(t, None, None)
        self.dlpack_calls = []  # the keyword arguments of each __dlpack__ call, in order

    def __dlpack__(self, **kwargs):
        self.dlpack_calls.append(kwargs)
        return _capsule_new(ctypes.addressof(self._managed), b"dltensor", None)

    def __dlpack_device__(self):
        device = self._managed.dl_tensor.device
        return (device.device_type, device.device_id)
