#!/usr/bin/env python3
"""Checks that a Braid checkpoint directory is a Hugging Face model directory
that transformers' from_pretrained loads as it is.

  check_hf_checkpoint.py DIR [--next-loss LOG DATA]
  check_hf_checkpoint.py DIR --same-tensors OTHER

Reads DIR/config.json (a LlamaForCausalLM, MixtralForCausalLM or
GPT2LMHeadModel configuration),
lists every tensor that class builds for that configuration, with its shape,
and checks the weights against it: every expected tensor exists, F32, with
its shape; no other tensor does (tied LM heads may be left out, as
transformers saves them). The weights are DIR/model.safetensors, or shards
model-0000K-of-0000N.safetensors named by model.safetensors.index.json,
whose total_size and weight_map must match the shards exactly. Every
safetensors header is parsed and checked as the format requires.

Python's standard library only. When transformers and torch are importable,
also loads DIR with AutoModelForCausalLM.from_pretrained, requires no
missing, unexpected or mismatched keys, and runs one forward pass whose
logits must be finite; with --next-loss, also computes the loss of the step
after the checkpoint's on the text file DATA (byte tokens, sequential
windows, the batch and sequence length of the checkpoint's metadata) and
compares it with the one braid-run wrote to the JSON-lines LOG (within 1e-5
relative: the model transformers builds from config.json computes what Braid
computed; a run with dropout differs). Otherwise says that part was skipped.

--same-tensors checks instead that the parameters of DIR and OTHER, each in
either layout, are the same tensors bit for bit.

Prints one summary line per part and exits 1 with the reason on the first
problem.
"""
import json
import math
import os
import re
import struct
import sys

SHARD = re.compile(r"^model-(\d{5})-of-(\d{5})\.safetensors$")
DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "I64": 8}


class Refusal(Exception):
    pass


def require(condition, message):
    if not condition:
        raise Refusal(message)


def tensor_bytes(path):
    """{name: bytes} of the tensors of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n :]
    return {k: body[v["data_offsets"][0] : v["data_offsets"][1]] for k, v in header.items()}


def model_files(d):
    names = sorted(os.listdir(d))
    shards = [n for n in names if SHARD.match(n)]
    return [os.path.join(d, n) for n in (shards or ["model.safetensors"])]


def same_tensors(d, other):
    mine, theirs = {}, {}
    for held, directory in ((mine, d), (theirs, other)):
        for path in model_files(directory):
            held.update(tensor_bytes(path))
    require(sorted(mine) == sorted(theirs), f"{d} and {other} hold different tensors")
    for name in sorted(mine):
        require(mine[name] == theirs[name], f"{name} differs between {d} and {other}")
    return f"the parameters equal those of {other}, bit for bit"


def read_header(path):
    """The tensors {name: (dtype, shape, nbytes)} and metadata of a file."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        require(len(raw) == 8, f"{path}: shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", raw)
        require(8 + n <= size, f"{path}: a header of {n} bytes past the end")
        header = json.loads(f.read(n))
    data = size - 8 - n
    metadata = header.pop("__metadata__", {})
    tensors, spans = {}, []
    for name, info in header.items():
        dtype, shape = info["dtype"], info["shape"]
        begin, end = info["data_offsets"]
        require(dtype in DTYPE_BYTES, f"{path}: {name} has dtype {dtype}")
        nbytes = DTYPE_BYTES[dtype] * math.prod(shape)
        require(end - begin == nbytes, f"{path}: {name} spans {end - begin} bytes, not {nbytes}")
        tensors[name] = (dtype, list(shape), nbytes)
        spans.append((begin, end))
    # The tensors tile the data section.
    at = 0
    for begin, end in sorted(spans):
        require(begin == at, f"{path}: data bytes [{at}, {begin}) belong to no tensor")
        at = end
    require(at == data, f"{path}: {data - at} trailing data bytes")
    return tensors, metadata


def llama_tensors(c):
    d, v, f = c["hidden_size"], c["vocab_size"], c["intermediate_size"]
    heads, kv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim") or d // heads
    experts = c.get("num_local_experts")  # Mixtral
    want = {"model.embed_tokens.weight": [v, d], "model.norm.weight": [d]}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        want[p + "input_layernorm.weight"] = [d]
        want[p + "post_attention_layernorm.weight"] = [d]
        for name, out, inp in (("q_proj", heads * hd, d), ("k_proj", kv * hd, d),
                               ("v_proj", kv * hd, d), ("o_proj", d, heads * hd)):
            want[p + "self_attn." + name + ".weight"] = [out, inp]
            if c.get("attention_bias"):
                want[p + "self_attn." + name + ".bias"] = [out]
        if experts:
            want[p + "block_sparse_moe.gate.weight"] = [experts, d]
            for e in range(experts):
                for name, out, inp in (("w1", f, d), ("w3", f, d), ("w2", d, f)):
                    want[p + f"block_sparse_moe.experts.{e}.{name}.weight"] = [out, inp]
            continue
        for name, out, inp in (("gate_proj", f, d), ("up_proj", f, d), ("down_proj", d, f)):
            want[p + "mlp." + name + ".weight"] = [out, inp]
            if c.get("mlp_bias"):
                want[p + "mlp." + name + ".bias"] = [out]
    return want, {"lm_head.weight": [v, d]}


