"""A tiny GPT (a decoder-only transformer) that learns to sort digits, written with ae.nn.

The task is generated: a prompt of digits and a separator, ``3 1 2 |``, and
the answer the model writes after it, ``1 2 3``.  Each character is a token.
The model is the usual pre-norm GPT: token and position embeddings, blocks of
causal self-attention and an MLP (each with a LayerNorm before it and a
residual around it), a final LayerNorm and a linear head.  Training is
teacher forcing with the loss on the answer positions only (cross_entropy's
``ignore_index``), AdamW with a warmup and a cosine decay, in an async main
that awaits every backward.  At the end the model greedily decodes held-out
prompts it never trained on, is saved with ``ae.save`` and loaded into a
fresh model, which must decode them identically.

    python examples/tiny_gpt.py                      # sorts 6 digits (asyncio)
    python examples/tiny_gpt.py --backend trio       # the same under trio
    python examples/tiny_gpt.py --digits 4 --steps 300 --d-model 32   # smaller, faster
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from typing import Any

import anyio
import numpy as np

import aengine as ae
import aengine.nn.functional as F
from aengine import nn

VOCAB = "0123456789|"  # the digits and the separator between the prompt and the answer
SEP = VOCAB.index("|")
IGNORE = -100  # the target of the positions that are not part of the answer


def encode(text: str) -> list[int]:
    return [VOCAB.index(c) for c in text.replace(" ", "")]


def decode(tokens: list[int]) -> str:
    return " ".join(VOCAB[t] for t in tokens)


# -- the model ----------------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which a position sees only itself and the positions before."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)  # queries, keys and values in one matmul
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: ae.Tensor) -> ae.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        # (b, t, c) -> (b, heads, t, head_dim)
        q, k, v = (z.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """Pre-norm: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(self, x: ae.Tensor) -> ae.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(
        self, vocab: int, block_size: int, d_model: int = 64, n_layers: int = 2, n_heads: int = 4
    ) -> None:
        super().__init__()
        self.block_size = block_size
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(block_size, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_heads) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        # GPT-2's initialisation: small normal weights, zero biases
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx: ae.Tensor) -> ae.Tensor:
        """Token ids (batch, time) -> logits (batch, time, vocab) of the next token."""
        t = idx.shape[1]
        assert t <= self.block_size, f"sequence of {t} tokens, block_size is {self.block_size}"
        x = self.tok(idx) + self.pos(ae.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


@ae.no_grad()
def generate(model: TinyGPT, prompt: ae.Tensor, n_new: int) -> ae.Tensor:
    """Greedy decoding: append the most likely next token ``n_new`` times; the new tokens."""
    idx = prompt
    for _ in range(n_new):
        logits = model(idx[:, -model.block_size :])
        nxt = logits[:, -1, :].argmax(dim=-1, keepdim=True)
        idx = ae.cat([idx, nxt], dim=1)
    return idx[:, prompt.shape[1] :]


# -- the task -----------------------------------------------------------------------------------


def make_batch(
    rng: np.random.Generator, batch: int, digits: int, exclude: set[bytes] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``batch`` random prompts of ``digits`` digits and their sorted answers (never in ``exclude``)."""
    x = rng.integers(0, 10, size=(batch, digits))
    if exclude:
        for i in range(batch):
            while x[i].tobytes() in exclude:
                x[i] = rng.integers(0, 10, size=digits)
    return x, np.sort(x, axis=1)


def training_tensors(
    x: np.ndarray, y: np.ndarray, device: Any = "cpu"
) -> tuple[ae.Tensor, ae.Tensor]:
    """Teacher forcing: input = the sequence less its last token, target = the next tokens.

    ``digits | answer`` has 2*digits+1 tokens; only the answer's targets count.
    """
    n, d = x.shape
    seq = np.concatenate([x, np.full((n, 1), SEP), y], axis=1)
    inp, tgt = seq[:, :-1], seq[:, 1:].copy()
    tgt[:, :d] = IGNORE  # the targets of the prompt's positions (the next digits, the "|")
    return ae.tensor(inp, device=device), ae.tensor(tgt, device=device)


def prompts(x: np.ndarray, device: Any = "cpu") -> ae.Tensor:
    return ae.tensor(np.concatenate([x, np.full((len(x), 1), SEP)], axis=1), device=device)


def accuracy(model: TinyGPT, x: np.ndarray) -> tuple[float, np.ndarray]:
    """Exact-match accuracy of greedy decoding on prompts ``x``, and the decoded answers."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = generate(model, prompts(x, device), x.shape[1]).cpu().numpy()
    model.train(was_training)
    return float((out == np.sort(x, axis=1)).all(axis=1).mean()), out


# -- training -----------------------------------------------------------------------------------


async def train(args: argparse.Namespace) -> dict[str, Any]:
    ae.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    held_out, _ = make_batch(np.random.default_rng(args.seed + 1), args.eval, args.digits)
    exclude = {row.tobytes() for row in held_out}  # never train on a held-out prompt

    model = TinyGPT(len(VOCAB), 2 * args.digits, args.d_model, args.layers, args.heads)
    model.to(args.device)
    n_params = sum(p.numel() for p in model.parameters())
    opt = ae.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = max(1, args.steps // 20)

    def schedule(step: int) -> float:  # linear warmup, then a cosine to a tenth
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, args.steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    sched = ae.optim.lr_scheduler.LambdaLR(opt, schedule)
    print(
        f"TinyGPT: {n_params} parameters, {args.layers} layers, d_model {args.d_model}, "
        f"{args.heads} heads, on {args.device}; sorting {args.digits} digits"
    )
    start = time.perf_counter()
    acc, step, loss_value = 0.0, 0, float("nan")
    for step in range(1, args.steps + 1):
        inp, tgt = training_tensors(*make_batch(rng, args.batch, args.digits, exclude), args.device)
        logits = model(inp)
        loss = F.cross_entropy(logits.reshape(-1, len(VOCAB)), tgt.reshape(-1), ignore_index=IGNORE)
        opt.zero_grad()
        await loss.backward()
        opt.step()
        sched.step()
        if step % args.log_every == 0 or step == args.steps:
            loss_value = loss.item()
            acc, _ = accuracy(model, held_out)
            print(f"step {step:5d}  loss {loss_value:.4f}  held-out exact match {acc:.1%}")
            if acc >= args.target:
                break
        await anyio.sleep(0)  # let the loop's other tasks run between steps
    seconds = time.perf_counter() - start

    # greedy decoding of the held-out prompts, then a save / load round trip
    acc, answers = accuracy(model, held_out)
    path = args.save or os.path.join(tempfile.mkdtemp(), "tiny_gpt.safetensors")
    ae.save(model.state_dict(), path)
    loaded = TinyGPT(len(VOCAB), 2 * args.digits, args.d_model, args.layers, args.heads)
    loaded.to(args.device).load_state_dict(ae.load(path))
    acc2, answers2 = accuracy(loaded, held_out)
    same = bool(np.array_equal(answers, answers2))
    for row, ans in list(zip(held_out, answers))[:3]:
        print(f"  {decode(list(row))} |  ->  {decode(list(ans))}")
    print(
        f"held-out exact match {acc:.1%} ({len(held_out)} prompts) after {step} steps, "
        f"{seconds:.1f} s of training; saved to {path}; "
        f"the loaded model decodes {'identically' if same else 'DIFFERENTLY'}"
    )
    return {
        "accuracy": acc, "loaded_accuracy": acc2, "same_decoding": same, "steps": step,
        "seconds": seconds, "loss": loss_value, "parameters": n_params, "path": path,
    }  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    p.add_argument("--digits", type=int, default=6, help="length of the sequences to sort")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--steps", type=int, default=1000, help="at most this many steps")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--eval", type=int, default=500, help="held-out prompts")
    p.add_argument("--target", type=float, default=0.99, help="stop at this held-out accuracy")
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--device", default="cpu", help="cpu, cuda (CuPy) or sim:0")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save", default=None, help="checkpoint path (default: a temporary file)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    result: dict[str, Any] = anyio.run(train, args, backend=args.backend)
    return result


if __name__ == "__main__":
    out = main()
    raise SystemExit(0 if out["same_decoding"] else 1)
