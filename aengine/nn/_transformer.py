"""MultiheadAttention and the Transformer layers, with torch.nn's parameters and arithmetic."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

from ..ops import where
from ..tensors._creation import empty, full, zeros
from ..tensors._tensor import Tensor
from . import functional as F
from . import init
from ._containers import ModuleList
from ._layers import Dropout, Linear
from ._module import Module, Parameter
from ._norms import LayerNorm

__all__ = [
    "MultiheadAttention",
    "TransformerEncoderLayer",
    "TransformerEncoder",
    "TransformerDecoderLayer",
]


def _float_mask(mask: Tensor | None, like: Tensor, what: str) -> Tensor | None:
    """A boolean mask (True: not allowed) as the additive float mask torch makes of it."""
    if mask is None:
        return None
    if mask.dtype.kind == "b":
        inf = full(mask.shape, float("-inf"), dtype=like.dtype, device=like.device)
        zero = zeros(*mask.shape, dtype=like.dtype, device=like.device)
        out: Tensor = where(mask, inf, zero)
        return out
    if mask.dtype.kind != "f":
        raise AssertionError(f"only bool and floating types of {what} are supported")
    return mask


class MultiheadAttention(Module):
    """Multi-head attention, as torch.nn.MultiheadAttention (same parameters, same arithmetic).

    ``forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False)`` returns
    ``(output, weights)``; inputs are (L, N, E), or (N, L, E) with
    ``batch_first=True``.  Masks: True (or -inf) where attention is not
    allowed.

    Example::

        >>> import aengine as ae
        >>> mha = ae.nn.MultiheadAttention(8, 2, batch_first=True)
        >>> x = ae.randn(3, 5, 8)
        >>> out, w = mha(x, x, x)
        >>> out.shape, w.shape
        ((3, 5, 8), (3, 5, 5))
    """

    def __init__(
        self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
        add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
        vdim: int | None = None, batch_first: bool = False, device: Any = None,
        dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} "
                f"and num_heads={num_heads} instead"
            )
        if embed_dim % num_heads != 0:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if (
            add_bias_kv
            or add_zero_attn
            or (kdim not in (None, embed_dim))
            or (vdim not in (None, embed_dim))
        ):
            raise NotImplementedError(
                "MultiheadAttention: add_bias_kv, add_zero_attn and kdim/vdim other than "
                "embed_dim are not supported; project keys and values to embed_dim first"
            )
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.batch_first, self.head_dim = batch_first, embed_dim // num_heads
        self.kdim = self.vdim = embed_dim
        self._qkv_same_embed_dim = True
        dev = device or "cpu"
        self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, dtype=dtype, device=dev))
        self.register_parameter("q_proj_weight", None)
        self.register_parameter("k_proj_weight", None)
        self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, dtype=dtype, device=dev))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = _OutProj(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def forward(
        self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None = None,
        need_weights: bool = True, attn_mask: Tensor | None = None,
        average_attn_weights: bool = True, is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        batched = query.ndim == 3
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (t.transpose(1, 0) for t in (query, key, value))
        out, weights = self._attend(
            query, key, value, key_padding_mask, need_weights, attn_mask,
            average_attn_weights, is_causal,
        )  # fmt: skip
        if not batched:
            out = out.squeeze(1)
            if weights is not None:
                weights = weights.squeeze(0)
        elif self.batch_first:
            out = out.transpose(1, 0)
        return out, weights

    def _attend(
        self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None,
        need_weights: bool, attn_mask: Tensor | None, average: bool, is_causal: bool,
    ) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        tgt_len, bsz, embed_dim = query.shape
        src_len = key.shape[0]
        if embed_dim != self.embed_dim:
            raise AssertionError(
                f"was expecting embedding dimension of {self.embed_dim}, but got {embed_dim}"
            )
        if is_causal and attn_mask is None:
            raise RuntimeError(
                "Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                "module method `generate_square_subsequent_mask` to create this mask."
            )
        h, hd = self.num_heads, self.head_dim
        w, b = self.in_proj_weight, self.in_proj_bias
        wq, wk, wv = w.chunk(3)
        bq, bk, bv = b.chunk(3) if b is not None else (None, None, None)
        q = F.linear(query, wq, bq)
        k = F.linear(key, wk, bk)
        v = F.linear(value, wv, bv)
        mask = self._mask(attn_mask, key_padding_mask, q, bsz, tgt_len, src_len)
        q = q.reshape(tgt_len, bsz * h, hd).transpose(0, 1)
        k = k.reshape(src_len, bsz * h, hd).transpose(0, 1)
        v = v.reshape(src_len, bsz * h, hd).transpose(0, 1)
        p = self.dropout if self.training else 0.0
        if need_weights:
            scores = (q * math.sqrt(1.0 / float(hd))) @ k.transpose(-2, -1)
            if mask is not None:
                scores = scores + mask
            attn = F.softmax(scores, dim=-1)
            if p > 0.0:
                attn = F.dropout(attn, p=p)
            out = attn @ v
            out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
            out = self.out_proj(out).reshape(tgt_len, bsz, embed_dim)
            weights = attn.reshape(bsz, h, tgt_len, src_len)
            return out, (weights.mean(dim=1) if average else weights)
        if mask is not None:
            mask = mask.reshape(bsz, h, -1, src_len) if mask.shape[0] != 1 else mask.unsqueeze(0)
        q4 = q.reshape(bsz, h, tgt_len, hd)
        k4 = k.reshape(bsz, h, src_len, hd)
        v4 = v.reshape(bsz, h, src_len, hd)
        out = F.scaled_dot_product_attention(q4, k4, v4, mask, p, False)
        out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
        out = self.out_proj(out).reshape(tgt_len, bsz, embed_dim)
        return out, None

    def _mask(
        self, attn_mask: Tensor | None, key_padding_mask: Tensor | None, q: Tensor, bsz: int,
        tgt_len: int, src_len: int,
    ) -> Tensor | None:  # fmt: skip
        """The additive mask of the scores, (1 or N * heads, L, S): attn_mask and key padding."""
        h = self.num_heads
        mask = _float_mask(attn_mask, q, "attn_mask")
        if mask is not None and mask.ndim == 2:
            if tuple(mask.shape) != (tgt_len, src_len):
                raise RuntimeError(
                    f"The shape of the 2D attn_mask is {tuple(mask.shape)}, but should be "
                    f"{(tgt_len, src_len)}."
                )
            mask = mask.unsqueeze(0)
        elif mask is not None and tuple(mask.shape) != (bsz * h, tgt_len, src_len):
            raise RuntimeError(
                f"The shape of the 3D attn_mask is {tuple(mask.shape)}, but should be "
                f"{(bsz * h, tgt_len, src_len)}."
            )
        kpm = _float_mask(key_padding_mask, q, "key_padding_mask")
        if kpm is not None:
            if tuple(kpm.shape) != (bsz, src_len):
                raise AssertionError(
                    f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                    f"{tuple(kpm.shape)}"
                )
            kpm = kpm.reshape(bsz, 1, 1, src_len).expand(-1, h, -1, -1).reshape(bsz * h, 1, src_len)
            mask = kpm if mask is None else mask + kpm
        return mask

    def extra_repr(self) -> str:
        return ""


class _OutProj(Linear):
    """torch's NonDynamicallyQuantizableLinear: a Linear under another name (the repr shows it)."""


