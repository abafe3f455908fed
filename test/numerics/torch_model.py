"""The model a Braid spec describes, in PyTorch.

This module is the PyTorch side of docs/numerics.md: it reads a model spec
(protobuf text format, typed by compiler/spec/spec.proto), builds the Llama or
GPT-2 model of the spec with Hugging Face parameter names and Braid's
`[out, in]` linear weights, gives it Braid's initial weights and applies
Braid's dropout masks. The random functions re-implement
kernels/common/Random.h bit for bit.

Used by torch_reference.py (the goldens) and test/bench/torch_step.py (the
CPU peer). Needs only torch and numpy.
"""

import codecs
import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SPEC_PROTO = Path(__file__).resolve().parents[2] / "compiler" / "spec" / "spec.proto"

# ---------------------------------------------------------------------------
# Protobuf text format, typed by a .proto schema
# ---------------------------------------------------------------------------


class SpecError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Field:
    name: str
    type: str
    repeated: bool


class Schema:
    """Messages and enums of a proto3 file without nested declarations."""

    def __init__(self, proto_text):
        text = re.sub(r"//[^\n]*", "", proto_text)
        self.messages = {}
        self.enums = {}
        for kind, name, body in self._blocks(text):
            if kind == "message":
                fields = {}
                for m in re.finditer(r"(repeated\s+)?([\w.]+)\s+(\w+)\s*=\s*\d+\s*;", body):
                    fields[m.group(3)] = Field(m.group(3), m.group(2), bool(m.group(1)))
                self.messages[name] = fields
            else:
                values = {}
                for m in re.finditer(r"(\w+)\s*=\s*(-?\d+)\s*;", body):
                    values[m.group(1)] = int(m.group(2))
                self.enums[name] = values

    @staticmethod
    def _blocks(text):
        for m in re.finditer(r"\b(message|enum)\s+(\w+)\s*\{", text):
            body_start = m.end()
            close = text.index("}", body_start)
            if "{" in text[body_start:close]:
                raise SpecError(f"{m.group(2)}: nested declarations are not supported")
            yield m.group(1), m.group(2), text[body_start:close]


class Message:
    """A parsed message: set fields as given, unset ones at proto3 defaults."""

    def __init__(self, schema, type_name, values):
        self._schema = schema
        self._type = type_name
        self._values = values

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        field = self._schema.messages[self._type].get(name)
        if field is None:
            raise AttributeError(f"{self._type} has no field {name}")
        if name in self._values:
            return self._values[name]
        if field.repeated:
            return []
        return _default(self._schema, field.type)


_INT_TYPES = {"int32", "int64", "uint32", "uint64", "sint32", "sint64",
              "fixed32", "fixed64", "sfixed32", "sfixed64"}


def _default(schema, type_name):
    if type_name in _INT_TYPES:
        return 0
    if type_name in ("float", "double"):
        return 0.0
    if type_name == "bool":
        return False
    if type_name in ("string", "bytes"):
        return ""
    if type_name in schema.enums:
        return next(n for n, v in schema.enums[type_name].items() if v == 0)
    return Message(schema, type_name, {})


_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\n]+) | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)[fF]?)
  | (?P<ident>-?[A-Za-z_][\w.]*)
  | (?P<punct>[{}<>:;,\[\]])
