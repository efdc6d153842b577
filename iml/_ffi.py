"""NumPy functions inside XLA programs on the CPU, called by name through XLA's FFI.

``jax.pure_callback`` ties a program to the Python function it calls, so JAX's persistent
compilation cache keeps no such program and every run compiles it again. A function registered
here (:func:`register`) is an XLA FFI target of a fixed name instead: a ctypes function pointer,
the handler, follows XLA's FFI C API (``xla/ffi/api/c_api.h``, shipped in ``jaxlib/include``),
turns the call's buffers into NumPy arrays and calls the function registered under that name.
A program refers to the target by its name alone (:func:`call`), so it is kept in the cache like
any other, and a later process runs it once the same name is registered again (at import of the
module that registers it, which tracing the program's call needs).

The handler passes its arguments as read-only views (they live only during the call), copies the
function's result into the one output buffer (a cast of the same kind, such as int64 to int32),
and answers XLA's query of its API version with the version of the header jaxlib ships. Anything
raised in the handler, or a result of another shape, becomes an XLA error naming the target and
the exception, which JAX raises where the program's result is read; it is never a silent result.
Where XLA refuses the registration, :func:`registered` says so and callers take another path.
"""

from __future__ import annotations

import ctypes
import logging
import re
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

Array = jax.Array

__all__ = ["call", "register", "registered"]

log = logging.getLogger(__name__)

# XLA FFI's C API (major version 0): the parts of the structs this module reads or writes.
_METADATA_EXTENSION = 1  # XLA_FFI_Extension_Metadata
_EXECUTE = 3  # XLA_FFI_ExecutionStage_EXECUTE
_INTERNAL = 13  # XLA_FFI_Error_Code_INTERNAL


def _api_version() -> tuple[int, int]:
    """The (major, minor) version of the FFI API in the header jaxlib ships (that of the XLA it
    was built with); (0, 1), the oldest version of this API, where the header is missing."""
    try:
        text = (Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api" / "c_api.h").read_text()
        major = re.search(r"#define XLA_FFI_API_MAJOR (\d+)", text)
        minor = re.search(r"#define XLA_FFI_API_MINOR (\d+)", text)
        if major and minor and int(major.group(1)) == 0:
            return 0, int(minor.group(1))
    except (OSError, AttributeError):
        pass
    return 0, 1


_API_VERSION = _api_version()
# XLA_FFI_DataType -> NumPy
_DTYPES = {1: np.bool_, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.uint8,
           7: np.uint16, 8: np.uint32, 9: np.uint64, 10: np.float16, 11: np.float32,
           12: np.float64}  # fmt: skip
_NUMPY_DTYPES = {np.dtype(t) for t in _DTYPES.values()}


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

# name -> the function its handler calls (the last registered under the name)
_FUNCTIONS: dict[str, Callable[..., np.ndarray]] = {}
# name -> its handler, which must outlive every program that calls it; None where XLA refused it
_HANDLERS: dict[str, object | None] = {}


def _array(pointer: int, writeable: bool) -> np.ndarray:
    """The buffer at ``pointer`` (an ``XLA_FFI_Buffer*``) as a NumPy array, in place."""
    buffer = ctypes.cast(pointer, ctypes.POINTER(_Buffer)).contents
    shape = tuple(int(buffer.dims[i]) for i in range(buffer.rank))
    dtype = np.dtype(_DTYPES[buffer.dtype])
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size == 0:
        return np.empty(shape, dtype)
    raw = (ctypes.c_char * size).from_address(buffer.data)
    array = np.frombuffer(raw, dtype).reshape(shape)
    array.flags.writeable = writeable
    return array


def _error(frame: _CallFrame, message: str) -> int | None:
    api = ctypes.cast(frame.api, ctypes.POINTER(_Api)).contents
    args = _ErrorCreateArgs(ctypes.sizeof(_ErrorCreateArgs), None,
                            message.encode("utf-8", "replace"), _INTERNAL)  # fmt: skip
    return api.error_create(ctypes.byref(args))


def _handle(name: str, frame: _CallFrame) -> None:
    """Answer XLA's version query, or run ``name``'s function on the call's buffers."""
    extension = frame.extension_start
    if extension and extension.contents.type == _METADATA_EXTENSION:
        metadata = ctypes.cast(extension, ctypes.POINTER(_MetadataExtension)).contents
        version = metadata.metadata.contents.api_version
        version.major_version, version.minor_version = _API_VERSION
        metadata.metadata.contents.traits = 0
        return
    if frame.stage != _EXECUTE:
        return
    args = [_array(frame.args.items[i], False) for i in range(frame.args.size)]
    out = _array(frame.rets.items[0], True)
    result = np.asarray(_FUNCTIONS[name](*args))
    if result.shape != out.shape:
        raise ValueError(f"returned shape {result.shape}; the program expects {out.shape}")
    np.copyto(out, result, casting="same_kind")


def _handler(name: str) -> object:
    def handle(pointer) -> int | None:
        frame = pointer.contents
        try:
            _handle(name, frame)
            return None
        except BaseException as error:  # it goes back to XLA as an error
            try:
                message = f"host function {name!r}: {type(error).__name__}: {error}"
            except BaseException:
                message = f"host function {name!r} failed"
            return _error(frame, message)

    return _HANDLER(handle)


def register(name: str, fn: Callable[..., np.ndarray]) -> str:
    """Register ``fn`` (NumPy arrays in, one array out) as the CPU's XLA FFI target ``name``,
    for :func:`call`; returns ``name``. ``fn`` reads its arguments during the call only, and
    may not write them. Registering a name again (a module reloaded) replaces its function in
    the programs that call it; XLA keeps the one handler. Where XLA refuses the handler, the
    refusal is logged and :func:`registered` is False for the name."""
    _FUNCTIONS[name] = fn
    if name in _HANDLERS:
        return name
    handler = _handler(name)
    try:
        pointer = ctypes.cast(handler, ctypes.c_void_p).value
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(pointer), platform="cpu")
    except Exception as error:  # an XLA that refuses the handler: callers take their own path
        log.warning("XLA refused the host function %r (%s); its callers use XLA's own code",
                    name, error)  # fmt: skip
        handler = None
    _HANDLERS[name] = handler
    return name


def registered(name: str) -> bool:
    """Whether ``name`` is a host function XLA accepted (:func:`register`)."""
    return _HANDLERS.get(name) is not None


def call(name: str, result: jax.ShapeDtypeStruct, *args: Array) -> Array:
    """The registered host function ``name`` of ``args`` in a program on the CPU, its output of
    ``result``'s shape and dtype. Under ``jax.vmap`` the function takes the batch at once, with
    a leading axis of one on an argument that is not batched.

    Raises:
      ValueError: for a name XLA did not accept (:func:`registered`), or an argument or result
        of a dtype the handler does not read (bool, integers, float16/32/64).
    """
    if not registered(name):
        raise ValueError(f"no host function is registered as {name!r}")
    for what, dtype in [("result", result.dtype)] + [("argument", a.dtype) for a in args]:
        if np.dtype(dtype) not in _NUMPY_DTYPES:
            raise ValueError(f"host function {name!r}: an {what} of dtype {dtype} is not read")
    return jax.ffi.ffi_call(name, result, vmap_method="expand_dims")(*args)
