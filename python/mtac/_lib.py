"""ctypes binding of libmtac's C API (include/mta.h): the structures and functions the torch op
uses. The library is the libmtac.so installed inside this package by `pip install ./python`.
ctypes releases the GIL during each call."""
import ctypes
import os

_c_int, _c_float, _p = ctypes.c_int, ctypes.c_float, ctypes.c_void_p


class Error(ValueError):
    """A call that mtac refuses: bad shapes, dtypes, devices, layouts or settings. The message is
    the library's own where the library found the problem."""


class ParamDesc(ctypes.Structure):
    """mta_param_desc: one entry of the library's table of the MTA steps' parameters."""
    _fields_ = [('name', ctypes.c_char_p), ('spec_step', _c_int), ('about', ctypes.c_char_p),
                ('shape', ctypes.c_char_p)]


class ConfigField(ctypes.Structure):
    """mta_config_field_desc: one field of mta_config (name, byte offset, kind)."""
    _fields_ = [('name', ctypes.c_char_p), ('offset', ctypes.c_size_t), ('kind', _c_int)]


# mta_config_field's kinds (MTA_FIELD_INT, MTA_FIELD_FLOAT) as ctypes types.
_FIELD_KINDS = {0: _c_int, 1: _c_float}


# The library's sizeof of each structure that this module mirrors (mta_abi_sizeof's MTA_ABI_*).
_ABI_CONFIG, _ABI_PARAMS, _ABI_GRADS = 0, 1, 2


def _param_names(lib):
    """The parameter names in mta.h's order (MTA_W_PRE ...), from the library's table."""
    names = []
    while True:
        d = lib.mta_param_info(len(names))
        if not d:
            return tuple(names)
        names.append(d.contents.name.decode())


def _symbol(lib, name):
    try:
        return getattr(lib, name)
    except AttributeError:
        raise ImportError('mtac: %s has no %s: it is older than this package; reinstall with pip install ./python'
                          % (lib._name, name)) from None


def _config_class(lib):
    """mta_config's ctypes copy, field for field from the library's own list (mta_config_field), so
    that a setting added to mta.h needs no edit here; each field's offset is checked against the
    library's (the size is checked with the other structures, check_abi)."""
    f = _symbol(lib, 'mta_config_field')
    f.restype, f.argtypes = ctypes.POINTER(ConfigField), [_c_int]
    rows = []
    while f(len(rows)):
        rows.append(f(len(rows)).contents)
    if any(r.kind not in _FIELD_KINDS for r in rows):
        raise ImportError('mtac: %s describes an mta_config field of a kind this package does not know; reinstall '
                          'with pip install ./python' % lib._name)
    cls = type('Config', (ctypes.Structure,), {
        '__doc__': 'mta_config (include/mta.h), field for field from the library (mta_config_field).',
        '_fields_': [(r.name.decode(), _FIELD_KINDS[r.kind]) for r in rows]})
    for r in rows:
        if getattr(cls, r.name.decode()).offset != r.offset:
            raise ImportError('mtac: mta_config.%s is at byte %d in %s but at %d in its ctypes copy; reinstall with '
                              'pip install ./python' % (r.name.decode(), r.offset, lib._name,
                                                        getattr(cls, r.name.decode()).offset))
    return cls


def _open():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'libmtac.so')
    if not os.path.exists(path):
        raise ImportError('mtac: %s is missing; install the package with pip install ./python' % path)
    return ctypes.CDLL(path)


def _bind(lib):
    sig = {
        'mta_config_default': (Config, [_c_int, _c_int, _c_int, _c_int]),
        'mta_config_check': (_c_int, [ctypes.POINTER(Config), ctypes.c_char_p, ctypes.c_size_t]),
        'mta_create': (_c_int, [ctypes.POINTER(_p), ctypes.POINTER(Config), ctypes.c_char_p, ctypes.c_size_t]),
        'mta_destroy': (None, [_p]),
        'mta_set_dropout': (None, [_p, _c_int, ctypes.c_uint64]),
        'mta_set_deterministic': (None, [_p, _c_int]),
        'mta_ctx_record_launches': (_c_int, [_p, _c_int]),
        'mta_ctx_launch': (ctypes.c_char_p, [_p, _c_int, ctypes.POINTER(_c_int)]),
        'mta_set_documents': (_c_int, [_p, _p]),
        'mta_set_stream': (None, [_p, _p]),
        'mta_ctx_error': (ctypes.c_char_p, [_p]),
        'mta_ctx_workspace_bytes': (ctypes.c_size_t, [_p]),
        'mta_backend_from_name': (_c_int, [ctypes.c_char_p, ctypes.POINTER(_c_int)]),
        'mta_backend_name': (ctypes.c_char_p, [_c_int]),
        'mta_backend_available': (_c_int, [_c_int]),
        'mta_backend_device_memory': (_c_int, [_c_int]),
        'mta_param_info': (ctypes.POINTER(ParamDesc), [_c_int]),
        'mta_param_shape': (_c_int, [ctypes.POINTER(Config), _c_int, ctypes.POINTER(ctypes.c_int64)]),
        'mta_abi_sizeof': (ctypes.c_size_t, [_c_int]),
        'mta_config_from_shapes': (_c_int, [ctypes.POINTER(Config), ctypes.POINTER(_c_int),
                                            ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)), ctypes.c_char_p,
                                            ctypes.c_size_t]),
    }
    for name, (res, args) in sig.items():
        f = _symbol(lib, name)
        f.restype, f.argtypes = res, args
    return lib