""", re.VERBOSE)


class _Tokens:
    def __init__(self, text, path):
        self.path = path
        self.items = []  # (kind, text, line, column)
        pos, line, line_start = 0, 1, 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                column = pos - line_start + 1
                raise SpecError(f"{path}:{line}:{column}: unexpected character {text[pos]!r}")
            if m.lastgroup not in ("space", "comment"):
                self.items.append((m.lastgroup, m.group(), line, pos - line_start + 1))
            for i, c in enumerate(m.group()):
                if c == "\n":
                    line, line_start = line + 1, pos + i + 1
            pos = m.end()
        self.items.append(("end", "", line, pos - line_start + 1))
        self.i = 0

    def peek(self):
        return self.items[self.i]

    def next(self):
        token = self.items[self.i]
        if self.i < len(self.items) - 1:
            self.i += 1
        return token

    def accept(self, text):
        if self.peek()[1] == text and self.peek()[0] == "punct":
            self.next()
            return True
        return False

    def error(self, token, message):
        return SpecError(f"{self.path}:{token[2]}:{token[3]}: {message}")

    def expect(self, text):
        token = self.next()
        if token[1] != text:
            raise self.error(token, f"expected '{text}', found '{token[1] or 'end of file'}'")


def parse_text_format(text, schema, type_name, path="<spec>"):
    return _parse_fields(_Tokens(text, path), schema, type_name, end=None)


def _parse_fields(tokens, schema, type_name, end):
    fields = schema.messages[type_name]
    values = {}
    while True:
        token = tokens.next()
        if end is None and token[0] == "end":
            return Message(schema, type_name, values)
        if end is not None and token[1] == end and token[0] == "punct":
            return Message(schema, type_name, values)
        if token[0] != "ident":
            found = token[1] or "end of file"
            raise tokens.error(token, f"expected a field name of {type_name}, found '{found}'")
        field = fields.get(token[1])
        if field is None:
            raise tokens.error(token, f"{type_name} has no field '{token[1]}'")
        if field.type in schema.messages:
            tokens.accept(":")
            items = [_parse_submessage(tokens, schema, field.type)]
        else:
            tokens.expect(":")
            if tokens.accept("["):
                items = []
                while not tokens.accept("]"):
                    items.append(_parse_scalar(tokens, schema, field))
                    tokens.accept(",")
            else:
                items = [_parse_scalar(tokens, schema, field)]
        if field.repeated:
            values.setdefault(field.name, []).extend(items)
        elif field.name in values or len(items) != 1:
            raise tokens.error(token, f"field '{field.name}' is given more than once")
        else:
            values[field.name] = items[0]
        if not tokens.accept(","):
            tokens.accept(";")


def _parse_submessage(tokens, schema, type_name):
    token = tokens.next()
    closers = {"{": "}", "<": ">"}
    if token[1] not in closers:
        raise tokens.error(token, f"expected '{{' to open a {type_name}, found '{token[1]}'")
    return _parse_fields(tokens, schema, type_name, end=closers[token[1]])


def _parse_scalar(tokens, schema, field):
    token = tokens.next()
    kind, text = token[0], token[1]
    t = field.type
    if t in _INT_TYPES:
        if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", text):
            value = int(text, 16)
        elif re.fullmatch(r"[-+]?0[0-7]+", text):
            value = int(text, 8)
        elif re.fullmatch(r"[-+]?\d+", text):
            value = int(text, 10)
        else:
            raise tokens.error(token, f"'{field.name}' needs an integer, found '{text}'")
        bits = 32 if t.endswith("32") else 64
        if t.startswith(("uint", "fixed")):
            lo, hi = 0, 2**bits - 1
        else:
            lo, hi = -(2**(bits - 1)), 2**(bits - 1) - 1
        if not lo <= value <= hi:
            raise tokens.error(token, f"'{field.name}' is out of range for {t}: {text}")
        return value
    if t in ("float", "double"):
        if kind == "number" and not re.match(r"[-+]?0[xX]", text):
            value = float(text.rstrip("fF"))
        elif kind == "ident" and text.lstrip("-").lower() in ("inf", "infinity", "nan"):
            value = float(text)
        else:
            raise tokens.error(token, f"'{field.name}' needs a number, found '{text}'")
        # A proto float holds a single-precision value; use exactly that value.
        return float(np.float32(value)) if t == "float" else value
    if t == "bool":
        if text in ("true", "True", "t", "1"):
            return True
        if text in ("false", "False", "f", "0"):
            return False
        raise tokens.error(token, f"'{field.name}' needs true or false, found '{text}'")
    if t in ("string", "bytes"):
        if kind != "string":
            raise tokens.error(token, f"'{field.name}' needs a quoted string, found '{text}'")
        parts = [text[1:-1]]
        while tokens.peek()[0] == "string":
            parts.append(tokens.next()[1][1:-1])
        return codecs.escape_decode("".join(parts).encode("utf-8"))[0].decode("utf-8")
    if t in schema.enums:
        values = schema.enums[t]
        if kind == "ident" and text in values:
            return text
        if kind == "number" and re.fullmatch(r"-?\d+", text):
            names = [n for n, v in values.items() if v == int(text)]
            if names:
                return names[0]
        names = ", ".join(values)
        raise tokens.error(token, f"'{field.name}' needs one of {names}, found '{text}'")
    raise tokens.error(token, f"field type '{t}' of '{field.name}' is not supported")


# ---------------------------------------------------------------------------
# The configuration of one spec
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MoeConfig:
    """model.moe with the defaults Braid gives it (docs/moe.md)."""
    naming: str  # "HF_MIXTRAL" or "HF_DEEPSEEK_V3"
    num_experts: int
    top_k: int
    expert_ffn_hidden_size: int
    sigmoid: bool
    normalize_top_k: bool
    routed_scaling_factor: float
    aux_loss_coeff: float
    z_loss_coeff: float
    expert_bias: bool
    expert_bias_update_rate: float
    num_shared_experts: int
    shared_ffn_hidden_size: int
    first_k_dense: int

    def is_moe_layer(self, layer):
        return layer >= self.first_k_dense


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    name: str
    family: str  # "llama" or "gpt2"
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    ffn_hidden_size: int
    norm_eps: float
    max_position_embeddings: int
    rope_theta: float
    tie_embeddings: bool
    linear_bias: bool
    init_std: float
    scaled_residual: bool
    moe: "MoeConfig | None" = None

    @property
    def head_dim(self):
        return self.hidden_size // self.num_heads


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    seed: int
    micro_batch_size: int
    global_batch_size: int
    seq_len: int
    steps: int
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    grad_clip: float
    warmup_steps: int
    decay: str
    min_lr: float
    hidden_dropout: float
    attention_dropout: float

    @property
    def micro_batches(self):
        return self.global_batch_size // self.micro_batch_size

    def learning_rate(self, step):
        """The learning rate of optimizer step `step` (1-based), in double."""
        if step <= self.warmup_steps:
            return self.lr * step / self.warmup_steps
        if self.decay == "CONSTANT":
            return self.lr
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.steps - self.warmup_steps))
        return self.min_lr + 0.5 * (self.lr - self.min_lr) * (1.0 + math.cos(math.pi * progress))


_FAMILIES = {
    ("RMS_NORM", "SWIGLU", "ROPE", "HF_LLAMA"): "llama",
    ("RMS_NORM", "SWIGLU", "ROPE", "HF_MIXTRAL"): "llama",
    ("RMS_NORM", "SWIGLU", "ROPE", "HF_DEEPSEEK_V3"): "llama",
    ("LAYER_NORM", "GELU", "LEARNED", "HF_GPT2"): "gpt2",
}


def load_spec(path):
    """Reads a model spec file into (ModelConfig, TrainConfig)."""
    schema = Schema(SPEC_PROTO.read_text())
    spec = parse_text_format(Path(path).read_text(), schema, "ModelSpec", str(path))
    m, t = spec.model, spec.train

    def check(ok, message):
        if not ok:
            raise SpecError(f"{path}: {message}")

    key = (m.norm, m.activation, m.position_embedding, m.naming)
    check(key in _FAMILIES, "norm, activation, position_embedding and naming must be "
          "RMS_NORM, SWIGLU, ROPE, HF_LLAMA (Llama) or LAYER_NORM, GELU, LEARNED, HF_GPT2 (GPT-2); "
          f"found {', '.join(key)}")
    moe = None
    if m.moe.num_experts > 0:
        x = m.moe
        check(m.naming in ("HF_MIXTRAL", "HF_DEEPSEEK_V3"),
              "a model with moe needs naming HF_MIXTRAL or HF_DEEPSEEK_V3")
        for field in ("capacity_factor",):
            check(not getattr(x, field), f"model.moe.{field} has no reference here yet")
        expert_ffn = x.expert_ffn_hidden_size or m.ffn_hidden_size
        moe = MoeConfig(
            naming=m.naming, num_experts=x.num_experts, top_k=x.top_k,
            expert_ffn_hidden_size=expert_ffn, sigmoid=x.score == "SIGMOID",
            normalize_top_k=x.normalize_top_k,
            routed_scaling_factor=x.routed_scaling_factor or 1.0,
            aux_loss_coeff=x.aux_loss_coeff, z_loss_coeff=x.z_loss_coeff,
            expert_bias=x.expert_bias, expert_bias_update_rate=x.expert_bias_update_rate,
            num_shared_experts=x.num_shared_experts,
            shared_ffn_hidden_size=x.shared_ffn_hidden_size or expert_ffn,
            first_k_dense=x.first_k_dense)
    model = ModelConfig(
        name=spec.name, family=_FAMILIES[key], vocab_size=m.vocab_size,
        hidden_size=m.hidden_size, num_layers=m.num_layers, num_heads=m.num_heads,
        num_kv_heads=m.num_kv_heads or m.num_heads, ffn_hidden_size=m.ffn_hidden_size,
        norm_eps=m.norm_eps, max_position_embeddings=m.max_position_embeddings,
        rope_theta=m.rope_theta, tie_embeddings=m.tie_embeddings, linear_bias=m.linear_bias,
        init_std=m.init.std, scaled_residual=m.init.scaled_residual, moe=moe)
    train = TrainConfig(
        seed=t.seed, micro_batch_size=t.micro_batch_size, global_batch_size=t.global_batch_size,
        seq_len=t.seq_len, steps=t.steps, lr=t.adamw.lr, beta1=t.adamw.beta1,
        beta2=t.adamw.beta2, eps=t.adamw.eps, weight_decay=t.adamw.weight_decay,
        grad_clip=t.grad_clip, warmup_steps=t.lr_schedule.warmup_steps,
        decay=t.lr_schedule.decay, min_lr=t.lr_schedule.min_lr,
        hidden_dropout=t.hidden_dropout, attention_dropout=t.attention_dropout)

    for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "ffn_hidden_size"):
        check(getattr(model, name) > 0, f"model.{name} must be positive")
    check(model.hidden_size % model.num_heads == 0,
          "model.hidden_size must be a multiple of num_heads")
    check(model.num_heads % model.num_kv_heads == 0,
          "model.num_heads must be a multiple of num_kv_heads")
    check(model.family != "llama" or model.head_dim % 2 == 0, "RoPE needs an even head dimension")
    check(model.family != "gpt2" or t.seq_len <= model.max_position_embeddings,
          "train.seq_len exceeds model.max_position_embeddings")
    check(train.micro_batch_size > 0 and train.seq_len > 0,
          "train.micro_batch_size and seq_len must be positive")
    check(train.global_batch_size % train.micro_batch_size == 0 and train.global_batch_size > 0,
          "train.global_batch_size must be a positive multiple of micro_batch_size")
    check(0.0 <= train.hidden_dropout < 1.0 and 0.0 <= train.attention_dropout < 1.0,
          "dropout probabilities must lie in [0, 1)")
    return model, train


# ---------------------------------------------------------------------------
# kernels/common/Random.h, bit for bit
# ---------------------------------------------------------------------------

GOLDEN = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1
_U64 = np.uint64


def mix64(z):
    """The splitmix64 finaliser, elementwise over a uint64 array, or of one int."""
    if isinstance(z, int):
        return int(mix64(np.array([z], dtype=_U64))[0])
    with np.errstate(over="ignore"):
        z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
        return z ^ (z >> _U64(31))


def draw(key, n):
    """Outputs n (a uint64 array) of the splitmix64 sequence starting at key."""
    with np.errstate(over="ignore"):
        return mix64(_U64(key) + (np.asarray(n, dtype=_U64) + _U64(1)) * _U64(GOLDEN))


def derive(key, tag):
    return mix64(key ^ mix64((tag + GOLDEN) & _MASK64))


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & _MASK64
    return h


def parameter_key(seed, name):
    return mix64(seed ^ fnv1a64(name))


def dropout_key(seed, rng_offset, step, micro_batch):
    key = derive(seed, 0x44524F50)  # "DROP"
    for tag in (rng_offset, step, micro_batch):
        key = derive(key, tag & _MASK64)
    return key


def shuffle_key(seed, epoch):
    return derive(derive(seed, 0x53485546), epoch & _MASK64)  # "SHUF"


def uniform24(key, count):
    """Uniform draws 0..count-1 of key in [0, 1), float32 (exact)."""
    bits = draw(key, np.arange(count, dtype=_U64)) >> _U64(40)
    return bits.astype(np.float32) * np.float32(1.0 / 16777216.0)


def normal(key, count):
    """Normal draws 0..count-1 of key (Box-Muller), float64.

    log and cos come from the C library through `math`, as std::log and
    std::cos do in Random.h: numpy's vectorised versions differ in the last
    bit for a fraction of inputs.
    """
    i = np.arange(count, dtype=_U64)
    u1 = ((draw(key, _U64(2) * i) >> _U64(11)).astype(np.float64) + 1.0) * 2.0**-53
    u2 = (draw(key, _U64(2) * i + _U64(1)) >> _U64(11)).astype(np.float64) * 2.0**-53
    log_u1 = np.fromiter(map(math.log, u1.tolist()), np.float64, count)
    cos_u2 = np.fromiter(map(math.cos, (2.0 * math.pi * u2).tolist()), np.float64, count)
    return np.sqrt(-2.0 * log_u1) * cos_u2


# ---------------------------------------------------------------------------
# Dropout with Braid's masks
# ---------------------------------------------------------------------------


class BraidDropout:
    """The dropout masks of one micro-batch of one optimizer step (1-based)."""

    def __init__(self, seed, step, micro_batch):
        self.seed, self.step, self.micro_batch = seed, step, micro_batch

    def __call__(self, x, p, site):
        p32 = np.float32(p)
        key = dropout_key(self.seed, site, self.step, self.micro_batch)
        keep = uniform24(key, x.numel()) >= p32
        scale = np.float32(1.0) / (np.float32(1.0) - p32)
        mask = np.where(keep, scale, np.float32(0.0)).astype(np.float32)
        return x * torch.from_numpy(mask).view(x.shape).to(x.dtype)


def torch_dropout(x, p, site):
    """PyTorch's own dropout: same statistics, different masks (benchmarks)."""
    return F.dropout(x, p, training=True)