_OutProj.__name__ = _OutProj.__qualname__ = "NonDynamicallyQuantizableLinear"


def _activation(activation: str | Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if callable(activation):
        return activation
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _attend(
    attn: MultiheadAttention, dropout: Module, x: Tensor, mem: Tensor,
    mask: Tensor | None, kpm: Tensor | None, is_causal: bool,
) -> Tensor:  # fmt: skip
    """A layer's attention block: ``x`` attends to ``mem`` (itself for self-attention)."""
    out = attn(
        x, mem, mem, attn_mask=mask, key_padding_mask=kpm, is_causal=is_causal,
        need_weights=False,
    )[0]  # fmt: skip
    res: Tensor = dropout(out)
    return res


def _feed_forward(layer: Any, x: Tensor, dropout: Module) -> Tensor:
    """A layer's feed-forward block: linear1, activation, dropout, linear2, then ``dropout``."""
    res: Tensor = dropout(layer.linear2(layer.dropout(layer.activation(layer.linear1(x)))))
    return res


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with a residual and LayerNorm (torch's).

    Example::

        >>> import aengine as ae
        >>> layer = ae.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
        >>> layer(ae.randn(3, 5, 8)).shape
        (3, 5, 8)
    """

    def __init__(
        self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu", layer_norm_eps: float = 1e-5,
        batch_first: bool = False, norm_first: bool = False, bias: bool = True,
        device: Any = None, dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(
        self, src: Tensor, src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None, is_causal: bool = False,
    ) -> Tensor:  # fmt: skip
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        out: Tensor = self.norm2(x + self._ff_block(x))
        return out

    def _sa_block(
        self, x: Tensor, mask: Tensor | None, kpm: Tensor | None, is_causal: bool
    ) -> Tensor:
        return _attend(self.self_attn, self.dropout1, x, x, mask, kpm, is_causal)

    def _ff_block(self, x: Tensor) -> Tensor:
        return _feed_forward(self, x, self.dropout2)


class TransformerEncoder(Module):
    """``num_layers`` copies of an encoder layer, then an optional norm.

    Example::

        >>> import aengine as ae
        >>> layer = ae.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
        >>> enc = ae.nn.TransformerEncoder(layer, num_layers=2)
        >>> enc(ae.randn(5, 3, 8)).shape, len(enc.layers)
        ((5, 3, 8), 2)
    """

    def __init__(
        self, encoder_layer: TransformerEncoderLayer, num_layers: int,
        norm: Module | None = None, enable_nested_tensor: bool = True, mask_check: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self, src: Tensor, mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:  # fmt: skip
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                        is_causal=bool(is_causal))  # fmt: skip
        if self.norm is not None:
            out = self.norm(out)
        return out


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's memory and a feed-forward block (torch's).

    Example::

        >>> import aengine as ae
        >>> layer = ae.nn.TransformerDecoderLayer(8, 2, dim_feedforward=16)
        >>> layer(ae.randn(4, 3, 8), ae.randn(6, 3, 8)).shape
        (4, 3, 8)
    """

    def __init__(
        self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu", layer_norm_eps: float = 1e-5,
        batch_first: bool = False, norm_first: bool = False, bias: bool = True,
        device: Any = None, dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw
        )
        self.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(
        self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:  # fmt: skip
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(
                self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal
            )
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(
            x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal)
        )
        out: Tensor = self.norm3(x + self._ff_block(x))
        return out

    def _sa_block(
        self, x: Tensor, mask: Tensor | None, kpm: Tensor | None, is_causal: bool
    ) -> Tensor:
        return _attend(self.self_attn, self.dropout1, x, x, mask, kpm, is_causal)

    def _mha_block(
        self, x: Tensor, mem: Tensor, mask: Tensor | None, kpm: Tensor | None, is_causal: bool
    ) -> Tensor:
        return _attend(self.multihead_attn, self.dropout2, x, mem, mask, kpm, is_causal)

    def _ff_block(self, x: Tensor) -> Tensor:
        return _feed_forward(self, x, self.dropout3)
