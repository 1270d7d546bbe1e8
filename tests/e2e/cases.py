"""The corpus of real model code the whole pipeline must capture in one graph each.

Each case builds ``(callable, args, kwargs)``; ``test_capture_corpus.py`` compiles it with
``fullgraph=True``, compares outputs and mutated inputs against eager PyTorch, counts graphs
and checks that the second call hits the cache.
"""

import dataclasses
import itertools
import math
import operator
import types
from collections import namedtuple

import torch
import torch.nn.functional as F
from torch import nn

CASES = {}


def case(name=None, graphs=1, stateful=False):
    """Register a case. ``stateful``: calling it changes state its guards read, so the second
    call recompiles (one more graph), as it does under torch.compile."""

    def register(make):
        CASES[name or make.__name__] = (make, graphs, stateful)
        return make

    return register


def t(*shape, seed=0, **kw):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, **kw)


SCALE = 0.5
CONFIG = {"eps": 1e-5, "act": "gelu"}
Pair = namedtuple("Pair", ["left", "right"])


@dataclasses.dataclass
class Settings:
    scale: float = 2.0
    shift: float = -1.0


# -- pointwise and reductions on plain functions ------------------------------------------------

_POINTWISE = {
    "add": lambda x, y: x + y,
    "sub_mul": lambda x, y: (x - y) * y,
    "div": lambda x, y: x / (y.abs() + 1),
    "pow": lambda x, y: x ** 2 + y ** 3,
    "neg_abs": lambda x, y: -x.abs() + abs(y),
    "relu_sigmoid": lambda x, y: torch.relu(x) * torch.sigmoid(y),
    "tanh_exp": lambda x, y: torch.tanh(x) + torch.exp(y.clamp(max=3)),
    "gelu": lambda x, y: F.gelu(x) + F.gelu(y, approximate="tanh"),
    "silu": lambda x, y: F.silu(x) * y,
    "where": lambda x, y: torch.where(x > 0, x, y),
    "maximum": lambda x, y: torch.maximum(x, y) - torch.minimum(x, y),
    "comparisons": lambda x, y: (x < y).float() + (x >= y).to(torch.float32),
    "scalar_ops": lambda x, y: 2 * x + 3.5 - y / 4,
    "reverse_ops": lambda x, y: 1 - x + 2 / (y.abs() + 1),
    "matmul": lambda x, y: x @ y.T,
    "softmax": lambda x, y: torch.softmax(x, dim=-1) + F.log_softmax(y, dim=0),
    "sum_mean": lambda x, y: x.sum() + y.mean(dim=1).sum(),
    "amax_keepdim": lambda x, y: x.amax(dim=1, keepdim=True) * y,
    "var_std": lambda x, y: x.var(dim=0) + y.std(dim=1).mean(),
    "norm": lambda x, y: x.norm(dim=-1) + torch.linalg.vector_norm(y, dim=-1),
    "cumsum": lambda x, y: x.cumsum(dim=1) - y.cumprod(dim=0),
    "argmax_float": lambda x, y: x.argmax(dim=-1).float() + y.sum(),
    "logsumexp": lambda x, y: torch.logsumexp(x, dim=1) + y[:, 0],
    "clamp_min_max": lambda x, y: x.clamp(-0.5, 0.5) + y.clamp_min(0),
    "rsqrt": lambda x, y: torch.rsqrt(x.abs() + 1) * y,
    "floor_round": lambda x, y: torch.floor(x * 3) + torch.round(y * 2),
    "dtype_cast": lambda x, y: x.to(torch.float64).sum().to(torch.float32) + y.double().mean().float(),
    "bool_ops": lambda x, y: ((x > 0) & (y > 0)).float() + ((x > 0) | (y < 0)).float(),
    "lerp": lambda x, y: torch.lerp(x, y, 0.3),
    "addcmul": lambda x, y: torch.addcmul(x, x, y, value=0.5),
}


def _pointwise_case(name, fn):
    def make():
        return fn, (t(4, 6, seed=1), t(4, 6, seed=2)), {}

    case(f"pointwise_{name}")(make)


for _name, _fn in _POINTWISE.items():
    _pointwise_case(_name, _fn)


# -- views, shapes, indexing ---------------------------------------------------------------------