def _no_dropout(x, p, site):
    raise ValueError("the spec asks for dropout: pass dropout=BraidDropout(...) or torch_dropout")


# ---------------------------------------------------------------------------
# The models
# ---------------------------------------------------------------------------


def _causal_attention(q, k, v, causal_mask, p, dropout, site):
    """q, k, v: [B, H, S, Dh]. Probabilities dropped per element ((b*H+h)*S+i)*S+j."""
    seq = q.shape[-2]
    scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    scores = scores.masked_fill(causal_mask[:seq, :seq], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if p > 0:
        probs = dropout(probs, p, site)
    return torch.matmul(probs, v)


def _causal_mask(size):
    return torch.ones(size, size, dtype=torch.bool).triu(1)


class RMSNorm(nn.Module):
    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(seq_len, head_dim, theta):
    """cos and sin [seq_len, head_dim] of the rotate-half layout: angle
    s * theta^(-2i/Dh) in double, rounded to float; cos and sin of that float
    angle rounded to float; C library functions, as C++ calls them."""
    half = head_dim // 2
    freq = [math.pow(theta, -2.0 * i / head_dim) for i in range(half)]
    angle = [float(np.float32(s * f)) for s in range(seq_len) for f in freq]
    cos = np.array([math.cos(a) for a in angle], dtype=np.float32).reshape(seq_len, half)
    sin = np.array([math.sin(a) for a in angle], dtype=np.float32).reshape(seq_len, half)
    return (torch.from_numpy(np.concatenate([cos, cos], axis=1)),
            torch.from_numpy(np.concatenate([sin, sin], axis=1)))


def _rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = c.num_heads, c.num_kv_heads, c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, c.num_heads * c.head_dim, bias=c.linear_bias)
        self.k_proj = nn.Linear(c.hidden_size, c.num_kv_heads * c.head_dim, bias=c.linear_bias)
        self.v_proj = nn.Linear(c.hidden_size, c.num_kv_heads * c.head_dim, bias=c.linear_bias)
        self.o_proj = nn.Linear(c.num_heads * c.head_dim, c.hidden_size, bias=c.linear_bias)

    def forward(self, x, cos, sin, causal_mask, p, dropout, site):
        batch, seq, _ = x.shape
        q = self.q_proj(x).view(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, seq, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, seq, self.num_kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        groups = self.num_heads // self.num_kv_heads
        if groups > 1:
            k = k.repeat_interleave(groups, dim=1)
            v = v.repeat_interleave(groups, dim=1)
        out = _causal_attention(q, k, v, causal_mask, p, dropout, site)
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, -1))