lib = _open()
Config = _config_class(lib)
_bind(lib)
PARAM_NAMES = _param_names(lib)
# mta_dtype (include/mta.h): the storage of q, k, v, out and their gradients (mta_config.dtype).
MTA_DTYPE_F32, MTA_DTYPE_BF16 = 0, 1


class Params(ctypes.Structure):
    """mta_params: const float pointers, NULL for a step that is off."""
    _fields_ = [(n, _p) for n in PARAM_NAMES]


class Grads(ctypes.Structure):
    """mta_grads: float pointers, NULL skips a gradient."""
    _fields_ = [(n, _p) for n in PARAM_NAMES]


lib.mta_forward.restype = lib.mta_backward.restype = _c_int
lib.mta_forward.argtypes = [_p, _p, _p, _p, ctypes.POINTER(Params), _p]
lib.mta_backward.argtypes = [_p, _p, _p, _p, ctypes.POINTER(Params), _p, _p, _p, _p, ctypes.POINTER(Grads)]


def check_abi():
    """Raises ImportError when a ctypes structure here differs in size from the library's own (a
    libmtac built from another mta.h): the calls would read and write the wrong memory."""
    for which, cls, cname in ((_ABI_CONFIG, Config, 'mta_config'), (_ABI_PARAMS, Params, 'mta_params'),
                              (_ABI_GRADS, Grads, 'mta_grads')):
        theirs, ours = lib.mta_abi_sizeof(which), ctypes.sizeof(cls)
        if theirs != ours:
            raise ImportError('mtac: libmtac\'s %s is %d bytes but this package\'s ctypes copy (%s) is %d: the '
                              'library and the package come from different versions of include/mta.h; reinstall '
                              'with pip install ./python' % (cname, theirs, cls.__name__, ours))


check_abi()


def param_shape(cfg, i):
    """The shape of parameter i (PARAM_NAMES[i]) under cfg (mta_param_shape); None when its step is off."""
    s = (ctypes.c_int64 * 3)()
    n = lib.mta_param_shape(ctypes.byref(cfg), i, s)
    return tuple(s[:n]) if n else None


def config_from_shapes(cfg, shapes):
    """Sets cfg's step settings from the shapes of the parameters given (shapes[i]: PARAM_NAMES[i]'s
    shape, None when not given) with the library's table (mta_config_from_shapes: each tensor switches
    its step on, its shape sets the step's sizes, a step's tensors come together); raises Error with
    the library's message. The caller then checks the config and each shape (param_shape)."""
    n = len(PARAM_NAMES)
    ndim, ptrs, keep = (_c_int * n)(), (ctypes.POINTER(ctypes.c_int64) * n)(), []
    for i, s in enumerate(shapes):
        ndim[i] = -1
        if s is not None:
            a = (ctypes.c_int64 * max(len(s), 1))(*s)
            keep.append(a)
            ndim[i], ptrs[i] = len(s), ctypes.cast(a, ctypes.POINTER(ctypes.c_int64))
    msg = ctypes.create_string_buffer(256)
    if lib.mta_config_from_shapes(ctypes.byref(cfg), ndim, ptrs, msg, len(msg)) != 0:
        raise Error('mtac: ' + msg.value.decode(errors='replace'))


def host_backends():
    """The names of the library's backends of host memory, the ones this package runs, in id order
    (the library's table: mta_backend_name until it says 'unknown')."""
    names, i = [], 0
    while lib.mta_backend_name(i) != b'unknown':
        if not lib.mta_backend_device_memory(i):
            names.append(lib.mta_backend_name(i).decode())
        i += 1
    return names


def backend_of(name):
    """The mta_backend of a name ('fused', 'reference') for CPU tensors; None gives the library's
    default. A backend of device memory (cuda, cuda-emu) is refused: the tensors are host memory."""
    if name is None:
        return lib.mta_config_default(1, 1, 1, 1).backend
    b = _c_int()
    if not isinstance(name, str) or lib.mta_backend_from_name(name.encode(), ctypes.byref(b)) != 0:
        raise Error('mtac: unknown backend %r (%s)' % (name, ', '.join(host_backends())))
    if lib.mta_backend_device_memory(b.value):
        raise Error('mtac: the %s backend takes device pointers: its calls are made for tensors on a CUDA device '
                    '(backend=None there); CPU tensors run on the host backends (%s)'
                    % (name, ', '.join(host_backends())))
    if not lib.mta_backend_available(b.value):
        raise Error('mtac: backend %r cannot run on this machine' % name)
    return b.value


class Context:
    """One mta_ctx: owns the workspace a forward saves for its backward. Freed with the object."""

    def __init__(self, cfg):
        msg = ctypes.create_string_buffer(256)
        h = _p()
        if lib.mta_create(ctypes.byref(h), ctypes.byref(cfg), msg, len(msg)) != 0:
            raise Error('mtac: ' + msg.value.decode(errors='replace'))
        self.h = h

    def check(self, status, what):
        if status != 0:
            raise Error('mtac: %s: %s' % (what, lib.mta_ctx_error(self.h).decode(errors='replace')))

    def __del__(self):
        h, self.h = getattr(self, 'h', None), None
        if h and lib is not None:
            lib.mta_destroy(h)


def check_config(cfg):
    """Raises Error with the library's message when mta_config_check refuses cfg."""
    msg = ctypes.create_string_buffer(256)
    if lib.mta_config_check(ctypes.byref(cfg), msg, len(msg)) != 0:
        raise Error('mtac: ' + msg.value.decode(errors='replace'))
