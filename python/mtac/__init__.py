"""mtac: Multi-Token Attention (Golovneva et al. 2025) on mtac's C operator.

    import mtac.torch
    out = mtac.torch.mta_attention(q, k, v, w_pre=w)      # an autograd op over mta_forward/backward
    core = mtac.torch.MultiTokenAttention(n_heads, head_dim, query_kernel_size=6, key_kernel_size=11)

`mtac.Error` is raised for inputs the operator refuses. The library is libmtac.so, built from
this repository and installed inside this package (pip install ./python)."""
from mtac._lib import Error

__version__ = '0.1.0'
__all__ = ['Error', '__version__']