class LlamaMLP(nn.Module):
    """gate_proj, up_proj, down_proj; Mixtral's experts name them w1, w3, w2."""

    def __init__(self, c, width=None, names=("gate_proj", "up_proj", "down_proj")):
        super().__init__()
        width = width or c.ffn_hidden_size
        self._names = names
        setattr(self, names[0], nn.Linear(c.hidden_size, width, bias=c.linear_bias))
        setattr(self, names[1], nn.Linear(c.hidden_size, width, bias=c.linear_bias))
        setattr(self, names[2], nn.Linear(width, c.hidden_size, bias=c.linear_bias))

    def forward(self, x):
        gate, up, down = (getattr(self, n) for n in self._names)
        return down(F.silu(gate(x)) * up(x))


class MoeBlock(nn.Module):
    """A dropless mixture-of-experts layer (docs/moe.md): `gate` is the
    router [E, D]; each token goes to the top_k experts by score (softmax
    or sigmoid), weighted by their scores (normalised over the chosen with
    normalize_top_k, times routed_scaling_factor); shared experts, one MLP
    num_shared_experts times as wide, run beside. forward leaves the
    layer's balancing losses (Switch's load balancing, ST-MoE's z-loss) in
    side_loss: the training loss adds them, the reported loss does not."""

    def __init__(self, c):
        super().__init__()
        m = c.moe
        self.moe = m
        self.gate = nn.Linear(c.hidden_size, m.num_experts, bias=False)
        names = (("w1", "w3", "w2") if m.naming == "HF_MIXTRAL"
                 else ("gate_proj", "up_proj", "down_proj"))
        self.experts = nn.ModuleList(LlamaMLP(c, m.expert_ffn_hidden_size, names)
                                     for _ in range(m.num_experts))
        if m.num_shared_experts > 0:
            self.shared_experts = LlamaMLP(c, m.num_shared_experts * m.shared_ffn_hidden_size)
        if m.expert_bias:
            # DeepSeek-V3's name; a state, not a parameter. `load` counts the
            # step's choices of each expert.
            self.gate.register_buffer("e_score_correction_bias", torch.zeros(m.num_experts))
            self.register_buffer("load", torch.zeros(m.num_experts, dtype=torch.float64),
                                 persistent=False)

    def forward(self, x):
        m = self.moe
        logits = self.gate(x)
        scores = torch.sigmoid(logits) if m.sigmoid else torch.softmax(logits, dim=-1)
        if m.expert_bias:
            bias = self.gate.e_score_correction_bias
            chosen = torch.topk(scores + bias, m.top_k, dim=-1).indices
            with torch.no_grad():
                self.load += torch.bincount(chosen.reshape(-1),
                                            minlength=m.num_experts).double()
        else:
            chosen = torch.topk(scores, m.top_k, dim=-1).indices
        weights = scores.gather(-1, chosen)
        if m.normalize_top_k:
            weights = weights / weights.sum(-1, keepdim=True)
        weights = weights * m.routed_scaling_factor
        self.side_loss = self.balancing_loss(logits, scores, chosen)
        flat, out = x.reshape(-1, x.shape[-1]), torch.zeros_like(x).reshape(-1, x.shape[-1])
        chosen, weights = chosen.reshape(-1, m.top_k), weights.reshape(-1, m.top_k)
        for e, expert in enumerate(self.experts):
            token, slot = (chosen == e).nonzero(as_tuple=True)
            if token.numel():
                y = expert(flat[token]) * weights[token, slot].unsqueeze(-1)
                out = out.index_add(0, token, y)
        out = out.reshape(x.shape)
        if m.num_shared_experts > 0:
            out = out + self.shared_experts(x)
        return out


    @torch.no_grad()
    def update_bias(self):
        """After the optimizer step: each expert's bias moves by the rate
        towards the mean load (up when chosen fewer times, down when more),
        in double, then the load restarts."""
        if not self.moe.expert_bias:
            return
        step = self.moe.expert_bias_update_rate * torch.sign(self.load.mean() - self.load)
        bias = self.gate.e_score_correction_bias
        bias.copy_((bias.double() + step).to(bias.dtype))
        self.load.zero_()

    def balancing_loss(self, logits, scores, chosen):
        m = self.moe
        loss = logits.new_zeros(())
        tokens = logits.shape[0] * logits.shape[1]
        if m.aux_loss_coeff > 0:
            counts = torch.zeros(m.num_experts, dtype=scores.dtype)
            counts = counts.index_add(0, chosen.reshape(-1),
                                      torch.ones(chosen.numel(), dtype=scores.dtype))
            q = scores / scores.sum(-1, keepdim=True) if m.sigmoid else scores
            loss = loss + (m.aux_loss_coeff * m.num_experts / (m.top_k * tokens * tokens)
                           * (q.reshape(-1, m.num_experts).sum(0) * counts).sum())
        if m.z_loss_coeff > 0:
            lse = torch.logsumexp(logits.reshape(-1, m.num_experts), dim=-1)
            loss = loss + m.z_loss_coeff * (lse * lse).sum() / tokens
        return loss