_VIEWS = {
    "view": lambda x: x.view(2, -1).sum(0),
    "reshape_flatten": lambda x: x.reshape(3, 8).flatten() * 2,
    "transpose_contiguous": lambda x: x.transpose(0, 1).contiguous().view(-1),
    "permute": lambda x: x.view(2, 3, 4).permute(2, 0, 1) + 1,
    "unsqueeze_squeeze": lambda x: x.unsqueeze(0).unsqueeze(-1).squeeze(0).squeeze(-1) * 3,
    "expand": lambda x: x[:1].expand(5, -1, -1) + 0.5 if x.dim() == 3 else x[:1].expand(5, -1) * 2,
    "slice_step": lambda x: x[::2, 1:-1] * 2,
    "index_int_neg": lambda x: x[-1] + x[0],
    "ellipsis_none": lambda x: x[..., None, 1] + x[None, ..., 0],
    "index_tensor": lambda x: x[torch.tensor([0, 2, 1])] * 1.5,
    "bool_mask_where": lambda x: torch.where(x > 0, x, torch.zeros_like(x)),
    "cat_stack": lambda x: torch.cat([x, x * 2], dim=0) + torch.stack([x, -x]).sum(0).repeat(2, 1),
    "split_chunk": lambda x: sum(c.sum() for c in x.split(2, dim=1)) + x.chunk(3, dim=1)[1].mean(),
    "unbind": lambda x: sum(row * i for i, row in enumerate(x.unbind(0))),
    "narrow_select": lambda x: x.narrow(1, 1, 3).select(0, 2) * 2,
    "shape_arith": lambda x: x.view(x.shape[0] * 2, x.shape[1] // 2) + x.size(1),
    "size_dim_numel": lambda x: x * (x.dim() + x.numel() + x.size(-1)),
    "new_ones_zeros": lambda x: x.new_ones(x.shape) + x.new_zeros(2, 6).sum() + torch.ones_like(x),
    "arange_full": lambda x: x + torch.arange(6, dtype=x.dtype) + torch.full((4, 6), 0.25),
    "flip_roll": lambda x: torch.flip(x, dims=[0]) + torch.roll(x, shifts=1, dims=1),
    "tril_triu": lambda x: torch.tril(x[:, :4]) - torch.triu(x[:, 2:]),
    "gather": lambda x: torch.gather(x, 1, torch.tensor([[0], [1], [2], [3]])).squeeze(1),
    "T_property": lambda x: x.T @ x,
    "masked_fill": lambda x: x.masked_fill(x < 0, 0.0) * 2,
}


def _view_case(name, fn):
    def make():
        return fn, (t(4, 6, seed=3),), {}

    case(f"views_{name}")(make)


for _name, _fn in _VIEWS.items():
    _view_case(_name, _fn)


# -- Python features around tensor code --------------------------------------------------------

@case()
def python_loop_over_range():
    def fn(x):
        acc = x
        for i in range(4):
            acc = acc * 0.5 + i
        return acc
    return fn, (t(3, 3),), {}


@case()
def python_while_loop_constant():
    def fn(x):
        n = 0
        while n < 3:
            x = x + n
            n += 1
        return x
    return fn, (t(3),), {}


@case()
def python_if_on_shape():
    def fn(x):
        if x.shape[0] > 2:
            return x.sum(0)
        return x.mean(0)
    return fn, (t(4, 2),), {}


@case()
def python_if_on_dtype_and_flag():
    def fn(x, flag=True):
        if x.dtype == torch.float32 and flag:
            x = x * 2
        if not flag:
            x = x - 1
        return x
    return fn, (t(3),), {"flag": False}


@case()
def list_comprehension():
    def fn(xs):
        return torch.stack([x * i for i, x in enumerate(xs)]).sum(0)
    return fn, ([t(3, seed=i) for i in range(4)],), {}


@case()
def dict_comprehension_and_items():
    def fn(d):
        scaled = {k: v * 2 for k, v in d.items()}
        return scaled["a"] + scaled["b"]
    return fn, ({"a": t(3, seed=1), "b": t(3, seed=2)},), {}


@case()
def generator_expression_sum():
    def fn(xs):
        return sum(x.relu() for x in xs)
    return fn, ([t(4, seed=i) for i in range(3)],), {}


@case()
def nested_comprehension():
    def fn(x):
        rows = [[x[i, j] * (i + j) for j in range(2)] for i in range(2)]
        return torch.stack([torch.stack(r) for r in rows])
    return fn, (t(2, 2),), {}


@case()
def tuple_in_tuple_out():
    def fn(pair):
        a, b = pair
        return b, a, (a + b,)
    return fn, ((t(3, seed=1), t(3, seed=2)),), {}


@case()
def namedtuple_in_out():
    def fn(p):
        return Pair(right=p.right * 2, left=p.left + 1)
    return fn, (Pair(t(2), t(2, seed=3)),), {}


@case()
def dict_out_with_constants():
    def fn(x):
        return {"out": x * 2, "n": 3, "name": "relu", "shape": x.shape}
    return fn, (t(2, 3),), {}


@case()
def starred_unpacking():
    def fn(xs):
        first, *rest = xs
        return first - sum(rest)
    return fn, ([t(3, seed=i) for i in range(4)],), {}


@case()
def args_kwargs():
    def fn(*args, scale=1.0, **kwargs):
        total = sum(args) * scale
        for k in sorted(kwargs):
            total = total + kwargs[k]
        return total
    return fn, (t(2, seed=1), t(2, seed=2)), {"scale": 3.0, "b": t(2, seed=4), "a": t(2, seed=5)}


@case()
def keyword_only_defaults():
    def fn(x, *, bias=None, alpha=2):
        y = x * alpha
        if bias is not None:
            y = y + bias
        return y
    return fn, (t(3),), {"bias": t(3, seed=8)}


@case()
def positional_only():
    def fn(x, y, /, z=1.0):
        return x * y + z
    return fn, (t(3), t(3, seed=1)), {}


@case()
def call_with_star_args():
    def inner(a, b, c):
        return a * b - c

    def fn(x):
        parts = (x, x + 1, x * 2)
        opts = {"c": x}
        return inner(*parts[:2], **opts)
    return fn, (t(3),), {}


@case()
def closure_over_tensor_and_constant():
    w = t(3, seed=9)
    k = 4

    def fn(x):
        return x * w + k
    return fn, (t(3),), {}


@case()
def nested_function_definition():
    def fn(x):
        def scale(v, factor=2):
            return v * factor
        return scale(x) + scale(x, factor=3)
    return fn, (t(3),), {}


@case()
def lambda_and_map():
    def fn(xs):
        return torch.stack(list(map(lambda v: v.sin(), xs))).sum(0)
    return fn, ([t(3, seed=i) for i in range(3)],), {}


@case()
def closure_counter_inner():
    def fn(x):
        total = [x]

        def add(v):
            total.append(v)
        add(x * 2)
        add(x * 3)
        return sum(total)
    return fn, (t(3),), {}


@case()
def zip_enumerate_reversed():
    def fn(xs, ys):
        out = []
        for i, (a, b) in enumerate(zip(xs, reversed(ys), strict=False)):
            out.append(a * b + i)
        return out
    return fn, ([t(2, seed=i) for i in range(3)], [t(2, seed=10 + i) for i in range(3)]), {}


@case()
def builtins_min_max_len_isinstance():
    def fn(xs):
        n = len(xs)
        m = max(3, n)
        if isinstance(xs, list) and all(isinstance(v, torch.Tensor) for v in xs):
            return torch.stack(xs).sum(0) * min(m, 10)
        return xs[0]
    return fn, ([t(2, seed=i) for i in range(4)],), {}


@case()
def math_module_functions():
    def fn(x):
        return x * math.sqrt(2.0) + math.pi * math.cos(0.0) + math.log(8, 2)
    return fn, (t(3),), {}


@case()
def operator_module_functions():
    def fn(x, y):
        return operator.add(operator.mul(x, 2), y)
    return fn, (t(3), t(3, seed=2)), {}


@case()
def fstring_and_string_methods():
    def fn(x, mode="Relu"):
        name = f"{mode.lower()}_{x.dim()}"
        if name.startswith("relu"):
            return torch.relu(x)
        return x
    return fn, (t(4),), {}


@case()
def global_constant_and_dict_read():
    def fn(x):
        return x * SCALE + CONFIG["eps"]
    return fn, (t(3),), {}


@case()
def dataclass_attribute_reads():
    def fn(x, s):
        return x * s.scale + s.shift
    return fn, (t(3), Settings()), {}


@case()
def with_no_grad():
    def fn(x):
        with torch.no_grad():
            y = x * 2
        return y + 1, y.requires_grad
    return fn, (t(3, requires_grad=True),), {}


@case()
def with_enable_grad_inside_no_grad():
    def fn(x):
        with torch.no_grad():
            a = x * 2
            with torch.enable_grad():
                b = x * 3
        return a, b
    return fn, (t(3, requires_grad=True),), {}


@case()
def assert_on_shape():
    def fn(x):
        assert x.dim() == 2, "expects a matrix"
        return x.sum(1)
    return fn, (t(2, 3),), {}


@case()
def is_none_checks():
    def fn(x, mask=None):
        if mask is None:
            mask = torch.ones_like(x)
        return x * mask
    return fn, (t(3),), {}


@case()
def return_input_unchanged_and_constant():
    def fn(x, y):
        return x, y * 2, None
    return fn, (t(2), t(2, seed=1)), {}


# -- mutation of inputs --------------------------------------------------------------------------

@case()
def mutate_input_list_append():
    def fn(xs):
        xs.append(xs[0] * 2)
        return len(xs)
    return fn, ([t(2, seed=i) for i in range(2)],), {}


@case()
def mutate_input_list_setitem_pop():
    def fn(xs):
        xs[0] = xs[0] + 1
        last = xs.pop()
        return last * 3
    return fn, ([t(2, seed=i) for i in range(3)],), {}


@case()
def mutate_input_dict():
    def fn(d, x):
        d["out"] = x * 2
        d.pop("drop")
        return d["keep"] + 1
    return fn, ({"keep": t(2), "drop": 5}, t(2, seed=3)), {}


@case()
def inplace_tensor_ops_on_input():
    def fn(x, y):
        x.add_(1)
        x.mul_(y)
        return x.sum()
    return fn, (t(3), t(3, seed=1)), {}


@case()
def inplace_operator_on_intermediate():
    def fn(x):
        y = x * 2
        y += 1
        y *= x
        return y
    return fn, (t(3),), {}


@case()
def setitem_on_tensor():
    def fn(x):
        y = x.clone()
        y[0] = 0.0
        y[:, 1] = y[:, 1] * 2
        return y
    return fn, (t(3, 3),), {}


# -- nn.Modules ----------------------------------------------------------------------------------

def _module_case(name, build, *inputs):
    def make():
        torch.manual_seed(0)
        m = build()
        m.eval()
        return m, inputs, {}

    case(f"module_{name}")(make)


class MLP(nn.Module):
    def __init__(self, d_in=16, d_hidden=32, d_out=8, act=nn.ReLU, depth=2):
        super().__init__()
        layers = [nn.Linear(d_in, d_hidden), act()]
        for _ in range(depth - 1):
            layers += [nn.Linear(d_hidden, d_hidden), act()]
        layers.append(nn.Linear(d_hidden, d_out))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


for _act in (nn.ReLU, nn.GELU, nn.SiLU, nn.Tanh, nn.Sigmoid, nn.LeakyReLU, nn.ELU, nn.Softplus):
    _module_case(f"mlp_{_act.__name__.lower()}", lambda a=_act: MLP(act=a), t(4, 16))
for _depth in (1, 3, 6):
    _module_case(f"mlp_depth{_depth}", lambda d=_depth: MLP(depth=d), t(2, 16))


class ResidualBlock(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.norm(x)))))


