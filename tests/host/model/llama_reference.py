"""A hand-written Llama reference for LlamaTest: Meta's llama/model.py
(precompute_freqs_cis, apply_rotary_emb with complex numbers, repeat_kv,
RMSNorm, SwiGLU), without its KV cache and parallel layers, in float64.

usage: llama_reference.py DUMP.pt DIM N_LAYERS N_HEADS N_KV_HEADS NORM_EPS ROPE_THETA TOL

DUMP.pt (torch::pickle_save of a dict, written by LlamaTest): the model's
parameters under their names, "__ids__" (B, T) int64 and "__logits__"
(B, T, V), runner-host's forward, all float64. Prints the largest absolute
difference of the logits and exits 1 when it exceeds TOL.
"""
import math
import sys

import torch
import torch.nn.functional as F


def precompute_freqs_cis(dim, end, theta):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64)[: (dim // 2)] / dim))
    t = torch.arange(end, dtype=torch.float64)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex128


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out, xk_out


def repeat_kv(x, n_rep):
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (
        x[:, :, :, None, :]
        .expand(bs, slen, n_kv_heads, n_rep, head_dim)
        .reshape(bs, slen, n_kv_heads * n_rep, head_dim)
    )


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def forward(p, ids, dim, n_layers, n_heads, n_kv_heads, eps, theta):
    bsz, seqlen = ids.shape
    head_dim = dim // n_heads
    h = F.embedding(ids, p["tok_embeddings.weight"])
    freqs_cis = precompute_freqs_cis(head_dim, seqlen, theta)
    mask = torch.full((seqlen, seqlen), float("-inf"), dtype=torch.float64).triu(1)
    for i in range(n_layers):
        w = lambda name: p["layers.%d.%s.weight" % (i, name)]
        x = rms_norm(h, w("attention_norm"), eps)
        xq = F.linear(x, w("attention.wq")).view(bsz, seqlen, n_heads, head_dim)
        xk = F.linear(x, w("attention.wk")).view(bsz, seqlen, n_kv_heads, head_dim)
        xv = F.linear(x, w("attention.wv")).view(bsz, seqlen, n_kv_heads, head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
        keys = repeat_kv(xk, n_heads // n_kv_heads).transpose(1, 2)
        values = repeat_kv(xv, n_heads // n_kv_heads).transpose(1, 2)
        xq = xq.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(head_dim) + mask
        out = torch.matmul(F.softmax(scores, dim=-1), values)
        out = out.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        h = h + F.linear(out, w("attention.wo"))
        x = rms_norm(h, w("ffn_norm"), eps)
        ff = F.linear(F.silu(F.linear(x, w("feed_forward.w1"))) * F.linear(x, w("feed_forward.w3")),
                      w("feed_forward.w2"))
        h = h + ff
    return F.linear(rms_norm(h, p["norm.weight"], eps), p["output.weight"])


def main():
    path = sys.argv[1]
    dim, n_layers, n_heads, n_kv_heads = (int(a) for a in sys.argv[2:6])
    eps, theta, tol = (float(a) for a in sys.argv[6:9])
    p = torch.load(path, weights_only=False)  # torch::pickle_save tags its dict
    ids, logits = p.pop("__ids__"), p.pop("__logits__")
    with torch.no_grad():
        ref = forward(p, ids, dim, n_layers, n_heads, n_kv_heads, eps, theta)
    diff = (ref - logits).abs().max().item()
    print("max |reference - runner-host| = %.3g over %d logits (tolerance %g)"
          % (diff, logits.numel(), tol))
    sys.exit(0 if diff <= tol else 1)


if __name__ == "__main__":
    main()
