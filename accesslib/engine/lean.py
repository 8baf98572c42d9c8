"""A lean forward pass for the small GPT-NeoX models the project ships (the cramming engine's hot loop).

On a laptop CPU a tiny model's step is bound by per-operation overhead, not arithmetic.
:func:`lean_forward` returns a function that runs the transformers GPT-NeoX forward's arithmetic
with the model's own weights and the same torch kernels (layer norms, fused query-key-value
projection, scaled-dot-product attention with the causal flag, parallel or sequential residual, the
model's own activation module, final norm, LM head on the kept positions) without the mask
building, module calls, output containers and keyword plumbing around them, and applies the rotary
embedding (tables from the model's own rotary module) to q and k as one multiply-add instead of
slices and concatenations: the same products and sums per element. Its logits and gradients are
bit-identical to ``model(inputs_embeds=x, logits_to_keep=k).logits`` (tests/engine/test_lean.py)
while a forward-and-backward step of tiny-d64-v257 costs about 40% less at one row (2.6 -> 1.5 ms)
and about 20% less at 16 rows.

It is used only where that identity holds: a ``GPTNeoXForCausalLM`` in eval mode with the "sdpa"
attention implementation, the default rotary type and no autocast; anything else (other families,
eager attention, dropout in training mode, autocast) gets ``None`` and the engine calls the model
as usual.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F


def lean_forward(model) -> Callable | None:
    """``fn(inputs_embeds [B, L, d], keep) -> logits [B, keep, V]`` for a supported model, else None."""
    if type(model).__name__ != "GPTNeoXForCausalLM" or model.training:
        return None
    cfg = model.config
    body = getattr(model, "gpt_neox", None)
    head = model.get_output_embeddings()
    rope = getattr(body, "rotary_emb", None)
    if body is None or head is None or rope is None or getattr(head, "bias", None) is not None:
        return None
    if getattr(cfg, "_attn_implementation", None) != "sdpa":
        return None
    if getattr(rope, "rope_type", "default") != "default" or float(getattr(rope, "attention_scaling", 1.0)) != 1.0:
        return None
    if getattr(cfg, "attention_dropout", 0.0) and model.training:
        return None
    d = int(cfg.hidden_size)
    heads = int(cfg.num_attention_heads)
    hs = d // heads
    layers = []
    for layer in body.layers:
        a = layer.attention
        layers.append((layer.input_layernorm, layer.post_attention_layernorm, a.query_key_value, a.dense,
                       float(a.scaling), layer.mlp.dense_h_to_4h, layer.mlp.act, layer.mlp.dense_4h_to_h,
                       bool(layer.use_parallel_residual)))
    fin = body.final_layer_norm
    cache: dict = {}

    def tables(x, L):
        """Rotary tables over the whole fused q|k|v row, cached per length: (cos, sin with the sign
        of rotate_half folded in, the permutation that swaps the rotary halves); 1, 0 and the identity
        on the dimensions the rotation leaves alone (the values, the non-rotary part of q and k)."""
        key = (L, x.dtype, x.device)
        t = cache.get(key)
        if t is None:
            with torch.no_grad():
                pos = torch.arange(L, device=x.device)[None]
                cos, sin = rope(x, pos)                  # the model's own rotary module: same values
            cos, sin = cos[0], sin[0]
            rot = cos.shape[-1]           # as transformers does: the table's width, not rotary_ndims
            half = rot // 2
            ones = torch.ones(L, hs - rot, dtype=cos.dtype, device=cos.device)
            zeros = torch.zeros_like(ones)
            c1 = torch.cat((cos, ones), -1)
            s1 = torch.cat((-sin[:, :half], sin[:, half:], zeros), -1)
            one_head = list(range(half, rot)) + list(range(half)) + list(range(rot, hs))
            perm = torch.tensor(one_head + [hs + i for i in one_head] + list(range(2 * hs, 3 * hs)),
                                device=x.device)
            t = cache[key] = (torch.cat((c1, c1, torch.ones(L, hs, dtype=cos.dtype, device=cos.device)), -1),
                              torch.cat((s1, s1, torch.zeros(L, hs, dtype=cos.dtype, device=cos.device)), -1),
                              perm)
            if len(cache) > 256:
                cache.pop(next(iter(cache)))
        return t

    def ln(mod, x):
        return F.layer_norm(x, mod.normalized_shape, mod.weight, mod.bias, mod.eps)

    def forward(x: torch.Tensor, keep: int) -> torch.Tensor:
        B, L, _ = x.shape
        cos, sin, perm = tables(x, L)
        for ln1, ln2, qkv_p, dense, scale, up, act, down, parallel in layers:
            qkv = F.linear(ln(ln1, x), qkv_p.weight, qkv_p.bias).view(B, L, heads, 3 * hs).transpose(1, 2)
            # transformers' q*cos + rotate_half(q)*sin on the rotary part, the same products and sum
            # per element (rotate_half's negation folded into sin is exact), for q and k in one go;
            # the other dimensions get x*1 + x*0 = x
            qkv = qkv * cos + qkv.index_select(-1, perm) * sin
            q, k, v = qkv.chunk(3, dim=-1)
            o = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, scale=scale, is_causal=L > 1)
            o = F.linear(o.transpose(1, 2).reshape(B, L, d), dense.weight, dense.bias)
            if parallel:
                mlp = F.linear(act(F.linear(ln(ln2, x), up.weight, up.bias)), down.weight, down.bias)
                x = mlp + o + x
            else:
                o = o + x
                x = F.linear(act(F.linear(ln(ln2, o), up.weight, up.bias)), down.weight, down.bias) + o
        # norm every position, then slice as transformers does, and make the slice contiguous as
        # the engine's decoding.contiguous_head does for the transformers head: the same matmul
        # kernel, so the same bits (a strided input would run as a slower batched product)
        return F.linear(ln(fin, x)[:, -keep:].contiguous(), head.weight)

    return forward


@torch.no_grad()
def lean_greedy(forward: Callable, emb, pre, memory, given, n: int, batch: int | None = None) -> torch.Tensor:
    """Greedy ids [B, n] after [pre][memory][emb(given)], by re-running the lean ``forward`` on the
    whole sequence for every token (no cache: for a small model one short pass costs less than the
    transformers cache machinery). pre: [1, p, d] embedded prefix or None; memory: [B, m, d] in the
    model's dtype; given: LongTensor [B, g]. Ties go to the lowest id, as in
    :func:`accesslib.engine.decoding.greedy`."""
    B = memory.shape[0]
    step = B if batch is None else max(1, int(batch))
    outs = []
    for lo in range(0, B, step):
        mem = memory[lo:lo + step]
        parts = [] if pre is None else [pre.expand(mem.shape[0], -1, -1)]
        parts.append(mem)
        if given.shape[1] > 0:
            parts.append(emb(given[lo:lo + step]))
        seq = torch.cat(parts, 1)
        ids = []
        for i in range(n):
            tok = forward(seq, 1)[:, -1].float().argmax(-1)
            ids.append(tok)
            if i + 1 < n:
                seq = torch.cat([seq, emb(tok)[:, None]], 1)
        outs.append(torch.stack(ids, 1))
    return torch.cat(outs)