class LlamaDecoderLayer(nn.Module):
    def __init__(self, c, layer=0):
        super().__init__()
        self.self_attn = LlamaAttention(c)
        moe = c.moe is not None and c.moe.is_moe_layer(layer)
        if moe and c.moe.naming == "HF_MIXTRAL":
            self.block_sparse_moe = MoeBlock(c)
        else:
            self.mlp = MoeBlock(c) if moe else LlamaMLP(c)
        self.input_layernorm = RMSNorm(c.hidden_size, c.norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.norm_eps)


class LlamaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(c, l) for l in range(c.num_layers))
        self.norm = RMSNorm(c.hidden_size, c.norm_eps)


class LlamaForCausalLM(nn.Module):
    """Llama with Hugging Face's parameter names: model.*, lm_head.weight."""

    def __init__(self, c, train, max_seq_len):
        super().__init__()
        self.config, self.train_config = c, train
        self.model = LlamaModel(c)
        if not c.tie_embeddings:
            self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        cos, sin = rope_tables(max_seq_len, c.head_dim, c.rope_theta)
        dtype = torch.get_default_dtype()
        self.register_buffer("rope_cos", cos.to(dtype), persistent=False)
        self.register_buffer("rope_sin", sin.to(dtype), persistent=False)
        self.register_buffer("causal_mask", _causal_mask(max_seq_len), persistent=False)

    def forward(self, tokens, dropout=_no_dropout):
        seq = tokens.shape[1]
        p_hidden, p_attn = self.train_config.hidden_dropout, self.train_config.attention_dropout
        cos, sin = self.rope_cos[:seq], self.rope_sin[:seq]
        x = self.model.embed_tokens(tokens)
        if p_hidden > 0:
            x = dropout(x, p_hidden, 0)
        for l, layer in enumerate(self.model.layers):
            a = layer.self_attn(layer.input_layernorm(x), cos, sin, self.causal_mask,
                                p_attn, dropout, 1 + 3 * l)
            x = x + (dropout(a, p_hidden, 2 + 3 * l) if p_hidden > 0 else a)
            mlp = layer.block_sparse_moe if hasattr(layer, "block_sparse_moe") else layer.mlp
            f = mlp(layer.post_attention_layernorm(x))
            x = x + (dropout(f, p_hidden, 3 + 3 * l) if p_hidden > 0 else f)
        head = self.model.embed_tokens.weight if self.config.tie_embeddings else self.lm_head.weight
        return F.linear(self.model.norm(x), head)


