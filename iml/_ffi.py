"""NumPy functions inside XLA programs on the CPU, called by name through XLA's FFI.

``jax.pure_callback`` ties a program to the Python function it calls, so JAX's persistent
compilation cache keeps no such program and every run compiles it again. A function registered
here (:func:`register`) is an XLA FFI target of a fixed name instead: a ctypes function pointer,
the handler, follows XLA's FFI C API (``xla/ffi/api/c_api.h``, shipped in ``jaxlib/include``),
turns the call's buffers into NumPy arrays and calls the function. A program refers to the
target by its name alone (:func:`call`), so it is kept in the cache like any other, and a later
process runs it once the same name is registered again (at import of the module that registers
it). A target's name therefore names its function's semantics: a function that changes what it
computes takes a new name.

The handler reads its arguments in place (the views live only during the call), writes the
function's result into the one output buffer (cast to its dtype), and answers XLA's query of
its API version. An exception raised by the function, or a result of another shape, becomes an
XLA error naming the target and the exception, which JAX raises where the program's result is
read.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import jax
import numpy as np

Array = jax.Array

__all__ = ["call", "register"]

# XLA FFI's C API (major version 0): the parts of the structs this module reads or writes.
_METADATA_EXTENSION = 1  # XLA_FFI_Extension_Metadata
_EXECUTE = 3  # XLA_FFI_ExecutionStage_EXECUTE
_INTERNAL = 13  # XLA_FFI_Error_Code_INTERNAL
_API_VERSION = (0, 1)  # the (major, minor) version of the API the handler follows
# XLA_FFI_DataType -> NumPy
_DTYPES = {1: np.bool_, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.uint8,
           7: np.uint16, 8: np.uint32, 9: np.uint64, 10: np.float16, 11: np.float32,
           12: np.float64}  # fmt: skip


class _Extension(ctypes.Structure):
    pass


_Extension._fields_ = [
    ("struct_size", ctypes.c_size_t),
    ("type", ctypes.c_int),
    ("next", ctypes.POINTER(_Extension)),
]


class _Version(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", ctypes.c_void_p),
        ("major_version", ctypes.c_int),
        ("minor_version", ctypes.c_int),
    ]


class _Metadata(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("api_version", _Version),
        ("traits", ctypes.c_uint32),
        ("state_type_id", ctypes.c_int64),
    ]


class _MetadataExtension(ctypes.Structure):
    _fields_ = [("extension_base", _Extension), ("metadata", ctypes.POINTER(_Metadata))]


class _Buffer(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("data", ctypes.c_void_p),
        ("rank", ctypes.c_int64),
        ("dims", ctypes.POINTER(ctypes.c_int64)),
    ]


class _List(ctypes.Structure):  # XLA_FFI_Args and XLA_FFI_Rets
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", ctypes.c_void_p),
        ("size", ctypes.c_int64),
        ("types", ctypes.c_void_p),
        ("items", ctypes.POINTER(ctypes.c_void_p)),
    ]


class _Attrs(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", ctypes.c_void_p),
        ("size", ctypes.c_int64),
        ("types", ctypes.c_void_p),
        ("names", ctypes.c_void_p),
        ("attrs", ctypes.c_void_p),
    ]


class _CallFrame(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", ctypes.POINTER(_Extension)),
        ("api", ctypes.c_void_p),
        ("ctx", ctypes.c_void_p),
        ("stage", ctypes.c_int),
        ("args", _List),
        ("rets", _List),
        ("attrs", _Attrs),
        ("future", ctypes.c_void_p),
    ]


class _ErrorCreateArgs(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", ctypes.c_void_p),
        ("message", ctypes.c_char_p),
        ("errc", ctypes.c_int),
    ]


_ERROR_CREATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_ErrorCreateArgs))


class _Api(ctypes.Structure):  # XLA_FFI_Api, up to its first function
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", ctypes.c_void_p),
        ("api_version", _Version),
        ("internal_api", ctypes.c_void_p),
        ("error_create", _ERROR_CREATE),
    ]


_HANDLER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_CallFrame))

# name -> (function, handler): the handlers must outlive every program that calls them.
_REGISTERED: dict[str, tuple[Callable[..., np.ndarray], object]] = {}


def _array(pointer: int) -> np.ndarray:
    """The buffer at ``pointer`` (an ``XLA_FFI_Buffer*``) as a NumPy array, in place."""
    buffer = ctypes.cast(pointer, ctypes.POINTER(_Buffer)).contents
    shape = tuple(int(buffer.dims[i]) for i in range(buffer.rank))
    dtype = np.dtype(_DTYPES[buffer.dtype])
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size == 0:
        return np.empty(shape, dtype)
    raw = (ctypes.c_char * size).from_address(buffer.data)
    return np.frombuffer(raw, dtype).reshape(shape)


def _error(frame: _CallFrame, message: str) -> int | None:
    api = ctypes.cast(frame.api, ctypes.POINTER(_Api)).contents
    args = _ErrorCreateArgs(ctypes.sizeof(_ErrorCreateArgs), None,
                            message.encode("utf-8", "replace"), _INTERNAL)  # fmt: skip
    return api.error_create(ctypes.byref(args))


def _handler(name: str, fn: Callable[..., np.ndarray]) -> object:
    def handle(pointer) -> int | None:
        frame = pointer.contents
        extension = frame.extension_start
        if extension and extension.contents.type == _METADATA_EXTENSION:
            metadata = ctypes.cast(extension, ctypes.POINTER(_MetadataExtension)).contents
            version = metadata.metadata.contents.api_version
            version.major_version, version.minor_version = _API_VERSION
            metadata.metadata.contents.traits = 0
            return None
        if frame.stage != _EXECUTE:
            return None
        try:
            args = [_array(frame.args.items[i]) for i in range(frame.args.size)]
            out = _array(frame.rets.items[0])
            result = np.asarray(fn(*args))
            if result.shape != out.shape:
                raise ValueError(f"returned shape {result.shape}; the program expects {out.shape}")
            out[...] = result
            return None
        except BaseException as error:  # it goes back to XLA as an error
            return _error(frame, f"host function {name!r}: {type(error).__name__}: {error}")

    return _HANDLER(handle)


def register(name: str, fn: Callable[..., np.ndarray]) -> str:
    """Register ``fn`` (NumPy arrays in, one array out) as the CPU's XLA FFI target ``name``,
    for :func:`call`; returns ``name``. ``fn`` reads its arguments during the call only.

    Raises:
      ValueError: if ``name`` is registered already with another function.
    """
    if name in _REGISTERED:
        if _REGISTERED[name][0] is not fn:
            raise ValueError(f"the host function {name!r} is registered already")
        return name
    handler = _handler(name, fn)
    capsule_new = ctypes.pythonapi.PyCapsule_New
    capsule_new.restype = ctypes.py_object
    capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = capsule_new(ctypes.cast(handler, ctypes.c_void_p).value, None, None)
    jax.ffi.register_ffi_target(name, capsule, platform="cpu")
    _REGISTERED[name] = (fn, handler)
    return name


def call(name: str, result: jax.ShapeDtypeStruct, *args: Array) -> Array:
    """The registered host function ``name`` of ``args`` in a program on the CPU, its output of
    ``result``'s shape and dtype. Under ``jax.vmap`` the function takes the batch at once, with
    a leading axis of one on an argument that is not batched.

    Raises:
      ValueError: for a name that is not registered.
    """
    if name not in _REGISTERED:
        raise ValueError(f"no host function is registered as {name!r}")
    return jax.ffi.ffi_call(name, result, vmap_method="expand_dims")(*args)