class ConvNet(nn.Module):
    def __init__(self, channels=(3, 8, 16), bn=True):
        super().__init__()
        blocks = []
        for c_in, c_out in itertools.pairwise(channels):
            blocks += [nn.Conv2d(c_in, c_out, 3, padding=1)]
            if bn:
                blocks.append(nn.BatchNorm2d(c_out))
            blocks += [nn.ReLU(), nn.MaxPool2d(2)]
        self.features = nn.Sequential(*blocks)
        self.head = nn.Linear(channels[-1], 10)

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)


class Attention(nn.Module):
    def __init__(self, d=32, heads=4, causal=True):
        super().__init__()
        self.heads = heads
        self.causal = causal
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, s, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        if self.causal:
            mask = torch.ones(s, s, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf"))
        out = att.softmax(dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, s, d))


class SdpaAttention(Attention):
    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = [z.view(b, s, self.heads, -1).transpose(1, 2) for z in (q, k, v)]
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.proj(out.transpose(1, 2).reshape(b, s, d))


class TransformerBlock(nn.Module):
    def __init__(self, d=32, heads=4, attn=Attention):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = attn(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=64, d=32, layers=2, heads=4, block=8):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        self.blocks = nn.ModuleList([TransformerBlock(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied weights

    def forward(self, idx):
        _b, s = idx.shape
        pos = torch.arange(s, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


class Experts(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.experts = nn.ModuleDict({"a": nn.Linear(d, d), "b": nn.Linear(d, d)})
        self.weights = {"a": 0.3, "b": 0.7}

    def forward(self, x):
        out = 0
        for name, expert in self.experts.items():
            out = out + self.weights[name] * expert(x)
        return out + self.experts["a"](x)


class ListOfHeads(nn.Module):
    def __init__(self, d=8, n=3):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(d, 2) for _ in range(n)])
        self.scale = nn.Parameter(torch.tensor(1.5))
        self.register_buffer("offset", torch.arange(2.0))

    def forward(self, x):
        outs = [h(x) * self.scale + self.offset for h in self.heads]
        return torch.cat(outs, dim=-1), len(self.heads), self.heads[-1](x)


class HandLSTMCell(nn.Module):
    def __init__(self, d_in=6, d_h=5):
        super().__init__()
        self.ih = nn.Linear(d_in, 4 * d_h)
        self.hh = nn.Linear(d_h, 4 * d_h)

    def forward(self, x, state):
        h, c = state
        gates = self.ih(x) + self.hh(h)
        i, f, g, o = gates.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, (h, c)


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class PropertyModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @property
    def weight_scale(self):
        return self.fc.weight.abs().mean()

    def helper(self, x, k=2):
        return self.fc(x) * k

    def forward(self, x):
        return self.helper(x) + self.weight_scale


class SubclassModule(PropertyModule):
    def helper(self, x, k=3):
        return PropertyModule.helper(self, x, k) - k


class SuperModule(PropertyModule):
    def helper(self, x, k=5):
        return super().helper(x, k) + 1

    def forward(self, x):
        return super().forward(x) * 2 + super().helper(x)


_module_case("residual_block", ResidualBlock, t(2, 5, 16))
_module_case("convnet", ConvNet, t(2, 3, 16, 16))
_module_case("convnet_nobn", lambda: ConvNet(bn=False), t(1, 3, 8, 8))
_module_case("attention_causal", Attention, t(2, 6, 32))
_module_case("attention_full", lambda: Attention(causal=False), t(2, 6, 32))
_module_case("sdpa_attention", SdpaAttention, t(2, 6, 32))
_module_case("transformer_block", TransformerBlock, t(2, 6, 32))
_module_case("gpt_tied_weights", GPT, torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(0)))
_module_case("moduledict_experts", Experts, t(3, 8))
_module_case("modulelist_heads", ListOfHeads, t(3, 8))
_module_case("hand_lstm_cell", HandLSTMCell, t(2, 6), (t(2, 5, seed=1), t(2, 5, seed=2)))
_module_case("conv_bn_eval", ConvBN, t(1, 3, 8, 8))
_module_case("property_and_helper", PropertyModule, t(2, 4))
_module_case("subclass_override", SubclassModule, t(2, 4))
_module_case("super_calls", SuperModule, t(2, 4))
_module_case("layernorm_gelu_chain", lambda: nn.Sequential(*[m for _ in range(3) for m in (nn.Linear(8, 8), nn.LayerNorm(8), nn.GELU())]), t(4, 8))
_module_case("embedding_bag_of_ops", lambda: nn.Sequential(nn.Embedding(10, 4), nn.Flatten(), nn.Linear(12, 3)), torch.tensor([[1, 2, 3], [4, 5, 6]]))
_module_case("multihead_attention", lambda: _MHAWrapper(), t(2, 5, 16))
_module_case("transformer_encoder_layer", lambda: _EncoderWrapper(), t(2, 5, 16))
_module_case("groupnorm_conv", lambda: nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.SiLU()), t(1, 4, 6, 6))
_module_case("conv1d_pool", lambda: nn.Sequential(nn.Conv1d(3, 6, 3), nn.ReLU(), nn.AvgPool1d(2)), t(2, 3, 10))
_module_case("dropout_eval_identity", lambda: nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)), t(3, 4))
_module_case("rmsnorm", lambda: nn.RMSNorm(8), t(2, 8))
_module_case("batchnorm1d", lambda: nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6)), t(4, 6))
_module_case("identity_flatten_unflatten", lambda: nn.Sequential(nn.Identity(), nn.Flatten(), nn.Unflatten(1, (2, 6))), t(3, 3, 4))