def gpt2_tensors(c):
    d, v, n = c["n_embd"], c["vocab_size"], c["n_positions"]
    f = c.get("n_inner") or 4 * d
    want = {"transformer.wte.weight": [v, d], "transformer.wpe.weight": [n, d],
            "transformer.ln_f.weight": [d], "transformer.ln_f.bias": [d]}
    for i in range(c["n_layer"]):
        p = f"transformer.h.{i}."
        for ln in ("ln_1", "ln_2"):
            want[p + ln + ".weight"] = [d]
            want[p + ln + ".bias"] = [d]
        # Conv1D stores [in, out].
        for name, inp, out in (("attn.c_attn", d, 3 * d), ("attn.c_proj", d, d),
                               ("mlp.c_fc", d, f), ("mlp.c_proj", f, d)):
            want[p + name + ".weight"] = [inp, out]
            want[p + name + ".bias"] = [out]
    return want, {"lm_head.weight": [v, d]}


def check_config(c):
    kind = c.get("model_type")
    require(kind in ("llama", "gpt2", "mixtral"), f"config.json: model_type {kind!r}")
    arch = {"llama": "LlamaForCausalLM", "gpt2": "GPT2LMHeadModel",
            "mixtral": "MixtralForCausalLM"}[kind]
    require(c.get("architectures") == [arch], f"config.json: architectures {c.get('architectures')}")
    require(c.get("torch_dtype") == "float32", "config.json: torch_dtype is not float32")
    if kind == "mixtral":
        require(c["hidden_act"] == "silu", "config.json: hidden_act is not silu")
        require(1 <= c["num_experts_per_tok"] <= c["num_local_experts"],
                "config.json: num_experts_per_tok")
        require(c["hidden_size"] % c["num_attention_heads"] == 0,
                "config.json: num_attention_heads does not divide hidden_size")
    elif kind == "llama":
        require(c["hidden_act"] == "silu", "config.json: hidden_act is not silu")
        require(c["hidden_size"] == c["head_dim"] * c["num_attention_heads"],
                "config.json: head_dim * num_attention_heads != hidden_size")
        require(c["num_attention_heads"] % c["num_key_value_heads"] == 0,
                "config.json: num_key_value_heads does not divide num_attention_heads")
        require(c["rms_norm_eps"] > 0 and c["rope_theta"] > 0, "config.json: eps or rope_theta")
    else:
        require(c["activation_function"] == "gelu_new", "config.json: activation is not gelu_new")
        require(c["n_embd"] % c["n_head"] == 0, "config.json: n_head does not divide n_embd")
        require(c["n_ctx"] == c["n_positions"], "config.json: n_ctx != n_positions")
        require(c["layer_norm_epsilon"] > 0, "config.json: layer_norm_epsilon")
    return kind


def read_weights(d):
    """{name: (dtype, shape, nbytes)} over the model files, and a description."""
    names = sorted(os.listdir(d))
    index_path = os.path.join(d, "model.safetensors.index.json")
    shards = [n for n in names if SHARD.match(n)]
    if not os.path.exists(index_path):
        require(not shards, f"shards {shards} without model.safetensors.index.json")
        tensors, metadata = read_header(os.path.join(d, "model.safetensors"))
        require(metadata.get("format") == "pt", "model.safetensors: metadata format is not pt")
        return tensors, "model.safetensors"
    require("model.safetensors" not in names, "both model.safetensors and an index")
    with open(index_path) as f:
        index = json.load(f)
    weight_map = index["weight_map"]
    total = index["metadata"]["total_size"]
    require(isinstance(total, int), "index: total_size is not an integer")
    counts = {int(SHARD.match(s).group(2)) for s in shards}
    require(len(counts) == 1, f"shards of different counts: {shards}")
    (count,) = counts
    require(shards == [f"model-{k:05d}-of-{count:05d}.safetensors" for k in range(1, count + 1)],
            f"shards {shards} are not 1..{count}")
    require(count > 1, "an index for a single shard (transformers writes model.safetensors)")
    require(set(weight_map.values()) == set(shards),
            f"index names {sorted(set(weight_map.values()))}, the directory holds {shards}")
    tensors, size = {}, 0
    for shard in shards:
        held, metadata = read_header(os.path.join(d, shard))
        require(metadata.get("format") == "pt", f"{shard}: metadata format is not pt")
        for name, info in held.items():
            require(name not in tensors, f"{name} is stored twice")
            require(weight_map.get(name) == shard,
                    f"{shard} holds {name}, which the index maps to {weight_map.get(name)}")
            tensors[name] = info
            size += info[2]
    require(set(weight_map) == set(tensors),
            f"index maps {sorted(set(weight_map) - set(tensors))} to shards that lack them")
    require(total == size, f"index total_size {total}, the shards hold {size} bytes")
    return tensors, f"{count} shards, total_size {total}"