class GPT2Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_heads, self.head_dim = c.num_heads, c.head_dim
        self.c_attn = nn.Linear(c.hidden_size, 3 * c.hidden_size, bias=c.linear_bias)
        self.c_proj = nn.Linear(c.hidden_size, c.hidden_size, bias=c.linear_bias)

    def forward(self, x, causal_mask, p, dropout, site):
        batch, seq, hidden = x.shape
        q, k, v = (t.view(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)
                   for t in self.c_attn(x).split(hidden, dim=-1))
        out = _causal_attention(q, k, v, causal_mask, p, dropout, site)
        return self.c_proj(out.transpose(1, 2).reshape(batch, seq, hidden))


class GPT2MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c.hidden_size, c.ffn_hidden_size, bias=c.linear_bias)
        self.c_proj = nn.Linear(c.ffn_hidden_size, c.hidden_size, bias=c.linear_bias)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.hidden_size, eps=c.norm_eps)
        self.attn = GPT2Attention(c)
        self.ln_2 = nn.LayerNorm(c.hidden_size, eps=c.norm_eps)
        self.mlp = GPT2MLP(c)


class GPT2Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c.vocab_size, c.hidden_size)
        self.wpe = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.h = nn.ModuleList(GPT2Block(c) for _ in range(c.num_layers))
        self.ln_f = nn.LayerNorm(c.hidden_size, eps=c.norm_eps)