class _MHAWrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, batch_first=True)

    def forward(self, x):
        out, weights = self.mha(x, x, x, need_weights=True)
        return out, weights


class _EncoderWrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x)


# -- stores to attributes and globals ------------------------------------------------------------

COUNTER = 0


class Recorder:
    def __init__(self):
        self.calls = 0
        self.last = None


@case()
def attribute_store_on_object():
    def fn(x, rec):
        rec.calls = rec.calls + 1
        rec.last = x * 2
        return rec.last + rec.calls
    return fn, (t(3), Recorder()), {}


class CachingModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.cache = None
        self.steps = 0

    def forward(self, x):
        y = self.fc(x)
        self.cache = y.detach()
        self.steps += 1
        return y * self.steps


@case(stateful=True)
def module_attribute_store():
    torch.manual_seed(0)
    return CachingModule(), (t(2, 4),), {}


def _bump_counter(x):
    global COUNTER
    COUNTER = COUNTER + 1
    return x * COUNTER


@case(stateful=True)
def global_store():
    # A private copy of this module's globals per build, so the eager and the compiled copy
    # each count their own calls.
    own = dict(globals(), COUNTER=0)
    return types.FunctionType(_bump_counter.__code__, own), (t(3),), {}


# -- more of torch.nn ----------------------------------------------------------------------------