def next_loss(torch, model, d, log, data):
    """The loss of the step after the checkpoint's, as transformers computes
    it, and the one braid-run logged."""
    _, meta = read_header(os.path.join(d, "optimizer.safetensors"))
    step = int(meta["step"])
    batch = int(meta["plan.train.micro_batch_size"])
    sequences = int(meta["plan.train.global_batch_size"])
    seq = int(meta["plan.train.seq_len"])
    require(meta["shuffle"] == "false", "--next-loss needs a run without --shuffle")
    with open(log) as f:
        logged = {e["step"]: e["loss"] for e in map(json.loads, f)}
    require(step + 1 in logged, f"{log} has no step {step + 1}")
    with open(data, "rb") as f:
        tokens = f.read()
    windows = (len(tokens) - 1) // seq
    losses = []
    for m in range(sequences // batch):
        first = step * sequences + m * batch
        rows = [tokens[w * seq : w * seq + seq + 1]
                for w in ((first + b) % windows for b in range(batch))]
        x = torch.tensor([list(r) for r in rows])
        with torch.no_grad():
            logits = model(x[:, :-1]).logits
        losses.append(torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).double(), x[:, 1:].reshape(-1)).item())
    return step + 1, sum(losses) / len(losses), logged[step + 1]


def check_with_transformers(d, config, loss_of):
    try:
        import torch
        import transformers
    except ImportError:
        return "transformers: not installed, skipped"
    model, info = transformers.AutoModelForCausalLM.from_pretrained(d, output_loading_info=True)
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        require(not info.get(key), f"transformers: {key} {info.get(key)}")
    model.eval()
    vocab = config["vocab_size"]
    tokens = torch.arange(8).reshape(1, 8) % vocab
    with torch.no_grad():
        logits = model(tokens).logits
    require(list(logits.shape) == [1, 8, vocab], f"transformers: logits of shape {list(logits.shape)}")
    require(bool(torch.isfinite(logits).all()), "transformers: logits are not finite")
    said = f"transformers: loaded {type(model).__name__}, no missing or unexpected keys, finite logits"
    if loss_of:
        step, got, want = next_loss(torch, model, d, *loss_of)
        require(abs(got - want) <= 1e-5 * abs(want),
                f"transformers: the loss of step {step} is {got!r}, braid-run logged {want!r}")
        said += f"; the loss of step {step} is braid-run's"
    return said


def main():
    args = sys.argv[1:]
    loss_of = None
    if len(args) == 3 and args[1] == "--same-tensors":
        try:
            print(same_tensors(args[0], args[2]))
        except (Refusal, OSError, ValueError) as e:
            print(f"check_hf_checkpoint: {e}")
            sys.exit(1)
        return
    if len(args) == 4 and args[1] == "--next-loss":
        loss_of = args[2:]
    elif len(args) != 1:
        sys.exit(__doc__)
    d = args[0]
    try:
        with open(os.path.join(d, "config.json")) as f:
            config = json.load(f)
        kind = check_config(config)
        want, tied = (gpt2_tensors if kind == "gpt2" else llama_tensors)(config)
        if not config.get("tie_word_embeddings", kind == "gpt2"):
            want.update(tied)
            tied = {}
        tensors, layout = read_weights(d)
        for name, shape in sorted(want.items()):
            require(name in tensors, f"missing {name}")
            dtype, stored, _ = tensors[name]
            require(dtype == "F32", f"{name} is {dtype}, not F32")
            require(stored == shape, f"{name} has shape {stored}, {kind} expects {shape}")
        for name in sorted(tensors):
            if name in tied:
                require(tensors[name][1] == tied[name], f"tied {name} has shape {tensors[name][1]}")
            else:
                require(name in want, f"unexpected {name}")
        print(f"{kind}: {len(tensors)} tensors as {config['architectures'][0]} expects, in {layout}")
        print(check_with_transformers(d, config, loss_of))
    except Refusal as e:
        print(f"check_hf_checkpoint: {d}: {e}")
        sys.exit(1)
    except (KeyError, ValueError, OSError) as e:
        print(f"check_hf_checkpoint: {d}: {e!r}")
        sys.exit(1)


if __name__ == "__main__":
    main()
