"""The operator table holds every operator models need (the list users asked for).

A name here that is missing from the table fails; so does an ``ae.`` op
that is not in the table (every public operator is tested from it).
"""

from __future__ import annotations

import pytest

import aengine as ae
from aengine.ops._table import TABLE

_TOP = """
abs add amax amin broadcast_to cat chunk clamp clone cos div dot eq exp expand expm1 flatten
gather ge gt index_select le log log1p log_softmax logical_and logical_not logical_or logsumexp
lt masked_fill matmul max maximum mean min minimum mm mul narrow ne neg norm permute pow prod
relu reshape select sigmoid sign sin softmax split sqrt square squeeze stack std sub sum
take_along_dim tanh transpose unbind unsqueeze var where
exp2 log2 log10 rsqrt reciprocal tan asin acos atan sinh cosh asinh acosh atanh logit erf erfc
erfinv lgamma digamma floor ceil round trunc frac sgn nan_to_num clamp_min clamp_max clip isnan
isinf isfinite
floor_divide remainder fmod atan2 hypot fmax fmin logaddexp logaddexp2 xlogy lerp addcmul
addcdiv copysign
argmax argmin var_mean std_mean median mode kthvalue cumsum cumprod logcumsumexp cummax cummin
all any count_nonzero nansum nanmean aminmax
unflatten swapaxes movedim t repeat_interleave tile flip roll rot90 diagonal diag diag_embed
tril triu hstack vstack concat tensor_split meshgrid broadcast_tensors atleast_2d
scatter scatter_add scatter_reduce index_add index_copy index_fill index_put masked_select
masked_scatter take nonzero sort argsort topk unique searchsorted bucketize
bmm mv vdot outer addmm addmv baddbmm einsum tensordot kron cross trace cdist
""".split()

_LINALG = "vector_norm matrix_norm inv solve det slogdet cholesky qr eigh svd pinv "
_LINALG += "solve_triangular lstsq"

_NN = """
linear bilinear conv1d conv2d conv_transpose1d conv_transpose2d max_pool1d max_pool2d
avg_pool1d avg_pool2d adaptive_avg_pool1d adaptive_avg_pool2d adaptive_max_pool2d interpolate
pad unfold fold dropout embedding one_hot layer_norm group_norm batch_norm instance_norm rms_norm
normalize softmax log_softmax softmin glu relu relu6 leaky_relu elu selu celu gelu silu mish
softplus softsign hardtanh hardsigmoid hardswish logsigmoid cross_entropy nll_loss mse_loss
l1_loss smooth_l1_loss huber_loss binary_cross_entropy binary_cross_entropy_with_logits kl_div
cosine_similarity pairwise_distance scaled_dot_product_attention
""".split()

REQUIRED = (
    _TOP
    + [f"linalg.{n}" for n in _LINALG.split()]
    + [f"nn.functional.{n}" for n in _NN]
    # Tensor-only methods, in the table under their method's name
    + ["repeat", "unfold"]
)


@pytest.mark.parametrize("name", REQUIRED)
def test_required_operator_is_in_the_table(name: str) -> None:
    assert name in TABLE, f"{name} is not in the operator table"


def test_every_public_operator_is_in_the_table() -> None:
    import aengine.ops as ops

    missing = [
        n
        for n in ops.__all__
        if callable(getattr(ae, n, None))
        and n not in TABLE
        and not n[0].isupper()
        # creation functions (zeros_like...) are re-exported by aengine.ops, not operators
        and getattr(ae, n).__module__.startswith("aengine.ops")
    ]
    assert not missing, f"public ops without a table entry (so untested from it): {missing}"