_module_case("conv_stride_groups", lambda: nn.Sequential(nn.Conv2d(4, 8, 3, stride=2, groups=2), nn.Hardswish()), t(1, 4, 9, 9))
_module_case("conv_transpose_upsample", lambda: nn.Sequential(nn.ConvTranspose2d(3, 2, 2, stride=2), nn.Upsample(scale_factor=2)), t(1, 3, 4, 4))
_module_case("pixel_shuffle", lambda: nn.Sequential(nn.Conv2d(2, 8, 1), nn.PixelShuffle(2)), t(1, 2, 3, 3))
_module_case("lstm_cell", lambda: nn.LSTMCell(5, 4), t(3, 5), (t(3, 4, seed=1), t(3, 4, seed=2)))
_module_case("gru_cell", lambda: nn.GRUCell(5, 4), t(3, 5), t(3, 4, seed=1))
_module_case("bilinear_prelu", lambda: _BilinearPReLU(), t(2, 3), t(2, 4, seed=1))
_module_case("mish_softplus_chain", lambda: nn.Sequential(nn.Linear(4, 4), nn.Mish(), nn.Softplus(beta=2.0), nn.LogSoftmax(dim=-1)), t(3, 4))
_module_case("instance_norm", lambda: nn.Sequential(nn.Conv2d(2, 3, 3), nn.InstanceNorm2d(3, affine=True)), t(2, 2, 6, 6))
_module_case("adaptive_pools", lambda: nn.Sequential(nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten(), nn.Linear(12, 2)), t(1, 3, 7, 7))
_module_case("zero_pad_unfold", lambda: nn.Sequential(nn.ZeroPad2d(1), nn.Unfold(kernel_size=2)), t(1, 1, 3, 3))
_module_case("cosine_similarity", lambda: _Similarity(), t(4, 8), t(4, 8, seed=5))
_module_case("transformer_decoder_layer", lambda: _DecoderWrapper(), t(2, 4, 16), t(2, 5, 16, seed=1))
_module_case("embedding_padding_maxnorm", lambda: nn.Embedding(10, 3, padding_idx=0), torch.tensor([[0, 2, 9], [4, 0, 1]]))


class _BilinearPReLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.bil = nn.Bilinear(3, 4, 2)
        self.act = nn.PReLU()

    def forward(self, a, b):
        return self.act(self.bil(a, b))


class _Similarity(nn.Module):
    def __init__(self):
        super().__init__()
        self.cos = nn.CosineSimilarity(dim=1)
        self.dist = nn.PairwiseDistance()

    def forward(self, a, b):
        return self.cos(a, b) + self.dist(a, b)


class _DecoderWrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True)

    def forward(self, tgt, memory):
        return self.layer(tgt, memory)


# -- losses ----------------------------------------------------------------------------------------

@case()
def loss_cross_entropy_label_smoothing():
    def fn(logits, target):
        return F.cross_entropy(logits, target, label_smoothing=0.1) + F.nll_loss(logits.log_softmax(-1), target)
    return fn, (t(4, 5), torch.tensor([1, 0, 4, 2])), {}


@case()
def loss_modules():
    mse, l1, huber = nn.MSELoss(), nn.L1Loss(reduction="sum"), nn.SmoothL1Loss(beta=0.5)

    def fn(a, b):
        return mse(a, b) + l1(a, b) + huber(a, b)
    return fn, (t(3, 4), t(3, 4, seed=1)), {}


@case()
def loss_bce_kl():
    def fn(a, b):
        return (F.binary_cross_entropy_with_logits(a, b.sigmoid())
                + F.kl_div(a.log_softmax(-1), b.softmax(-1), reduction="batchmean"))
    return fn, (t(3, 4), t(3, 4, seed=1)), {}


# -- more tensor math --------------------------------------------------------------------------------

@case()
def einsum_bmm_baddbmm():
    def fn(a, b):
        return torch.einsum("bij,bjk->bik", a, b) + torch.bmm(a, b) + torch.baddbmm(a @ b, a, b, alpha=0.5)
    return fn, (t(2, 3, 4), t(2, 4, 3, seed=1)), {}


@case()
def outer_kron_cross():
    def fn(a, b):
        return torch.outer(a, b).sum() + torch.kron(a[:2], b[:2]).sum() + torch.linalg.cross(a[:3], b[:3]).sum()
    return fn, (t(4), t(4, seed=1)), {}


