"""tpgemm's exceptions: one class per tpgemm::ErrorCode, each also the builtin that fits it, so
callers can catch ValueError or TimeoutError as they would for any library."""


class Error(Exception):
    """Base of every tpgemm error. `code` names the tpgemm::ErrorCode (e.g. "InvalidArgument")."""

    code = "Internal"


class InvalidArgument(Error, ValueError):
    """A value the caller passed is out of range, of the wrong type, device or shape, or
    differs across ranks."""

    code = "InvalidArgument"


class Unsupported(Error, NotImplementedError):
    """Valid, but this implementation, dtype, layout or topology cannot run it."""

    code = "Unsupported"


class CudaError(Error, RuntimeError):
    code = "CudaError"


class NcclError(Error, RuntimeError):
    code = "NcclError"


class Timeout(Error, TimeoutError):
    """A bounded wait for a peer ran out; the message says who waited on whom."""

    code = "Timeout"


class PeerFailure(Error, RuntimeError):
    """Another rank rejected the same collective call; this rank stops too."""

    code = "PeerFailure"


class InternalError(Error, RuntimeError):
    """A broken invariant inside tpgemm: a bug, please report it."""

    code = "Internal"


_BY_NAME = {c.code: c for c in (InvalidArgument, Unsupported, CudaError, NcclError, Timeout, PeerFailure, InternalError)}


def install(c_module):
    """Tells the C++ module which class to raise for each error code."""
    c_module._set_error_classes({code: _BY_NAME[name] for code, name in c_module.error_codes().items() if name in _BY_NAME})
