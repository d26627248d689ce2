"""The device path of mtac.torch: CUDA tensors run on libmtac's CUDA backend (include/mta.h: device
pointers, the context's stream, mta_set_stream) on torch's current stream, with no copies, from
contexts kept per device and config and reused. emulate() (tests only) sends CPU tensors down the
same path on the cuda-emu backend, whose device memory is host memory, so that CI without a GPU
runs the code that passes CUDA tensors' pointers (docs/python.md, "CUDA tensors")."""
import contextlib
import ctypes
import threading

import torch

from mtac._lib import Context, lib

# None: CPU tensors take the host backends; an int: they take the device path on cuda-emu, with
# that number as torch's "current stream" (the emulator runs every stream in call order and never
# reads the handle, so a test can tell which stream each call was given).
_emulated_stream = None


@contextlib.contextmanager
def emulate(stream=0):
    """Testing: within the block, CPU tensors run on the cuda-emu backend through the device path
    (the pointers, stream, context cache and bfloat16 handling of CUDA tensors); stream stands for
    torch's current stream. Needs a libmtac built with -DMTAC_CUDA_EMU=ON."""
    global _emulated_stream
    before, _emulated_stream = _emulated_stream, int(stream)
    try:
        yield
    finally:
        _emulated_stream = before


def _backend_id(name):
    b = ctypes.c_int()
    if lib.mta_backend_from_name(name.encode(), ctypes.byref(b)) != 0:
        raise ImportError('mtac: libmtac has no backend named %r' % name)
    return b.value


class Place:
    """Where a call on device tensors runs: the device, the backend's name and id, and whether it is
    the emulator's stand-in for a GPU."""

    def __init__(self, device, emulated):
        self.device, self.emulated = device, emulated
        self.name = 'cuda-emu' if emulated else 'cuda'
        self.backend = _backend_id(self.name)

    def stream(self):
        """The handle of torch's current stream on the device (the call's and its backward's)."""
        if self.emulated:
            return _emulated_stream
        return torch.cuda.current_stream(self.device).cuda_stream

    def guard(self):
        """The tensors' device made current for the library's calls: the CUDA runtime allocates a
        context's workspace and launches its kernels on the current device."""
        return contextlib.nullcontext() if self.emulated else torch.cuda.device(self.device)


def place_of(q):
    """The Place of a call whose q is q; None for the host path (CPU tensors, not emulated)."""
    if isinstance(q, torch.Tensor):
        if q.device.type == 'cuda':
            return Place(q.device, False)
        if q.device.type == 'cpu' and _emulated_stream is not None:
            return Place(q.device, True)
    return None


def set_stream(h, stream):
    """mta_set_stream: the stream that the context's next calls enqueue their work on."""
    lib.mta_set_stream(h, stream or None)


# The contexts not in use, per (device, config bytes). A forward takes one (or makes one) and holds
# it until its backward has run, or until autograd frees the graph without one: the context keeps
# what the backward reads (softmax statistics, document starts), so two forwards whose backwards are
# still to come (two layers of one config) need two. Reuse keeps each context's workspace allocated
# on the device instead of a cudaMalloc and a cudaFree per call.
_free = {}
_lock = threading.Lock()


class Lease:
    """A context of the cache, returned to it by release() or when the lease is freed."""

    def __init__(self, place, cfg):
        self.key = (str(place.device), bytes(cfg))
        with _lock:
            spare = _free.get(self.key)
            self.mctx = spare.pop() if spare else None
        if self.mctx is None:
            self.mctx = Context(cfg)

    def release(self):
        mctx, self.mctx = getattr(self, 'mctx', None), None
        if mctx is not None and _lock is not None:
            with _lock:
                _free.setdefault(self.key, []).append(mctx)

    __del__ = release


def cached_contexts():
    """Testing: the number of free contexts in the cache, per (device, config bytes)."""
    with _lock:
        return {k: len(v) for k, v in _free.items()}


def clear_cache():
    """Frees the cached contexts not in use (their device workspaces)."""
    with _lock:
        _free.clear()
