"""ctypes binding of libmtac's C API (include/mta.h): the structures and functions the torch op
uses. The library is the libmtac.so installed inside this package by `pip install ./python`.
ctypes releases the GIL during each call."""
import ctypes
import os

_c_int, _c_float, _p = ctypes.c_int, ctypes.c_float, ctypes.c_void_p


class Error(ValueError):
    """A call that mtac refuses: bad shapes, dtypes, devices, layouts or settings. The message is
    the library's own where the library found the problem."""


class Config(ctypes.Structure):
    """mta_config (include/mta.h), field for field."""
    _fields_ = [('B', _c_int), ('H', _c_int), ('T', _c_int), ('d', _c_int),
                ('pre_cq', _c_int), ('pre_ck', _c_int), ('pre_head_mix', _c_int),
                ('post_cq', _c_int), ('post_ck', _c_int), ('post_ch', _c_int),
                ('group_norm', _c_int), ('depth_scale', _c_int), ('layer_id', _c_int), ('gate', _c_int),
                ('dropout', _c_float), ('backend', _c_int), ('strip_rows', _c_int), ('threads', _c_int),
                ('keep_o', _c_int)]


class ParamDesc(ctypes.Structure):
    """mta_param_desc: one entry of the library's table of the MTA steps' parameters."""
    _fields_ = [('name', ctypes.c_char_p), ('spec_step', _c_int), ('about', ctypes.c_char_p)]


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


def _load():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'libmtac.so')
    if not os.path.exists(path):
        raise ImportError('mtac: %s is missing; install the package with pip install ./python' % path)
    lib = ctypes.CDLL(path)
    sig = {
        'mta_config_default': (Config, [_c_int, _c_int, _c_int, _c_int]),
        'mta_config_check': (_c_int, [ctypes.POINTER(Config), ctypes.c_char_p, ctypes.c_size_t]),
        'mta_create': (_c_int, [ctypes.POINTER(_p), ctypes.POINTER(Config), ctypes.c_char_p, ctypes.c_size_t]),
        'mta_destroy': (None, [_p]),
        'mta_set_dropout': (None, [_p, _c_int, ctypes.c_uint64]),
        'mta_ctx_error': (ctypes.c_char_p, [_p]),
        'mta_ctx_workspace_bytes': (ctypes.c_size_t, [_p]),
        'mta_backend_from_name': (_c_int, [ctypes.c_char_p, ctypes.POINTER(_c_int)]),
        'mta_backend_name': (ctypes.c_char_p, [_c_int]),
        'mta_backend_available': (_c_int, [_c_int]),
        'mta_backend_device_memory': (_c_int, [_c_int]),
        'mta_param_info': (ctypes.POINTER(ParamDesc), [_c_int]),
        'mta_param_shape': (_c_int, [ctypes.POINTER(Config), _c_int, ctypes.POINTER(ctypes.c_int64)]),
        'mta_abi_sizeof': (ctypes.c_size_t, [_c_int]),
    }
    for name, (res, args) in sig.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            raise ImportError('mtac: %s has no %s: it is older than this package; reinstall with pip install ./python'
                              % (path, name)) from None
        f.restype, f.argtypes = res, args
    return lib


lib = _load()
PARAM_NAMES = _param_names(lib)


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


def backend_of(name):
    """The mta_backend of a name ('fused', 'reference'); None gives the library's default. A backend of
    device memory (cuda, cuda-emu) is refused: the op passes host tensors."""
    if name is None:
        return lib.mta_config_default(1, 1, 1, 1).backend
    b = _c_int()
    if not isinstance(name, str) or lib.mta_backend_from_name(name.encode(), ctypes.byref(b)) != 0:
        raise Error('mtac: unknown backend %r (fused, reference)' % (name,))
    if lib.mta_backend_device_memory(b.value):
        raise Error('mtac: the Python package runs the backends of host memory (fused, reference); '
                    'the %s backend takes device pointers through the C API (include/mta.h)' % name)
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
