"""An independent reader of `runner-host ckpt convert --to hf` for CkptToolTest:
parses HF_DIR/config.json and HF_DIR/model.safetensors itself (no
transformers, no safetensors package), runs Hugging Face's LlamaForCausalLM
forward as transformers writes it (rotate_half rotary embeddings, repeat_kv
on (B, KV, T, hd), RMSNorm, SwiGLU) in float64, and compares its logits
with Meta's reference (tests/host/model/llama_reference.py) on the same
checkpoint's weights under runner-host's names (`ckpt convert --to torch`).

usage: hf_llama_reader.py HF_DIR META.pt TOL

HF_DIR holds model.safetensors, or files of a model.safetensors.index.json.

Exits 1 when a name, a shape or a config value is wrong, or when the logits
differ by more than TOL.
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
import llama_reference  # noqa: E402

DTYPES = {"F32": torch.float32, "F64": torch.float64, "BF16": torch.bfloat16, "F16": torch.float16}


def read_safetensors(path, sizes=None):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        if sizes is not None:
            sizes[name] = end - begin
        raw = bytearray(data[8 + n + begin:8 + n + end])
        out[name] = torch.frombuffer(raw, dtype=DTYPES[e["dtype"]]).reshape(e["shape"]).double()
    return out


def read_weights(hf_dir):
    """model.safetensors, or the files model.safetensors.index.json names
    (each tensor in the file its weight_map says, total_size the sum of the
    tensors' bytes), as from_pretrained reads them."""
    index = os.path.join(hf_dir, "model.safetensors.index.json")
    if not os.path.exists(index):
        return read_safetensors(os.path.join(hf_dir, "model.safetensors")), 1
    with open(index) as f:
        idx = json.load(f)
    if os.path.exists(os.path.join(hf_dir, "model.safetensors")):
        fail("both model.safetensors and an index")
    files = sorted(set(idx["weight_map"].values()))
    w, sizes = {}, {}
    for name in files:
        part = read_safetensors(os.path.join(hf_dir, name), sizes)
        for k in part:
            if idx["weight_map"].get(k) != name:
                fail("%s is in %s, the index says %s" % (k, name, idx["weight_map"].get(k)))
        w.update(part)
    if sorted(w) != sorted(idx["weight_map"]):
        fail("the index names %s, the files hold %s" % (sorted(idx["weight_map"]), sorted(w)))
    if idx["metadata"]["total_size"] != sum(sizes.values()):
        fail("total_size %d, the tensors hold %d bytes"
             % (idx["metadata"]["total_size"], sum(sizes.values())))
    return w, len(files)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def hf_repeat_kv(x, n_rep):
    b, kv, t, hd = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(b, kv, n_rep, t, hd).reshape(b, kv * n_rep, t, hd)


def hf_rms_norm(x, weight, eps):
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def hf_forward(w, cfg, ids):
    B, T = ids.shape
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg["hidden_size"] // H
    eps = cfg["rms_norm_eps"]
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[None, None], emb.sin()[None, None]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    h = F.embedding(ids, w["model.embed_tokens.weight"])
    for i in range(cfg["num_hidden_layers"]):
        p = lambda n: w["model.layers.%d.%s.weight" % (i, n)]
        x = hf_rms_norm(h, p("input_layernorm"), eps)
        q = F.linear(x, p("self_attn.q_proj")).view(B, T, H, hd).transpose(1, 2)
        k = F.linear(x, p("self_attn.k_proj")).view(B, T, KV, hd).transpose(1, 2)
        v = F.linear(x, p("self_attn.v_proj")).view(B, T, KV, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = hf_repeat_kv(k, H // KV), hf_repeat_kv(v, H // KV)
        att = F.softmax(torch.matmul(q, k.transpose(2, 3)) / math.sqrt(hd) + mask, dim=-1)
        out = torch.matmul(att, v).transpose(1, 2).reshape(B, T, H * hd)
        h = h + F.linear(out, p("self_attn.o_proj"))
        x = hf_rms_norm(h, p("post_attention_layernorm"), eps)
        h = h + F.linear(F.silu(F.linear(x, p("mlp.gate_proj"))) * F.linear(x, p("mlp.up_proj")),
                         p("mlp.down_proj"))
    return F.linear(hf_rms_norm(h, w["model.norm.weight"], eps), w["lm_head.weight"])


def fail(why):
    print("hf_llama_reader: " + why)
    sys.exit(1)


def main():
    hf_dir, meta_path, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    for key, want in [("architectures", ["LlamaForCausalLM"]), ("model_type", "llama"),
                      ("hidden_act", "silu"), ("tie_word_embeddings", False)]:
        if cfg.get(key) != want:
            fail("config.json %s is %r, not %r" % (key, cfg.get(key), want))
    w, files = read_weights(hf_dir)
    L, D = cfg["num_hidden_layers"], cfg["hidden_size"]
    H, KV, V = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"]
    hd, Fdim = D // H, cfg["intermediate_size"]
    shapes = {"model.embed_tokens.weight": [V, D], "model.norm.weight": [D],
              "lm_head.weight": [V, D]}
    for i in range(L):
        pre = "model.layers.%d." % i
        shapes.update({pre + "self_attn.q_proj.weight": [H * hd, D],
                       pre + "self_attn.k_proj.weight": [KV * hd, D],
                       pre + "self_attn.v_proj.weight": [KV * hd, D],
                       pre + "self_attn.o_proj.weight": [D, H * hd],
                       pre + "mlp.gate_proj.weight": [Fdim, D],
                       pre + "mlp.up_proj.weight": [Fdim, D],
                       pre + "mlp.down_proj.weight": [D, Fdim],
                       pre + "input_layernorm.weight": [D],
                       pre + "post_attention_layernorm.weight": [D]})
    if sorted(w) != sorted(shapes):
        fail("names: %s" % sorted(set(w) ^ set(shapes)))
    for name, shape in shapes.items():
        if list(w[name].shape) != shape:
            fail("%s is %s, not %s" % (name, list(w[name].shape), shape))
    meta = {k: v.double() for k, v in torch.load(meta_path).items()}
    torch.manual_seed(0)
    ids = torch.randint(0, V, (2, min(8, cfg["max_position_embeddings"])))
    with torch.no_grad():
        hf = hf_forward(w, cfg, ids)
        ref = llama_reference.forward(meta, ids, D, L, H, KV, cfg["rms_norm_eps"],
                                      cfg["rope_theta"])
    diff = (hf - ref).abs().max().item()
    print("max |HF layout - Meta reference| = %.3g over %d logits from %d file(s) (tolerance %g)"
          % (diff, hf.numel(), files, tol))
    sys.exit(0 if diff <= tol else 1)


if __name__ == "__main__":
    main()