class GPT2LMHeadModel(nn.Module):
    """GPT-2 with Hugging Face's parameter names: transformer.*, lm_head.weight
    when untied. Linear weights are [out, in]; see hf_layout for Conv1D."""

    def __init__(self, c, train, max_seq_len):
        super().__init__()
        self.config, self.train_config = c, train
        self.transformer = GPT2Model(c)
        if not c.tie_embeddings:
            self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        self.register_buffer("causal_mask", _causal_mask(max_seq_len), persistent=False)

    def forward(self, tokens, dropout=_no_dropout):
        seq = tokens.shape[1]
        p_hidden, p_attn = self.train_config.hidden_dropout, self.train_config.attention_dropout
        t = self.transformer
        positions = torch.arange(seq, device=tokens.device)
        x = t.wte(tokens) + t.wpe(positions)
        if p_hidden > 0:
            x = dropout(x, p_hidden, 0)
        for l, block in enumerate(t.h):
            a = block.attn(block.ln_1(x), self.causal_mask, p_attn, dropout, 1 + 3 * l)
            x = x + (dropout(a, p_hidden, 2 + 3 * l) if p_hidden > 0 else a)
            f = block.mlp(block.ln_2(x))
            x = x + (dropout(f, p_hidden, 3 + 3 * l) if p_hidden > 0 else f)
        head = t.wte.weight if self.config.tie_embeddings else self.lm_head.weight
        return F.linear(t.ln_f(x), head)


