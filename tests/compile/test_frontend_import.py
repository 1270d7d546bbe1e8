"""kiln never loads torch's own compiler (torch._dynamo, torch._inductor, torch's AOT
autograd), and the scope that keeps torch's meta kernels from loading it leaves torch as it
found it. Each check runs in a fresh interpreter: in this one torch.compile tests may
already have loaded those modules."""

import os
import subprocess
import sys
import textwrap

FRONTEND = ("torch._dynamo", "torch._inductor", "torch._functorch.aot_autograd")


def _run(body: str) -> str:
    script = textwrap.dedent(body)
    env = dict(os.environ, KILN_LOGS="")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout


_MODELS = """
import sys
import torch
import torch.nn as nn
import kiln

FRONTEND = {frontend!r}


def loaded():
    return sorted(m for m in sys.modules if m.startswith(FRONTEND))


class Block(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Dropout(0.0), nn.Linear(4 * d, d))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, idx):
        e = self.emb(idx).unsqueeze(1)
        y = torch.relu(self.bn(self.conv(e)))
        return torch.softmax(y.flatten(1), -1).sum(-1).mean()


def broken(x, n):
    y = torch.sigmoid(x) * n
    print("graph break", end=" ")
    return (y.cumsum(0) / n).tanh()


torch.manual_seed(0)
block = nn.Sequential(Block(), Block())
conv = Conv()
x = torch.randn(2, 5, 32, requires_grad=True)
idx = torch.randint(0, 10, (3, 6))

out = kiln.compile(block, backend="eager")(x)
out.sum().backward()
torch.testing.assert_close(out, block(x))
with torch.no_grad():
    torch.testing.assert_close(kiln.compile(block, backend="eager")(x), block(x))
torch.testing.assert_close(kiln.compile(conv, backend="eager")(idx), conv(idx))
for n in (2.0, 3.0, 4.0):  # a recompile with a dynamic number, and a graph break
    torch.testing.assert_close(kiln.compile(broken, backend="eager")(x.detach(), n), broken(x.detach(), n))
print()
print("kiln:", loaded())
"""


def test_compiling_and_running_models_loads_no_torch_frontend_module():
    out = _run(_MODELS.format(frontend=FRONTEND))
    assert out.splitlines()[-1] == "kiln: []"


def test_torch_compile_after_kiln_in_one_process_is_unchanged():
    # kiln's scope is closed after each trace: torch.compile, loaded afterwards, builds its
    # own disabled twins and compiles the same models to the same answers.
    out = _run(_MODELS.format(frontend=FRONTEND) + """
import torch._dynamo
from kiln.symshapes.bridge._torch_internals import DYNAMO_DISABLE_ATTR, dynamo_disable_wrappers
wrapped = dynamo_disable_wrappers()
assert wrapped and not [f for f in wrapped if DYNAMO_DISABLE_ATTR in f.__dict__]
torch.testing.assert_close(torch.compile(block, backend="eager")(x), block(x))
torch.testing.assert_close(torch.compile(conv, backend="eager")(idx), conv(idx))
twins = [f.__dict__[DYNAMO_DISABLE_ATTR] for f in wrapped if DYNAMO_DISABLE_ATTR in f.__dict__]
assert twins and all(t is not f for t, f in zip(twins, wrapped))
print("torch.compile: ok")
""")
    assert out.splitlines()[-1] == "torch.compile: ok"


def test_scope_sets_and_removes_only_its_own_attributes():
    out = _run("""
        import sys
        import threading
        import torch
        from kiln.symshapes.bridge import no_frontend_import
        from kiln.symshapes.bridge._torch_internals import DYNAMO_DISABLE_ATTR, dynamo_disable_wrappers

        wrapped = dynamo_disable_wrappers()
        assert len(wrapped) > 50, len(wrapped)
        torch_set = wrapped[0]
        twin = lambda *a, **k: None
        setattr(torch_set, DYNAMO_DISABLE_ATTR, twin)  # as if torch had built its twin
        with no_frontend_import():
            assert all(getattr(f, DYNAMO_DISABLE_ATTR) is f for f in wrapped[1:])
            assert getattr(torch_set, DYNAMO_DISABLE_ATTR) is twin
            with no_frontend_import():  # nested: still set after the inner one closes
                pass
            assert all(getattr(f, DYNAMO_DISABLE_ATTR) is f for f in wrapped[1:])
            # a scope in another thread closing first leaves this one's attributes
            other = threading.Thread(target=lambda: list(no_frontend_import().gen))
            other.start()
            other.join()
            assert all(getattr(f, DYNAMO_DISABLE_ATTR) is f for f in wrapped[1:])
            # torch builds a real twin while the scope is open: it stays
            setattr(wrapped[1], DYNAMO_DISABLE_ATTR, twin)
            # torch's references (wrapped) run without importing torch._dynamo
            torch._refs.add(torch.ones(2), torch.ones(2), alpha=2)
            torch._refs.sigmoid(torch.ones(2, 3))
        assert getattr(torch_set, DYNAMO_DISABLE_ATTR) is twin
        assert getattr(wrapped[1], DYNAMO_DISABLE_ATTR) is twin
        assert not [f for f in wrapped[2:] if DYNAMO_DISABLE_ATTR in f.__dict__]
        assert "torch._dynamo" not in sys.modules
        # an exception inside the scope removes the attributes too
        try:
            with no_frontend_import():
                raise KeyError("user")
        except KeyError:
            pass
        assert not [f for f in wrapped[2:] if DYNAMO_DISABLE_ATTR in f.__dict__]
        # outside a scope the same call loads torch's frontend (what the scope prevents)
        torch._refs.add(torch.ones(2), torch.ones(2), alpha=2)
        assert "torch._dynamo" in sys.modules
        # once torch._dynamo is loaded the scope sets nothing
        with no_frontend_import():
            assert not [f for f in wrapped if f.__dict__.get(DYNAMO_DISABLE_ATTR) is f]
        print("ok")
    """)
    assert out.strip() == "ok"
