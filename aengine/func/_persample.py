"""Linear and convolution layers with a weight shared by every sample, per-sample gradients.

# NOTE [Per-sample gradients of a shared weight]
# Under ``vmap(grad(f))`` a parameter that every sample shares is expanded
# into one stride-0 copy per sample (NOTE [vmap by physical translation]).
# Computing ``x_b @ w_b.T`` sample by sample would be B matrix-vector
# products.  A linear layer instead computes its forward once for the batch
# with the shared weight (one matrix product) and, in backward, the input's
# gradient the same way and each sample's weight gradient as one einsum of
# outer products (``g_b^T x_b``).  A convolution is computed with the shared
# weight as a constant, so its own backward gives the input's gradient as
# for any batch; a node beside it (``_ConvWeightGrads``) gives each sample's
# weight gradient in one batched product ``g_b @ unfold(x_b)^T``.  They are
# chosen only when no outer transform differentiates the backward
# (create_graph off): their backward is written for first derivatives.
"""

from __future__ import annotations

from typing import Any

from .._function import Function
from ..core._modes import is_grad_enabled
from ..ops import matmul
from ..ops._conv import conv2d, unfold
from ..ops._norm import linear
from ..tensors import Tensor

__all__ = ["shared_linear", "shared_conv2d"]


def _first(t: Tensor) -> Tensor:
    """Sample 0's copy of an expanded tensor, as a constant (every sample's is the same)."""
    return Tensor._make(t.data[0], False, t._device)


class _SharedLinear(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
        ctx.save_for_backward(x, w)
        ctx.bias_batched = b is not None and b.ndim == 2
        b0 = None if b is None else (_first(b) if ctx.bias_batched else b)
        return linear(x, _first(w), b0)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        x, w = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        B = x.shape[0]
        w0 = _first(w)
        gx = matmul(g, w0) if need_x else None
        gw = gb = None
        if need_w or need_b:
            g3 = g.reshape(B, -1, g.shape[-1])
            if need_w:
                x3 = x.reshape(B, -1, x.shape[-1])
                if g3.shape[1] == 1 and not is_grad_enabled():
                    # one row per sample: outer products (einsum's loop is about twice
                    # as fast as a broadcast multiply or B matrix products of depth 1)
                    xp = g._device.backend.xp
                    arr = xp.einsum("bi,bj->bij", g3.data[:, 0], x3.data[:, 0])
                    gw = Tensor._make(arr, False, g._device)
                else:
                    gw = matmul(g3.transpose(1, 2), x3)
            if need_b:
                gb = g3.sum(1) if ctx.bias_batched else g3.sum((0, 1))
        return gx, gw, gb


def shared_linear(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    """``linear`` of a batch ``x`` (B, ..., in) with per-sample copies ``w`` (B, out, in) of one weight."""
    return _SharedLinear.apply(x, w, b)  # type: ignore[no-any-return]


def _pair(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


class _ConvWeightGrads(Function):
    """The identity on a convolution's output, whose backward adds the per-sample weight gradients.

    The convolution itself is computed with the shared weight as a constant
    (``conv2d``'s own backward then gives the input's gradient as for any
    batch); this node gives the weight's and bias's per-sample gradients
    from the same output gradient: ``g_b @ unfold(x_b)^T``.
    """

    @staticmethod
    def forward(
        ctx: Any,
        out: Tensor,
        x: Tensor,
        w: Tensor,
        b: Tensor | None,
        stride: Any,
        padding: Any,
        dilation: Any,
        batch: int,
    ) -> Tensor:
        ctx.save_for_backward(x, w)
        ctx.conf = (stride, padding, dilation, batch)
        ctx.bias_batched = b is not None and b.ndim == 2
        return out.view_as(out)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        x, w = ctx.saved_tensors
        _, _, need_w, need_b = ctx.needs_input_grad[:4]
        stride, padding, dilation, B = ctx.conf
        cout = g.shape[1]
        n = g.shape[0] // B
        gw = gb = None
        if need_w:
            cols = unfold(x, tuple(w.shape[3:]), dilation, padding, stride)  # (B*N, CKK, L)
            g3 = g.reshape(B * n, cout, -1)
            gw = matmul(g3, cols.transpose(1, 2))  # (B*N, O, CKK)
            if n > 1:
                gw = gw.reshape(B, n, *gw.shape[1:]).sum(1)
            gw = gw.reshape(w.shape)
        if need_b:
            gsum = g.reshape(B, n, cout, -1)
            gb = gsum.sum((1, 3)) if ctx.bias_batched else gsum.sum((0, 1, 3))
        return g, None, gw, gb, None, None, None, None


def shared_conv2d(
    x: Tensor, w: Tensor, b: Tensor | None, stride: Any, padding: Any, dilation: Any, batch: int
) -> Tensor:
    """``conv2d`` of ``x`` (B * N, C, H, W) with per-sample copies ``w`` (B, O, C, kh, kw) of one weight."""
    b0 = None if b is None else (_first(b) if b.ndim == 2 else b.detach())
    out = conv2d(x, _first(w), b0, stride, padding, dilation)
    return _ConvWeightGrads.apply(out, x.detach(), w, b, stride, padding, dilation, batch)  # type: ignore[no-any-return]
