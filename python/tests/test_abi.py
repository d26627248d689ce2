"""The package's ctypes copies of mta.h's structures against the library it loads: the sizes the
library reports (mta_abi_sizeof), checked at import, and the parameter table (mta_param_info)."""
import ctypes

import pytest

from mtac import _lib
from mta_ref import PARAM_NAMES as REF_PARAM_NAMES


def test_structure_sizes_match_the_library():
    for which, cls in ((_lib._ABI_CONFIG, _lib.Config), (_lib._ABI_PARAMS, _lib.Params),
                       (_lib._ABI_GRADS, _lib.Grads)):
        assert _lib.lib.mta_abi_sizeof(which) == ctypes.sizeof(cls)
    assert _lib.lib.mta_abi_sizeof(1000) == 0
    _lib.check_abi()  # what the import ran


def test_a_size_mismatch_is_refused(monkeypatch):
    class Short(ctypes.Structure):
        _fields_ = [('B', ctypes.c_int)]

    monkeypatch.setattr(_lib, 'Config', Short)
    with pytest.raises(ImportError, match='mta_config is .* bytes but .*Short.* reinstall'):
        _lib.check_abi()


def test_parameter_table():
    assert _lib.PARAM_NAMES == tuple(REF_PARAM_NAMES)
    assert [f[0] for f in _lib.Params._fields_] == list(_lib.PARAM_NAMES)
    steps = [_lib.lib.mta_param_info(i).contents.spec_step for i in range(len(_lib.PARAM_NAMES))]
    assert steps == [2, 3, 5, 6, 8, 9, 9]
    assert not _lib.lib.mta_param_info(len(_lib.PARAM_NAMES))
    assert not _lib.lib.mta_param_info(-1)
    cfg = _lib.lib.mta_config_default(2, 4, 8, 6)
    assert all(_lib.param_shape(cfg, i) is None for i in range(len(_lib.PARAM_NAMES)))
    cfg.pre_cq, cfg.pre_ck, cfg.post_ch, cfg.gate = 3, 5, 2, 1
    assert [_lib.param_shape(cfg, i) for i in range(len(_lib.PARAM_NAMES))] == [
        (4, 3, 5), None, None, (2, 2, 2), None, (6,), (1,)]


def test_config_and_shapes_from_the_library():
    """Config is built from the library's list of mta_config's fields, and the settings that the
    parameters' shapes give come from the library's table (mta_config_from_shapes)."""
    names = [f[0] for f in _lib.Config._fields_]
    assert names[:4] == ['B', 'H', 'T', 'd'] and names[-1] == 'dtype' and len(set(names)) == len(names)
    assert dict(_lib.Config._fields_)['dropout'] is ctypes.c_float
    cfg = _lib.lib.mta_config_default(2, 4, 8, 6)
    _lib.config_from_shapes(cfg, [(4, 3, 5), None, None, (2, 2, 2), None, (6,), (1,)])
    assert (cfg.pre_cq, cfg.pre_ck, cfg.pre_head_mix, cfg.post_ch, cfg.group_norm, cfg.gate) == (3, 5, 0, 2, 0, 1)
    with pytest.raises(_lib.Error, match='gate_w and gate_b go together'):
        _lib.config_from_shapes(_lib.lib.mta_config_default(2, 4, 8, 6), [None] * 5 + [(6,), None])
    with pytest.raises(_lib.Error, match=r"tensor 'w_pre' has shape \(4,3\), expected \(H, c_q, c_k\)"):
        _lib.config_from_shapes(_lib.lib.mta_config_default(2, 4, 8, 6), [(4, 3)] + [None] * 6)


def test_op_keywords_are_the_table():
    """mta_attention takes the table's parameters as keywords (its signature lists them) and refuses
    other names as Python refuses an unknown keyword."""
    import inspect
    import torch
    from mtac.torch import mta_attention
    sig = inspect.signature(mta_attention)
    assert list(sig.parameters)[:3 + len(_lib.PARAM_NAMES)] == ['q', 'k', 'v', *_lib.PARAM_NAMES]
    assert all(sig.parameters[n].default is None for n in _lib.PARAM_NAMES)
    assert sig.parameters['layer_id'].default == 0
    q = torch.randn(1, 2, 5, 4)
    with pytest.raises(TypeError, match="unexpected keyword argument 'w_nothing'"):
        mta_attention(q, q, q, w_nothing=torch.zeros(1))