def build_model(config, train):
    """The spec's model with Braid's initial weights, in the default dtype."""
    cls = LlamaForCausalLM if config.family == "llama" else GPT2LMHeadModel
    model = cls(config, train, train.seq_len)
    init_parameters(model, config, train.seed)
    return model


# ---------------------------------------------------------------------------
# Initial weights and checkpoint layout
# ---------------------------------------------------------------------------

_RESIDUAL_OUTPUTS = ("o_proj.weight", "down_proj.weight", "w2.weight", "attn.c_proj.weight",
                     "mlp.c_proj.weight")
# An expert's parameter: Braid stacks the experts' tensors into one whose
# name has `*` for the index, and draws its initial values as one tensor.
_EXPERT = re.compile(r"^(.*\.experts\.)(\d+)(\..*)$")


def braid_name(name):
    """The name of the Braid parameter holding `name`, and the expert index
    (None for a parameter that is no expert's)."""
    m = _EXPERT.match(name)
    return (m.group(1) + "*" + m.group(3), int(m.group(2))) if m else (name, None)


def braid_parameters(tensors):
    """name -> tensor with the experts' tensors stacked under Braid's names."""
    out, stacks = {}, {}
    for name, t in tensors.items():
        stacked, expert = braid_name(name)
        if expert is None:
            out[name] = t
        else:
            stacks.setdefault(stacked, {})[expert] = t
    for stacked, parts in stacks.items():
        out[stacked] = torch.stack([parts[e] for e in sorted(parts)])
    return out
_CONV1D_WEIGHTS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
                   "mlp.c_proj.weight")


def initial_values(name, shape, kind, config, seed):
    """Braid's float32 initial values of one parameter in its [out, in] shape.
    kind: "normal" (weight matrices, embedding tables), "one" (norm weights)
    or "zero" (biases)."""
    count = int(np.prod(shape))
    if kind == "one":
        return np.ones(shape, dtype=np.float32)
    if kind == "zero":
        return np.zeros(shape, dtype=np.float32)
    std = config.init_std
    if config.scaled_residual and name.endswith(_RESIDUAL_OUTPUTS):
        std = std / math.sqrt(2.0 * config.num_layers)
    return (std * normal(parameter_key(seed, name), count)).astype(np.float32).reshape(shape)


def _parameter_kinds(model):
    kinds = {}
    for module_name, module in model.named_modules():
        prefix = module_name + "." if module_name else ""
        for param_name, _ in module.named_parameters(recurse=False):
            if param_name == "bias":
                kind = "zero"
            elif isinstance(module, (RMSNorm, nn.LayerNorm)):
                kind = "one"
            elif isinstance(module, (nn.Linear, nn.Embedding)):
                kind = "normal"
            else:
                raise ValueError(f"no initialisation rule for {prefix}{param_name}")
            kinds[prefix + param_name] = kind
    return kinds


@torch.no_grad()
def init_parameters(model, config, seed):
    kinds = _parameter_kinds(model)
    stacked_values = {}
    for name, param in model.named_parameters():
        stacked, expert = braid_name(name)
        if expert is None:
            values = initial_values(name, tuple(param.shape), kinds[name], config, seed)
        else:
            if stacked not in stacked_values:
                shape = (config.moe.num_experts,) + tuple(param.shape)
                stacked_values[stacked] = initial_values(stacked, shape, kinds[name], config,
                                                         seed)
            values = stacked_values[stacked][expert]
        param.copy_(torch.from_numpy(values))


def hf_layout(name, tensor, config):
    """A parameter-shaped tensor in Hugging Face's checkpoint layout: GPT-2's
    Conv1D weights are stored [in, out]; everything else as inside Braid."""
    if config.family == "gpt2" and name.endswith(_CONV1D_WEIGHTS):
        return tensor.t().contiguous()
    return tensor.contiguous()


def weight_decay_groups(model, weight_decay):
    """AdamW parameter groups: decay on rank-2 parameters only (each expert's
    matrices are rank 2 here, slices of Braid's stacked rank-3 ones)."""
    params = list(model.parameters())
    return [{"params": [p for p in params if p.dim() == 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() != 2], "weight_decay": 0.0}]
