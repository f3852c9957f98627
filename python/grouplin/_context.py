"""Library contexts: one per backend device, made on first use and kept for the process.

CPU arrays and tensors run on one shared CPU context.  CUDA tensors run on a context per device
that borrows torch's current stream (re-pointed before every call with gln_context_set_stream)
and takes its scratch from torch's caching allocator through the allocator callbacks, so the
library's memory shows up in torch.cuda.memory_allocated() and is stream-ordered like torch's.
"""
import ctypes as C
import threading

from . import _lib

_lock = threading.Lock()
_contexts = {}


class Context:
    """A gln_context_t.  `handle` is the pointer; `on_current_stream()` readies it for a call."""

    def __init__(self, backend, device=0):
        L = _lib.lib()
        opts = _lib.ContextOptions()
        opts.size = C.sizeof(_lib.ContextOptions)
        opts.backend = backend
        opts.device = device
        self.backend = backend
        self.device = device
        self._callbacks = None
        self.allocs = 0               # scratch blocks taken from torch's caching allocator
        if backend == _lib.BACKEND_CUDA:
            import torch
            opts.stream = C.c_void_p(_stream_handle(torch.cuda.current_stream(device)))
            self._callbacks = _torch_allocator(device, self)
            opts.alloc, opts.free = self._callbacks
        handle = C.c_void_p()
        _lib.check(L.gln_context_create(C.byref(opts), C.byref(handle)), "gln_context_create")
        self.handle = handle
        self._stream = opts.stream or None

    def on_current_stream(self):
        """CUDA: follow torch.cuda.current_stream() (a no-op when it has not changed)."""
        if self.backend != _lib.BACKEND_CUDA:
            return self.handle
        s = _current_raw_stream(self.device) or _CUDA_STREAM_LEGACY
        if s != self._stream:
            _lib.check(_lib.lib().gln_context_set_stream(self.handle, C.c_void_p(s)), "gln_context_set_stream")
            self._stream = s
        return self.handle


# torch reports its default stream as handle 0, the legacy default stream; for the library NULL
# means "make and own a stream", which would not be ordered with torch's work: pass
# cudaStreamLegacy, ((cudaStream_t)0x1), instead.
_CUDA_STREAM_LEGACY = 1


def _stream_handle(torch_stream):
    return torch_stream.cuda_stream or _CUDA_STREAM_LEGACY


def _current_raw_stream(device):
    """torch.cuda.current_stream(device).cuda_stream without making a Stream object per call
    (the private accessor torch.compile's generated code uses, when this torch has it)."""
    import torch
    global _current_raw_stream
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        def raw(dev):
            return torch.cuda.current_stream(dev).cuda_stream
    _current_raw_stream = raw
    return raw(device)


def _torch_allocator(device, owner):
    """ctypes callbacks over torch's caching allocator (kept alive by the context).  The library
    calls them on the caller's thread inside its calls, so torch's current device is normally
    the context's: then no device guard is needed (torch.cuda.caching_allocator_alloc sets
    one, twice the cost of the allocation itself)."""
    import torch
    raw_alloc = torch._C._cuda_cudaCachingAllocator_raw_alloc
    raw_delete = torch._C._cuda_cudaCachingAllocator_raw_delete
    current_device = torch._C._cuda_getDevice

    def alloc(nbytes, stream, user):
        owner.allocs += 1
        try:
            # torch's own name for the legacy default stream is 0
            s = 0 if stream in (None, _CUDA_STREAM_LEGACY) else stream
            if current_device() == device:
                return raw_alloc(max(int(nbytes), 1), s)
            with torch.cuda.device(device):
                return raw_alloc(max(int(nbytes), 1), s)
        except Exception:  # no exception may cross into C: NULL is the allocator's failure
            return None

    def free(ptr, stream, user):
        try:
            if ptr:
                raw_delete(ptr)
        except Exception:
            pass

    return _lib.ALLOC_FN(alloc), _lib.FREE_FN(free)


def cpu():
    return get(("cpu", 0))


def get(device):
    """The context for ("cpu", 0) or ("cuda", index)."""
    with _lock:
        ctx = _contexts.get(device)
        if ctx is None:
            kind, index = device
            if kind == "cpu":
                ctx = Context(_lib.BACKEND_CPU)
            elif kind == "cuda":
                if not _lib.lib().gln_backend_available(_lib.BACKEND_CUDA):
                    raise _lib.NotSupportedError(
                        "grouplin: CUDA tensors need a library built with the CUDA backend on a machine "
                        "with a GPU (GROUPLIN_CUDA=ON pip install ., or GROUPLIN_LIBRARY=<CUDA build>)")
                ctx = Context(_lib.BACKEND_CUDA, index)
            else:
                raise ValueError("grouplin: device %r: only cpu and cuda are supported" % (kind,))
            _contexts[device] = ctx
        return ctx