@case()
def topk_sort_argsort():
    def fn(x):
        values, indices = x.topk(3, dim=-1)
        s = torch.sort(x, dim=0, descending=True).values
        return values * 2 + indices.float(), s, x.argsort(dim=1)
    return fn, (t(4, 6),), {}


@case()
def max_with_dim_namedtuple():
    def fn(x):
        result = x.max(dim=1)
        return result.values + result.indices.float(), torch.min(x, 0)[0]
    return fn, (t(3, 5),), {}


@case()
def scatter_index_add():
    def fn(x, idx):
        out = torch.zeros(5, 3).index_add(0, idx, x)
        return out.scatter(1, torch.zeros(5, 1, dtype=torch.long), 1.0)
    return fn, (t(4, 3), torch.tensor([0, 2, 2, 4])), {}


@case()
def complex_and_fft():
    def fn(x):
        spec = torch.fft.rfft(x, dim=-1)
        return spec.abs() + torch.view_as_real(spec).sum(-1)
    return fn, (t(2, 8),), {}


@case()
def integer_tensor_ops():
    def fn(a, b):
        return (a // b) + (a % b) + (a << 1) + (a & b) + torch.bitwise_xor(a, b)
    return fn, (torch.tensor([7, 12, 33, 4]), torch.tensor([2, 5, 3, 1])), {}


@case()
def bool_any_all_reductions():
    def fn(x):
        positive = x > 0
        return positive.any(dim=1), positive.all(), positive.sum(dim=0), positive.float().mean()
    return fn, (t(3, 4),), {}


# -- Python constructs -------------------------------------------------------------------------------

class Scaler:
    factor = 3.0

    @staticmethod
    def twice(x):
        return x * 2

    @classmethod
    def scaled(cls, x):
        return x * cls.factor

    def __call__(self, x):
        return self.twice(x) + self.scaled(x)


@case()
def static_and_class_methods_and_call():
    def fn(x, s):
        return s(x) + Scaler.twice(x)
    return fn, (t(3), Scaler()), {}


@case()
def while_break_for_else():
    def fn(x):
        i = 0
        while True:
            x = x + 1
            i += 1
            if i == 3:
                break
        for j in range(2):
            if j > 5:
                break
        else:
            x = x * 2
        return x
    return fn, (t(2),), {}


@case()
def try_without_exception():
    def fn(x):
        try:
            y = x * 2
        except RuntimeError:
            y = x
        finally:
            z = 1
        return y + z
    return fn, (t(2),), {}


@case()
def chained_and_ternary_comparisons():
    def fn(x, k=3):
        lo, hi = 1, 5
        scale = 2.0 if lo < k < hi else 0.5
        return x * scale if x.dim() >= 1 and not (k == 4) else x  # noqa: SIM201 (UNARY_NOT)
    return fn, (t(3),), {}


@case()
def nonlocal_in_nested_function():
    def fn(x):
        total = 0

        def bump(v):
            nonlocal total
            total = total + v
        bump(1)
        bump(2)
        return x * total
    return fn, (t(3),), {}


@case()
def dict_get_setdefault_and_in():
    def fn(x, opts):
        scale = opts.get("scale", 1.0)
        shift = opts.get("shift", 0.5)
        names = ["a", "b"]
        if "a" in names and "c" not in names:
            scale = scale * 2
        return x * scale + shift
    return fn, (t(3), {"scale": 3.0}), {}


@case()
def nested_containers_out():
    def fn(x):
        return {"stats": [x.mean(), (x.min(), x.max())], "meta": {"n": x.numel(), "tag": None}}
    return fn, (t(4),), {}


@case()
def string_keyed_dispatch():
    acts = {"relu": torch.relu, "tanh": torch.tanh, "gelu": F.gelu}

    def fn(x, name="tanh"):
        return acts[name](x) + acts[CONFIG["act"]](x)
    return fn, (t(4),), {"name": "relu"}


@case()
def recursion_on_python_value():
    def power(x, n):
        return x if n == 1 else x * power(x, n - 1)

    def fn(x):
        return power(x, 4)
    return fn, (t(3),), {}


@case()
def slicing_lists_and_negative_steps():
    def fn(xs):
        return sum(xs[::-1][:2]) + xs[-1] * len(xs[1:])
    return fn, ([t(2, seed=i) for i in range(4)],), {}


@case()
def list_sort_and_reverse_of_constants():
    def fn(x):
        dims = [2, 0, 1]
        dims.sort()
        dims.reverse()
        return x.permute(*dims)
    return fn, (t(2, 3, 4),), {}


@case()
def autocast_bfloat16_region():
    def fn(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w
            z = torch.relu(y)
        return z.float() + 1, y.dtype
    return fn, (t(4, 8), t(8, 4, seed=1)), {}


@case()
def autocast_disabled_inside_enabled():
    def fn(x):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            a = x @ x
            with torch.autocast(device_type="cpu", enabled=False):
                b = x @ x
        return a.dtype, b.dtype, b
    return fn, (t(3, 3),), {}


class HookedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 4)
        self.fc2 = nn.Linear(4, 2)
        self.fc1.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        self.fc1.register_forward_hook(lambda mod, args, out: out + args[0].sum())
        self.fc2.register_forward_hook(lambda mod, args, kwargs, out: out * 3, with_kwargs=True)
        self.fc2.register_forward_pre_hook(lambda mod, args: None)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@case()
def module_forward_hooks():
    torch.manual_seed(0)
    return HookedNet(), (t(3, 4),), {}


# -- objects created inside the compiled region ----------------------------------------------------

@dataclasses.dataclass
class Stats:
    mean: torch.Tensor
    spread: torch.Tensor
    count: int = 0

    @property
    def upper(self):
        return self.mean + self.spread


@dataclasses.dataclass(frozen=True)
class Frozen:
    value: torch.Tensor
    tag: str = "f"


class Accumulator:
    def __init__(self, start):
        self.total = start
        self.steps = 0

    def add(self, x):
        self.total = self.total + x
        self.steps += 1
        return self


@case()
def dataclass_created_and_returned():
    def fn(x):
        s = Stats(x.mean(0), x.std(0), count=x.shape[0])
        return s, s.upper, Frozen(x.sum(), tag="sum")
    return fn, (t(5, 3),), {}


@case()
def object_created_and_used_internally():
    def fn(xs):
        acc = Accumulator(torch.zeros(3))
        for x in xs:
            acc.add(x)
        return acc.total / acc.steps
    return fn, ([t(3, seed=i) for i in range(4)],), {}


@case()
def new_object_stored_on_input_object():
    def fn(x, rec):
        rec.last = Accumulator(x * 2).add(x)
        return rec.last.total
    return fn, (t(2), Recorder()), {}


@case()
def sets_of_names_and_modules():
    def fn(x, names):
        seen = set()
        kinds = {"relu", "gelu"}
        out = x
        for n in names:
            if n in kinds and n not in seen:
                out = out + (torch.relu(x) if n == "relu" else F.gelu(x))
                seen.add(n)
        return out * len(seen), len(seen), len({1, 2, 3})
    return fn, (t(3), ["relu", "gelu", "relu", "tanh"]), {}


# -- library code: globals of other modules, imports, registries, dict outputs -------------------

@case()
def globals_of_another_module():
    import library_code as lib

    def fn(x):
        return lib.scaled(x) + lib.activation("tanh")(x)
    return fn, (t(4),), {}


@case()
def imports_inside_functions():
    import library_code as lib

    def fn(x):
        import operator

        from torch.nn import functional as F
        return operator.add(lib.with_local_imports(x), F.relu(x))
    return fn, (t(4),), {}


@case()
def dict_subclass_registry_read_through_super():
    import library_code as lib

    lib.REGISTRY[nn.Linear] = {"hidden": 0}

    def fn(m, x):
        flags = lib.REGISTRY.get(m)
        missing = lib.REGISTRY.get(x)
        return m(x) * len(flags), len(missing), "hidden" in flags
    return fn, (nn.Linear(3, 3), t(2, 3)), {}


@case()
def mapping_with_python_special_methods():
    import library_code as lib

    def fn(x):
        out = x
        if "double" in lib.INTERFACE and "cube" not in lib.INTERFACE:
            out = lib.INTERFACE["double"](out)
        return out + len(lib.INTERFACE), sorted(lib.INTERFACE)
    return fn, (t(3),), {}


@case()
def dataclass_dict_output_built_read_and_returned():
    import library_code as lib

    def fn(x):
        out = lib.LayerOutput(hidden=x.relu(), attention=x.softmax(-1))
        first = out[0]
        by_name = out["attention"]
        return out, first + by_name, out.to_tuple(), len(out), out.extra is None, list(out.keys())
    return fn, (t(2, 3),), {}


@case()
def signature_of_a_bound_method_and_code_names():
    import library_code as lib

    class Chunked(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def chunk(self, x):
            return self.fc(x)

        def forward(self, x):
            n = lib.arity(self.chunk)
            k = 2 if "x" in self.chunk.__func__.__code__.co_varnames else 1
            return self.chunk(x) * n * k

    torch.manual_seed(0)
    return Chunked(), (t(2, 4),), {}


@case()
def config_attributes_through_getattribute_and_getattr():
    import library_code as lib

    def fn(x, cfg):
        out = x * cfg.hidden_size + cfg.width
        if not cfg.use_cache and not hasattr(cfg, "missing") and getattr(cfg, "other", 2) == 2:
            out = out + 1
        return out
    return fn, (t(3), lib.Config(4)), {}


@case()
def sequence_iterated_through_its_mixin():
    import library_code as lib

    def fn(x, layers):
        for k in layers:
            x = x * k
        return x, list(layers)
    return fn, (t(3), lib.Layers(3)), {}


@case()
def module_list_slice_and_tensor_hasattr():
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(3, 3) for _ in range(4))

        def forward(self, x):
            for layer in self.layers[1:3]:
                x = layer(x)
            return x, len(self.layers[:2]), hasattr(x, "jax"), hasattr(x, "shape")

    torch.manual_seed(0)
    return Stack(), (t(2, 3),), {}


@torch.no_grad()
def _frozen_stats(x):
    return x.mean(), x.requires_grad


@case()
def function_decorated_with_no_grad():
    def fn(x):
        mean, inner_requires_grad = _frozen_stats(x * 2)
        return x * mean, inner_requires_grad, torch.is_grad_enabled()
    return fn, (t(3, requires_grad=True),), {}


class Scope:
    """A context manager written in Python: counts entries and exits on the object."""

    def __init__(self):
        self.depth = 0
        self.entered = 0

    def __enter__(self):
        self.depth += 1
        self.entered += 1
        return self

    def __exit__(self, kind, value, tb):
        self.depth -= 1
        return False


@case()
def python_context_managers():
    import contextlib

    def fn(x, scope):
        with contextlib.nullcontext(), scope as s:
            y = x * (s.depth + 1)
        with contextlib.nullcontext(x) as same:
            y = y + same
        return y, scope.depth, scope.entered
    return fn, (t(3), Scope()), {}


@case()
def attribute_writes_through_a_python_setattr():
    import library_code as lib

    def fn(x, settings):
        settings.hidden_size = settings.width + 1   # stored as width
        settings.calls += 1
        return x * settings.width, settings.width, settings.calls
    return fn, (t(3), lib.MappedSettings()), {}


def _scaled_add(x, y, *, alpha):
    return x + alpha * y


@case()
def partials_finfo_slices_and_callable():
    import functools

    class Act(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = functools.partial(F.gelu, approximate="tanh")
            self.add = functools.partial(_scaled_add, alpha=0.5)

        def forward(self, x, keep):
            def mask(t):
                return t.clamp(min=torch.finfo(t.dtype).min / 2)
            combine = functools.partial(torch.add, alpha=2)
            y = self.add(self.act(x), x)[slice(-keep, None)]
            if callable(mask) and callable(self.act) and not callable(x):
                y = mask(combine(y, y))
            return y, torch.iinfo(torch.int32).max

    return Act(), (t(4, 3), 2), {}


@case()
def numpy_array_passed_through():
    import numpy as np

    def fn(x, arr):
        return x * 2, arr, type(arr) is np.ndarray
    return fn, (t(3), np.arange(3.0)), {}


@case()
def loss_module_created_in_forward():
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 5)

        def forward(self, x, target):
            loss_fct = nn.CrossEntropyLoss(label_smoothing=0.1)
            drop = nn.Dropout(p=0.0)
            return loss_fct(drop(self.fc(x)), target)

    torch.manual_seed(0)
    return Head(), (t(3, 4), torch.tensor([0, 4, 2])), {}


class _Dispatch:
    """An object a class decorator's closure keeps (like transformers' ExpertsInterface)."""

    def __init__(self):
        self.table = {"double": lambda m, x: m.fc(x) * 2}

    def pick(self, name, default):
        return self.table.get(name, default)


_DISPATCH = _Dispatch()


def _dispatching(cls, dispatch=_DISPATCH):
    original = cls.forward

    def forward(self, x):
        return dispatch.pick(self.mode, original)(self, x)

    cls.forward = forward
    return cls


@_dispatching
class _Dispatched(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(x)


@case()
def forward_replaced_by_a_class_decorator_closure():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = _Dispatched("double")
            self.b = _Dispatched("plain")

        def forward(self, x):
            return self.b(self.a(x))

    torch.manual_seed(0)
    return Two(), (t(2, 3),), {}


class _Table:
    """A Mapping by the ABC's mixins: get() and `in` catch the KeyError of __getitem__."""

    def __init__(self):
        self.d = {"a": 1.5}

    def __getitem__(self, k):
        return self.d[k]

    def __iter__(self):
        return iter(self.d)

    def __len__(self):
        return len(self.d)


collections_abc = __import__("collections.abc").abc
collections_abc.Mapping.register(_Table)
for _name in ("get", "__contains__", "keys", "items", "values"):
    setattr(_Table, _name, getattr(collections_abc.Mapping, _name))


@case()
def exceptions_raised_and_caught_inside():
    def fn(x, table):
        try:
            import kiln_no_such_module  # noqa: F401
            y = x
        except ImportError:
            y = x * 2
        try:
            v = {"k": 1}["missing"]
        except KeyError:
            v = 3
        try:
            raise ValueError("boom")
        except (TypeError, ValueError) as e:
            v += len(e.args)
        try:
            w = [1, 2][5]
        except IndexError:
            w = 0
        finally:
            w += 10
        z = table.get("b", 5.0) + table.get("a")
        return y * v + z + w, "b" in table, "a" in table
    return fn, (t(3), _Table()), {}


@case()
def copies_itertools_and_set_algebra():
    import copy

    def fn(x, names):
        shallow = copy.copy(names)
        shallow.append("extra")
        deep = copy.deepcopy({"w": [1, 2], "n": (3, [4])})
        deep["w"].append(9)
        out = x
        for a, b in itertools.product([1, 2], [10]):
            out = out + a * b
        for a, b in itertools.pairwise([x, x * 2, x * 3]):
            out = out + (b - a)
        for i, part in enumerate(itertools.chain(names, ["z"])):
            out = out + len(part) * i
        kinds = ({1, 2} | {3}) - {2}
        return out, names, shallow, deep, sorted(kinds), sorted({1, 2} & {2, 5}), sorted({1} ^ {2})
    return fn, (t(3), ["ab", "c"]), {}


@case()
def exceptions_of_folded_builtins_caught():
    def fn(x, text):
        try:
            n = int(text)
        except ValueError:
            n = -1
        try:
            q = 1 // 0
        except ZeroDivisionError:
            q = 2
        return x * n * q
    return fn, (t(2), "x3"), {}


class _Settings:
    def __init__(self):
        self.scale = 2.0
        self.tags = ["a"]
        self.extra = {"k": 1}


@case()
def deepcopy_of_a_frame_object_then_changed():
    import copy

    def fn(x, settings):
        mine = copy.deepcopy(settings)
        mine.scale = 3.0
        mine.tags.append("b")
        del mine.extra
        return x * mine.scale * settings.scale, settings.tags, mine.tags, hasattr(mine, "extra")
    return fn, (t(2), _Settings()), {}


_VALIDATORS = {int: lambda v: v >= 0, float: lambda v: v == v, str: bool}


@case()
def registry_keyed_by_type_and_functions_as_truth_values():
    def fn(x, value):
        check = _VALIDATORS.get(type(value))
        if check and check(value):
            return x * value
        return x
    return fn, (t(2), 3), {}
