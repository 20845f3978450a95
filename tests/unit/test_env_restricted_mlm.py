"""restricted_mlm: the rules on real models, the graph hand-over, and prepare.py + score.py end to end.

The scorer never runs the participant's code: worker.py (in the participant's process) captures
the forward pass with torch.export and sends it as plain data; graph.py (in the scorer) checks
every operator against the allow-list of enforcer.py and runs the graph itself. The first part
of this file runs that same path in-process on small models: capture and pack as the worker
does, then load, check and run as the scorer does. Every forbidden case must end with the
operation named (or, for code that reads tensor values, a capture that fails), every allowed
case must give the same values as the plain model. Crafted graphs stand for a hostile worker:
whatever it sends, only allowed operators run. RMLM_TEST_DEVICE=cuda runs the graphs on a GPU
(reference/run_gpu.sh does).

The end-to-end tests run `prepare.py --profile smoke --mode synthetic` once (module fixture, with
a pinned secret so the scores are reproducible), lay out a home and a protected folder as the
container has them, and run score.py as a subprocess on the starting solution, a solution that
uses softmax, one with a syntax error and one with a wrong output shape. The trained reference is
scored once in the suite, by test_calibrate_smoke.py: trained as the participant in a container,
within the manifest's tolerance of its recorded figure (400 steps, minutes of CPU time).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.modules import load_file

ROOT = Path(__file__).resolve().parents[2]
ENV = ROOT / "environments" / "restricted_mlm"
LIB = ROOT / "rebench_tui" / "runtime" / "lib"
DEVICE = os.environ.get("RMLM_TEST_DEVICE", "cpu")
MANIFEST = tomllib.loads((ENV / "environment.toml").read_text())
SMOKE = MANIFEST["profiles"]["smoke"]
# The held-out windows and masks come from a seed drawn at prepare time, so the smoke scores vary
# a little from one prepared asset set to the next (measured over 40 seeds: the starting model's
# standard deviation 0.0065, range 1.236-1.259). The end-to-end tests pin the seed
# (RMLM_SECRET_SEED, the one the manifest's scores were measured with); the tolerances cover other
# CPUs' float rounding and, in the container tests that use the cache's random seed, the spread.
START_TOLERANCE = 0.03
PINNED_SECRET = "20261203"

if str(LIB) not in sys.path:
    sys.path.insert(0, str(LIB))  # worker.pack uses rebench_scorer.arrays
enforcer = load_file("enforcer", ENV / "protected" / "enforcer.py")  # graph.py imports it by this name
graph = load_file("rmlm_graph", ENV / "protected" / "graph.py")
worker = load_file("rmlm_worker", ENV / "protected" / "worker.py")


class Fn(nn.Module):
    """A model whose forward pass is ``fn(x)``; modules in ``parts`` are its submodules."""

    def __init__(self, fn, **parts) -> None:
        super().__init__()
        self.fn = fn
        for name, part in parts.items():
            setattr(self, name, part)

    def forward(self, x):
        return self.fn(self, x)


def handed_over(model: nn.Module, example: torch.Tensor):
    """Capture and pack as the worker does; load and check as the scorer does: a graph.Graph."""
    model = model.to("cpu").eval()
    ep = worker.capture(model, example.cpu(), torch)
    plain, tensors = worker.to_plain(ep, torch, str(ENV))
    fd, offset, size = worker.pack(plain, tensors, torch)
    try:
        return graph.Graph({"ok": True, "graph_offset": offset, "graph_bytes": size}, [fd], device=DEVICE,
                           max_bytes=1 << 30)
    finally:
        os.close(fd)


def through_scorer(model: nn.Module, example: torch.Tensor):
    """("ok", output) | ("disallowed_operation", text) | ("error", text) | ("capture", text)."""
    try:
        g = handed_over(model, example)
    except graph.Invalid as exc:
        return next(iter(exc.message.items()))
    except Exception as exc:  # noqa: BLE001 - torch.export's refusal
        return "capture", f"{type(exc).__name__}: {exc}"
    try:
        return "ok", g.run(example.to(DEVICE))
    except graph.Invalid as exc:
        return next(iter(exc.message.items()))


def _x(*shape):
    torch.manual_seed(0)
    return torch.randn(*shape or (2, 5, 4))


def _ids():
    torch.manual_seed(0)
    return torch.randint(0, 10, (2, 5))


def _mask():
    torch.manual_seed(1)
    return torch.randn(2, 5, 4) > 0


class _ExpFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a.exp()

    @staticmethod
    def backward(ctx, grad):
        return grad


def _sigmoid(a: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(a)


with warnings.catch_warnings():  # torch.jit.script is deprecated, but models may still use it
    warnings.simplefilter("ignore", DeprecationWarning)
    _scripted_sigmoid = torch.jit.script(_sigmoid)


@torch.library.custom_op("rmlm_test::exp_op", mutates_args=())
def _custom_exp(a: torch.Tensor) -> torch.Tensor:
    return a.exp()


@_custom_exp.register_fake
def _(a):
    return torch.empty_like(a)


def _inplace_truediv(m, x):
    y = x.clone()
    y /= 2
    return y


W = _x(10, 4)
MASK = _mask()
X, IDS = _x(), _ids()
# exp by table lookup, once the values are integers: the table is a constant made outside the forward
_EXP_TABLE = torch.arange(-64, 64, dtype=torch.float32).exp()


def _exp_by_lookup_through_as_strided_scatter(m, x):
    """Float to int inside a writing operator that copies with a cast, then a table lookup."""
    n = x.numel()
    ids = torch.as_strided_scatter(torch.zeros(n, dtype=torch.long), x.reshape(-1) + 64.0, (n,), (1,))
    return _EXP_TABLE[ids].reshape(x.shape)


def _float_to_bool_through_diagonal_scatter(m, x):
    """``x > 0`` without a comparison: float to bool inside diagonal_scatter, then a mask."""
    n = x.shape[-1]
    mask = torch.diagonal_scatter(torch.zeros(n, n, dtype=torch.bool), x[0].relu())
    return x * torch.diagonal(mask).to(x.dtype)


def _float_to_int_through_diagonal_scatter(m, x):
    n = x.shape[-1]
    return torch.diagonal(torch.diagonal_scatter(torch.zeros(n, n, dtype=torch.long), x[0] * 3.0)).to(x.dtype) + x
# name: (model, example input, what the outcome must contain). "capture" outcomes are code that
# reads tensor values, which torch.export refuses (the input is symbolic while it is captured).
FORBIDDEN = {
    "float -> int64 in as_strided_scatter, exp by lookup": (Fn(_exp_by_lookup_through_as_strided_scatter), X,
                                                            "conversion from float32 to int64"),
    "float -> bool in diagonal_scatter (a comparison)": (Fn(_float_to_bool_through_diagonal_scatter), X,
                                                         "conversion from float32 to bool"),
    "float -> int64 in diagonal_scatter": (Fn(_float_to_int_through_diagonal_scatter), X, "conversion from float32 to int64"),
    "operator x / y": (Fn(lambda m, x: x / (x + 1)), X, "aten.div.Tensor (x / y, division)"),
    "operator 1 / x": (Fn(lambda m, x: 1 / x), X, "aten.reciprocal"),
    "operator ids // 2": (Fn(lambda m, i: i // 2), IDS, "aten.floor_divide"),
    "operator ids % 3": (Fn(lambda m, i: i % 3), IDS, "aten.remainder"),
    "operator x ** 2": (Fn(lambda m, x: x ** 2), X, "aten.pow"),
    "operator x /= 2 (in place)": (Fn(_inplace_truediv), X, "aten.div"),
    "method x.div": (Fn(lambda m, x: x.div(2)), X, "aten.div"),
    "method x.exp": (Fn(lambda m, x: x.exp()), X, "aten.exp"),
    "method x.softmax": (Fn(lambda m, x: x.softmax(-1)), X, "softmax"),
    "method x.mean (divides)": (Fn(lambda m, x: x.mean(1)), X, "aten.mean"),
    "method x.max": (Fn(lambda m, x: x.max()), X, "aten.max"),
    "method x.abs": (Fn(lambda m, x: x.abs()), X, "aten.abs"),
    "in-place div_": (Fn(lambda m, x: x.clone().div_(2)), X, "aten.div"),
    "in-place exp_": (Fn(lambda m, x: x.clone().exp_()), X, "aten.exp"),
    "torch.exp": (Fn(lambda m, x: torch.exp(x)), X, "aten.exp"),
    "torch.softmax": (Fn(lambda m, x: torch.softmax(x, -1)), X, "softmax"),
    "torch.sigmoid": (Fn(lambda m, x: torch.sigmoid(x)), X, "aten.sigmoid"),
    "torch.tanh": (Fn(lambda m, x: torch.tanh(x)), X, "aten.tanh"),
    "torch.sqrt": (Fn(lambda m, x: torch.sqrt(x)), X, "aten.sqrt"),
    "torch.rsqrt": (Fn(lambda m, x: torch.rsqrt(x)), X, "aten.rsqrt"),
    "torch.log": (Fn(lambda m, x: torch.log(x)), X, "aten.log"),
    "torch.pow": (Fn(lambda m, x: torch.pow(x, 3)), X, "aten.pow"),
    "torch.square": (Fn(lambda m, x: torch.square(x)), X, "power"),
    "torch.clamp": (Fn(lambda m, x: torch.clamp(x, min=0)), X, "aten.clamp"),
    "torch.where with a constant mask": (Fn(lambda m, x: torch.where(MASK, x, 0.0)), X, "aten.where"),
    "comparison x > 0": (Fn(lambda m, x: x > 0), X, "aten.gt"),
    "masked_fill with a constant mask": (Fn(lambda m, x: x.masked_fill(MASK, 0.0)), X, "aten.masked_fill"),
    "F.softmax": (Fn(lambda m, x: F.softmax(x, dim=-1)), X, "softmax"),
    "F.log_softmax": (Fn(lambda m, x: F.log_softmax(x, dim=-1)), X, "log_softmax"),
    "F.gelu": (Fn(lambda m, x: F.gelu(x)), X, "aten.gelu"),
    "F.silu": (Fn(lambda m, x: F.silu(x)), X, "aten.silu"),
    "F.leaky_relu": (Fn(lambda m, x: F.leaky_relu(x)), X, "leaky_relu"),
    "F.layer_norm": (Fn(lambda m, x: F.layer_norm(x, (4,))), X, "layer_norm"),
    "F.normalize": (Fn(lambda m, x: F.normalize(x, dim=-1)), X, "aten.linalg_vector_norm"),
    "F.scaled_dot_product_attention": (Fn(lambda m, x: F.scaled_dot_product_attention(x, x, x)), X, "attention"),
    "F.pad with mode='reflect'": (Fn(lambda m, x: F.pad(x, (1, 1), mode="reflect")), X, "aten.reflection_pad1d"),
    "nn.LayerNorm": (Fn(lambda m, x: m.norm(x), norm=nn.LayerNorm(4)), X, "layer_norm"),
    "nn.Softmax": (Fn(lambda m, x: m.soft(x), soft=nn.Softmax(dim=-1)), X, "softmax"),
    "nn.GELU": (Fn(lambda m, x: m.act(x), act=nn.GELU()), X, "aten.gelu"),
    "nn.MultiheadAttention": (Fn(lambda m, x: m.att(x, x, x)[0], att=nn.MultiheadAttention(4, 1, batch_first=True)), X,
                              "softmax"),
    "nn.Sequential with a Tanh inside": (Fn(lambda m, x: m.seq(x), seq=nn.Sequential(nn.Linear(4, 4), nn.Tanh())), X,
                                         "aten.tanh"),
    "einsum, then division": (Fn(lambda m, x: torch.einsum("bij->bi", x) / 3), X, "aten.div.Tensor"),
    "aten operator called directly": (Fn(lambda m, x: torch.ops.aten.exp.default(x)), X, "aten.exp.default"),
    "custom autograd.Function": (Fn(lambda m, x: _ExpFunction.apply(x)), X, "aten.exp"),
    "TorchScript function": (Fn(lambda m, x: _scripted_sigmoid(x)), X, "aten.sigmoid"),
    "custom operator (torch.library)": (Fn(lambda m, x: _custom_exp(x)), X, "rmlm_test.exp_op"),
    "float -> int conversion": (Fn(lambda m, x: x.long()), X, "conversion from float32 to int64"),
    "sum with an integer dtype (truncates)": (Fn(lambda m, x: x.sum(dtype=torch.int64)), X,
                                              "conversion from float32 to int64"),
    "bit reinterpretation view(dtype)": (Fn(lambda m, x: x.view(torch.int32)), X, "aten.view.dtype"),
    "random numbers": (Fn(lambda m, x: x + torch.rand(x.shape)), X, "aten.rand"),
    "embedding_bag mean": (Fn(lambda m, i: F.embedding_bag(i, W, mode="mean")), IDS, "mode=mean"),
    "x.item()": (Fn(lambda m, x: x + x.sum().item()), X, "aten.item"),
    "float(x)": (Fn(lambda m, x: x * float(x.sum())), X, "capture"),
    "x.numpy()": (Fn(lambda m, x: x.numpy()), X, "capture"),
    "x.data_ptr() (custom kernels)": (Fn(lambda m, x: x + x.data_ptr()), X, "capture"),
    "if x.sum() > 0: (data-dependent branch)": (Fn(lambda m, x: x if x.sum() > 0 else -x), X, "capture"),
}


@pytest.mark.parametrize("name", list(FORBIDDEN))
def test_forbidden_operation_is_rejected(name):
    model, example, expected = FORBIDDEN[name]
    kind, detail = through_scorer(model, example)
    if expected == "capture":
        assert kind in ("capture", "disallowed_operation"), (name, kind, detail)
        return
    assert kind == "disallowed_operation", (name, kind, detail)
    assert expected in detail, f"{name}: reported {detail!r}"


def _exp_from_allowed_operations(m, x):
    """exp(x) for |x| <= 4 from + and * alone: exp(x / 256) by its Taylor series, squared eight times."""
    y = x * (1 / 256)
    e = 1 + y * (1 + y * (1 / 2 + y * (1 / 6 + y * (1 / 24 + y * (1 / 120)))))
    for _ in range(8):
        e = e * e
    return e


def test_an_approximation_of_a_forbidden_function_from_allowed_operations_is_allowed():
    """The instructions' rule: what is checked is the operations, not what they compute. An exp
    built from + and * passes the operation check and runs, as close to exp as it gets."""
    x = torch.linspace(-4, 4, 64).reshape(8, 8)
    kind, out = through_scorer(Fn(_exp_from_allowed_operations), x)
    assert kind == "ok", out
    assert torch.allclose(out.cpu(), torch.exp(x), rtol=1e-4)  # float32 rounding through eight squarings
    assert "allowed operations" in (ENV / "instructions.md").read_text() and "is allowed, however close" in \
        (ENV / "instructions.md").read_text()


def _index_assign(m, x):
    y = x.clone()
    y[:, 0] = 0.0
    y[:, 1] = x[:, 2]
    y[torch.tensor([0])] = x[1:]
    return y


class _Autocast(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.lin(x).float()


class _Precomputed(nn.Module):
    """Constants made with forbidden operations outside the forward pass are just weights."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.softmax(W, -1)[:, :4].sum(0))

    def forward(self, x):
        return x * self.scale


def _starting_model():
    model_mod = load_file("rmlm_start_model", ENV / "solution" / "model.py")
    torch.manual_seed(0)
    return model_mod.build("tiny")


def _reference_model():
    model_mod = load_file("rmlm_ref_model", ENV / "reference" / "model.py")
    torch.manual_seed(0)
    return model_mod.build("tiny")


def _seq():
    torch.manual_seed(0)
    return torch.randint(0, 50257, (2, 128))


ALLOWED = {
    "nn.Linear": (Fn(lambda m, x: m.lin(x), lin=nn.Linear(4, 3)), X),
    "nn.Linear without bias on 2-D input": (Fn(lambda m, x: m.lin(x[0]), lin=nn.Linear(4, 3, bias=False)), X),
    "nn.Embedding": (Fn(lambda m, i: m.emb(i), emb=nn.Embedding(10, 4)), IDS),
    "F.embedding_bag sum": (Fn(lambda m, i: F.embedding_bag(i, W, mode="sum")), IDS),
    "torch.matmul": (Fn(lambda m, x: torch.matmul(x, x.transpose(1, 2))), X),
    "operator @": (Fn(lambda m, x: x @ W.T), X),
    "torch.bmm": (Fn(lambda m, x: torch.bmm(x, x.transpose(1, 2))), X),
    "einsum contraction": (Fn(lambda m, x: torch.einsum("bij,bkj->bik", x, x)), X),
    "einsum reduction": (Fn(lambda m, x: torch.einsum("bij->b", x)), X),
    "sum": (Fn(lambda m, x: x.sum()), X),
    "sum over a dim": (Fn(lambda m, x: x.sum(dim=1, keepdim=True)), X),
    "cumsum": (Fn(lambda m, x: x.cumsum(1)), X),
    "sum of integer ids in int64": (Fn(lambda m, i: i.sum(dtype=torch.int64) + (i * 50257 + i).sum()), IDS),
    "operator +": (Fn(lambda m, x: x + x + 1), X),
    "operator - and negation": (Fn(lambda m, x: 1 - x - (-x)), X),
    "operator *": (Fn(lambda m, x: x * x), X),
    "multiply by a constant (instead of dividing)": (Fn(lambda m, x: x * (1.0 / 128)), X),
    "in-place add_ and mul_": (Fn(lambda m, x: x.clone().add_(1).mul_(2)), X),
    "torch.relu": (Fn(lambda m, x: torch.relu(x)), X),
    "F.relu": (Fn(lambda m, x: F.relu(x)), X),
    "nn.ReLU in nn.Sequential": (Fn(lambda m, x: m.seq(x), seq=nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))), X),
    "nn.Dropout in eval mode": (Fn(lambda m, x: m.drop(x), drop=nn.Dropout(0.1)), X),
    "integer indexing": (Fn(lambda m, x: x[0, 1]), X),
    "slicing and None": (Fn(lambda m, x: x[:, 1:3, None]), X),
    "index tensor": (Fn(lambda m, x: x[torch.tensor([1, 0, 1])]), X),
    "index with the input's ids": (Fn(lambda m, i: W[i]), IDS),
    "index assignment": (Fn(_index_assign), X),
    "gather": (Fn(lambda m, x: x.gather(1, torch.zeros(2, 5, 4, dtype=torch.long))), X),
    "index_select": (Fn(lambda m, x: x.index_select(1, torch.tensor([0, 2]))), X),
    "reshape of a non-contiguous tensor": (Fn(lambda m, x: x.transpose(0, 1).reshape(10, 4)), X),
    "view": (Fn(lambda m, x: x.view(-1)), X),
    "permute": (Fn(lambda m, x: x.permute(2, 0, 1)), X),
    "transpose and .T": (Fn(lambda m, x: x.transpose(1, 2)[0].T), X),
    "cat": (Fn(lambda m, x: torch.cat([x, x], dim=1)), X),
    "stack": (Fn(lambda m, x: torch.stack([x, x])), X),
    "unsqueeze and squeeze": (Fn(lambda m, x: x.unsqueeze(0).squeeze(0)[:, :1].squeeze(1)), X),
    "contiguous": (Fn(lambda m, x: x.transpose(0, 1).contiguous()), X),
    "clone and detach": (Fn(lambda m, x: x.clone().detach()), X),
    "expand": (Fn(lambda m, x: x[:, :1].expand(2, 5, 4)), X),
    "split, chunk, unbind": (Fn(lambda m, x: torch.cat(x.split(2, 1) + x.chunk(2, 1)[:1] + (x.unbind(1)[0][:, None],), 1)), X),
    "flip, roll, tril": (Fn(lambda m, x: x.flip(1).roll(1, 1).tril()), X),
    "unfold (sliding windows)": (Fn(lambda m, x: x.unfold(1, 3, 1)), X),
    "F.pad with zeros": (Fn(lambda m, x: F.pad(x, (0, 0, 1, 1))), X),
    "constants: zeros_like, new_zeros, arange, full": (Fn(lambda m, x: torch.zeros_like(x) + x.new_zeros(4) + torch.arange(4, device=x.device) + torch.full((4,), 2.0, device=x.device)), X),
    "ids to float and bfloat16": (Fn(lambda m, i: i.float() + i.to(torch.bfloat16).float()), IDS),
    "autocast to bfloat16": (_Autocast(), X),
    "shape arithmetic in Python": (Fn(lambda m, x: x.reshape(x.shape[0] * x.size(1), -1)), X),
    "weights computed with any operation before the forward pass": (_Precomputed(), X),
    "the starting model (tiny)": (_starting_model(), _seq()),
    "the reference model (tiny)": (_reference_model(), _seq()),
}


@pytest.mark.parametrize("name", list(ALLOWED))
def test_permitted_operation_runs_in_the_scorer_with_the_same_values(name):
    model, example = ALLOWED[name]
    with torch.no_grad():
        expected = model.eval()(example)
    kind, got = through_scorer(model, example)
    assert kind == "ok", (name, kind, got)
    if DEVICE == "cpu":
        torch.testing.assert_close(got, expected)  # the same kernels as the plain model: equal
    else:  # the plain model ran on the CPU
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-3, atol=1e-3)


def test_message_names_the_operator_and_the_line_of_model_code():
    kind, detail = through_scorer(Fn(lambda m, x: x / 3), X)
    assert kind == "disallowed_operation"
    assert detail.startswith("aten.div.Tensor (x / y, division) at test_env_restricted_mlm.py:"), detail


def test_allow_list_is_an_allow_list():
    assert enforcer.check_aten(torch.ops.aten.addmm.default) is None
    assert enforcer.check_aten(torch.ops.aten.view.default) is None
    assert enforcer.check_aten(torch.ops.aten.view.dtype) is not None
    assert enforcer.check_aten(torch.ops.aten.scatter.reduce) is not None
    # an operator nobody thought of is rejected by default
    assert enforcer.check_aten(torch.ops.aten.special_bessel_j0.default) == "aten.special_bessel_j0.default"
    assert enforcer.check_name("aten.addmm.default") is None
    assert enforcer.check_name("aten.special_bessel_j0.default") == "aten.special_bessel_j0.default"
    assert enforcer.check_name("myns.add.default") == "myns.add.default"  # only the aten namespace
    assert "not an operator name" in enforcer.check_name("os.system")
    assert "not an operator name" in enforcer.check_name("aten.add.Tensor; import os")


def test_every_operator_is_held_to_what_it_does_to_dtypes():
    """No float value may reach an integer or boolean result, whatever the operator is called: the
    rule is judged on the tensors that went in and came out, so an allowed operator that nobody
    gave a condition to is held to it too; operators that take only a shape are exempt."""
    f, i, b = torch.ones(3), torch.ones(3, dtype=torch.long), torch.ones(3, dtype=torch.bool)
    aten = torch.ops.aten
    assert enforcer.dtype_flow(aten.clone.default, (f,), {}, i) == "conversion from float32 to int64"
    assert enforcer.dtype_flow(aten.as_strided_scatter.default, (i, f, [3], [1]), {}, i) == "conversion from float32 to int64"
    assert enforcer.dtype_flow(aten.diagonal_scatter.default, (b, f), {}, b) == "conversion from float32 to bool"
    assert enforcer.dtype_flow(aten.index_put_.default, (i, [i], f), {}, i) is not None
    assert enforcer.dtype_flow(aten.cat.default, ([i, f],), {}, f) is None        # promoted to float: fine
    assert enforcer.dtype_flow(aten.add.Tensor, (i, i), {}, i) is None            # integers from integers
    assert enforcer.dtype_flow(aten.zeros_like.default, (f,), {"dtype": torch.long}, i) is None  # shape only
    for op in ("diagonal_scatter", "as_strided_scatter", "slice_scatter", "select_scatter"):
        assert f"aten.{op}" in enforcer._CONDITIONS, op  # checked before they run, too


def test_the_graph_is_a_pure_function_of_the_weights_and_the_input():
    """No state survives from one batch to the next: in-place writes never reach the scorer's
    tensors (the capture is functional), so the same input gives the same output."""
    class Memo(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("seen", torch.zeros(2, 5, 4))

        def forward(self, x):
            out = x + self.seen
            self.seen.add_(x)  # tries to remember the inputs
            return out

    g = handed_over(Memo(), X)
    first = g.run(X.to(DEVICE)).cpu()
    again = g.run(_x(2, 5, 4).mul(3).to(DEVICE))
    torch.testing.assert_close(g.run(X.to(DEVICE)).cpu(), first)
    assert again.shape == first.shape
    torch.testing.assert_close(first, X)


# -- a hostile worker: graphs written by hand --------------------------------------------------
def crafted(nodes: list, tensors: dict | None = None, *, input_name: str = "x", output: str | None = None,
            raw: bytes | None = None, fd_kind: str = "memfd", tensor_patch: dict | None = None):
    """Load a hand-written graph as the scorer would: Graph or Invalid."""
    tensors = tensors or {}
    entries, blobs, offset = [], [], 0
    for name, t in tensors.items():
        data = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        entries.append({"name": name, "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                        "offset": offset, "nbytes": len(data)})
        blobs.append(data.ljust(-(-len(data) // 64) * 64, b"\0"))
        offset += len(blobs[-1])
    for e in entries:
        e.update(tensor_patch or {})
    spec = {"format": "rmlm-graph-1", "input": input_name, "output": output or nodes[-1]["name"], "tensors": entries,
            "nodes": nodes}
    body = raw if raw is not None else json.dumps(spec).encode()
    data = b"".join(blobs) + body
    if fd_kind == "pipe":
        r, w = os.pipe()
        os.write(w, data)
        os.close(w)
        fd = r
    else:
        fd = os.memfd_create("crafted")
        os.write(fd, data)
        if fd_kind == "short":
            os.ftruncate(fd, len(data) // 2)
    header = {"ok": True, "graph_offset": offset, "graph_bytes": len(body)}
    try:
        return graph.Graph(header, [fd], device=DEVICE, max_bytes=1 << 30)
    finally:
        os.close(fd)


def node(name, op, *args, **kwargs):
    return {"name": name, "op": op, "args": list(args), "kwargs": kwargs}


def ref(name):
    return {"ref": name}


def _invalid(**kwargs) -> dict:
    with pytest.raises(graph.Invalid) as info:
        g = crafted(**kwargs)
        g.run(X.to(DEVICE))
    return info.value.message


CRAFTED = {
    # name: (crafted() arguments, key of the message, text it must contain)
    "an operator outside the allow-list": (
        {"nodes": [node("y", "aten.exp.default", ref("x"))]}, "disallowed_operation", "aten.exp.default"),
    "an operator of another namespace": (
        {"nodes": [node("y", "rmlm_test.exp_op.default", ref("x"))]}, "disallowed_operation", "rmlm_test.exp_op"),
    "a Python function instead of an operator": (
        {"nodes": [node("y", "builtins.eval", "1")]}, "disallowed_operation", "builtins.eval"),
    "not an operator name at all": (
        {"nodes": [node("y", "__import__('os').system", "id")]}, "disallowed_operation", "not an operator name"),
    "an in-place write into a weight (state across batches)": (
        {"nodes": [node("y", "aten.add_.Tensor", ref("w"), ref("x"))], "tensors": {"w": torch.zeros(2, 5, 4)}},
        "error", "writes into its arguments"),
    "an out= variant": (
        {"nodes": [node("y", "aten.add.out", ref("x"), ref("x"), out=ref("x"))]}, "error", "writes into its arguments"),
    "a float-to-int conversion hidden in arguments": (
        {"nodes": [node("y", "aten._to_copy.default", ref("x"), dtype={"dtype": "int64"})]},
        "disallowed_operation", "conversion from float32 to int64"),
    "a reference to a later node (a cycle)": (
        {"nodes": [node("a", "aten.add.Tensor", ref("x"), ref("b")), node("b", "aten.add.Tensor", ref("x"), ref("a"))]},
        "error", "earlier node"),
    "a reference to nothing": ({"nodes": [node("y", "aten.add.Tensor", ref("x"), ref("labels"))]}, "error", "earlier node"),
    "an argument the format does not have": (
        {"nodes": [node("y", "aten.add.Tensor", ref("x"), {"pickle": "gASV"})]}, "error", "not one the format allows"),
    "a device the scorer does not use": (
        {"nodes": [node("y", "aten._to_copy.default", ref("x"), device={"device": "meta"})]}, "error",
        "not one the format allows"),
    "a tensor outside the buffer": (
        {"nodes": [node("y", "aten.add.Tensor", ref("x"), ref("w"))], "tensors": {"w": torch.zeros(4)},
         "tensor_patch": {"offset": 1 << 20}}, "error", "tensor offset"),
    "a buffer that is not a memory file": (
        {"nodes": [node("y", "aten.add.Tensor", ref("x"), ref("x"))], "fd_kind": "pipe"}, "error", "not a memory file"),
    "a buffer shorter than announced": (
        {"nodes": [node("y", "aten.add.Tensor", ref("x"), ref("x"))], "fd_kind": "short"}, "error", "not a memory file"),
    "a description that is not JSON": (
        {"nodes": [node("y", "aten.add.Tensor", ref("x"), ref("x"))], "raw": b"\x80\x04pickle"}, "error", "not JSON"),
    "a name given twice": (
        {"nodes": [node("x", "aten.add.Tensor", ref("x"), ref("x"))]}, "error", "twice"),
    "getitem of something that has no items": (
        {"nodes": [node("y", "aten.add.Tensor", ref("x"), ref("x")), node("z", "getitem", ref("y"), 5)]}, "error",
        "no such item"),
    "arguments nested too deeply": (
        {"nodes": [node("y", "aten.cat.default", [[[[[[[[ref("x")]]]]]]]])]}, "error", "nested too deeply"),
    "reflection padding through aten.pad": (
        {"nodes": [node("y", "aten.pad.default", ref("x"), [1, 1], "reflect")]}, "disallowed_operation",
        "aten.reflection_pad1d"),
}


@pytest.mark.parametrize("name", list(CRAFTED))
def test_crafted_graph_is_refused(name):
    kwargs, key, text = CRAFTED[name]
    message = _invalid(**kwargs)
    assert key in message and text in message[key], (name, message)


def test_uninitialised_memory_never_reaches_the_graph():
    """empty / empty_strided results are zeroed, gaps between their strides included."""
    g = crafted([node("e", "aten.empty_strided.default", [2], [1000], dtype={"dtype": "float32"},
                      device={"device": "cpu"}),
                 node("v", "aten.as_strided.default", ref("e"), [1001], [1]),
                 node("y", "aten.add.Tensor", ref("v"), 0.0)])
    assert g.run(X.to(DEVICE)).abs().sum().item() == 0.0


def test_a_crafted_graph_of_allowed_operators_runs():
    """The format is not tied to torch.export: anything of allowed operators is a fair model."""
    w = _x(4, 3)
    g = crafted([node("t", "aten.mm.default", ref("x2"), ref("w")), node("r", "aten.relu.default", ref("t"))],
                {"w": w}, input_name="x2")
    x2 = _x(6, 4)
    torch.testing.assert_close(g.run(x2.to(DEVICE)).cpu(), torch.relu(x2 @ w))


# -- end to end: prepare.py and score.py as the workstation runs them ----------------------------
@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("rmlm_assets")
    proc = subprocess.run([sys.executable, str(ENV / "prepare.py"), "--profile", "smoke", "--mode", "synthetic",
                           "--out", str(out), "--work", str(out / "work")],
                          capture_output=True, text=True, timeout=300, cwd=ENV,
                          env={**os.environ, "RMLM_SECRET_SEED": PINNED_SECRET})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stdout


def _layout(base: Path, assets: Path, files: dict[str, str | Path]) -> tuple[Path, Path]:
    """HOME with solution/ and assets/, and PROTECTED with the scorer and assets/, like a container."""
    home, protected = base / "home", base / "protected"
    (home / "solution").mkdir(parents=True)
    shutil.copytree(assets / "workspace", home / "assets")
    shutil.copytree(ENV / "protected", protected)
    shutil.copytree(assets / "protected", protected / "assets")
    shutil.copytree(ENV / "solution", protected / "starting_solution")
    for name, content in files.items():
        target = home / "solution" / name
        if isinstance(content, Path):
            shutil.copy(content, target)
        else:
            target.write_text(content)
    return home, protected


def _score(home: Path, protected: Path) -> dict:
    env = {**os.environ, "REBENCH_HOME": str(home), "REBENCH_PROTECTED": str(protected), "REBENCH_PROFILE": "smoke",
           "REBENCH_SCORER_LIB": str(LIB)}
    env.pop("REBENCH_ISOLATED", None)
    proc = subprocess.run([sys.executable, str(protected / "score.py")], capture_output=True, text=True, env=env,
                          timeout=120, cwd=home)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1])


def _starting_files() -> dict[str, Path]:
    return {"model.py": ENV / "solution" / "model.py", "train.py": ENV / "solution" / "train.py"}


def test_prepare_writes_the_assets(prepared):
    out, stdout = prepared
    assert any(line.startswith("PROGRESS ") for line in stdout.splitlines())
    import numpy as np

    train = np.fromfile(out / "workspace" / "train.bin", dtype=np.uint16)
    val = np.fromfile(out / "protected" / "val.bin", dtype=np.uint16)
    assert len(train) == 4_000_000 and len(val) == 300_000
    assert 50256 not in set(np.unique(train[:100_000]).tolist())  # the mask id is reserved
    assert len(np.unique(train)) <= 256
    info = json.loads((out / "workspace" / "data_info.json").read_text())
    assert info["profile"] == "smoke" and info["mask_id"] == 50256 and info["vocab_size"] == 50257
    assert (out / "workspace" / "start_checkpoint.pt").is_file()
    secret = json.loads((out / "protected" / "secret.json").read_text())
    assert secret["pinned"] is True and isinstance(secret["val_seed"], int)
    public = "".join(p.read_text() for p in (out / "workspace").glob("*.json"))
    assert str(secret["val_seed"]) not in public and "seed" not in public  # the participant's assets hold no seed


def test_prepare_draws_its_secrets_at_random(monkeypatch):
    prepare = load_file("rmlm_prepare", ENV / "prepare.py")
    monkeypatch.delenv("RMLM_SECRET_SEED", raising=False)
    a, b = prepare.draw_secrets(), prepare.draw_secrets()
    assert a["pinned"] is False and a["val_seed"] != b["val_seed"] and a["split_seed"] != b["split_seed"]
    assert a["val_seed"] != a["val_sample_seed"] != a["split_seed"]
    monkeypatch.setenv("RMLM_SECRET_SEED", "7")
    assert prepare.draw_secrets() == prepare.draw_secrets()
    score_py = (ENV / "protected" / "score.py").read_text()
    assert "VAL_SEED" not in score_py and "271_828" not in score_py  # no seed constant in the scorer


def test_prepare_from_pretokenized_source(prepared, tmp_path):
    out, _ = prepared
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(out / "workspace" / "train.bin", source / "train.bin")
    shutil.copy(out / "protected" / "val.bin", source / "val.bin")
    dest = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ENV / "prepare.py"), "--profile", "smoke", "--mode", "from", "--source",
                           str(source), "--out", str(dest), "--work", str(tmp_path / "work")],
                          capture_output=True, text=True, timeout=300, cwd=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (dest / "workspace" / "train.bin").read_bytes() == (source / "train.bin").read_bytes()
    assert (dest / "protected" / "val.bin").read_bytes() == (source / "val.bin").read_bytes()
    assert (dest / "workspace" / "start_checkpoint.pt").is_file()


def test_prepare_reads_and_splits_documents(tmp_path):
    """The documents path of --mode from, with a byte-level stand-in for GPT-2's tokenizer (tiktoken
    and transformers are not installed here; prepare.py asks for them by name when they are missing)."""
    import numpy as np

    prepare = load_file("rmlm_prepare", ENV / "prepare.py")
    source = tmp_path / "docs"
    (source / "sub").mkdir(parents=True)
    (source / "a.txt").write_text("first document")
    (source / "sub" / "b.jsonl").write_text(json.dumps({"text": "second"}) + "\n\n" + json.dumps({"text": "third one"}) + "\n")
    docs = list(prepare.iter_documents(source))
    assert docs == ["first document", "second", "third one"]

    def encode(texts):
        return [list(t.encode()) for t in texts]

    writer = prepare.SplitWriter(tmp_path / "val.bin", tmp_path / "train.bin", val=10, train=12)
    for doc in docs:
        writer.add(prepare.encode_docs(encode, [doc]))
    writer.close()
    val = np.fromfile(tmp_path / "val.bin", dtype=np.uint16)
    train = np.fromfile(tmp_path / "train.bin", dtype=np.uint16)
    assert val.tolist() == list(b"first document") + [50256]  # whole documents, each ended by <|endoftext|>
    assert train.tolist() == list(b"second") + [50256] + list(b"third")  # cut at the training budget
    assert writer.full


def test_prepare_holds_out_documents_chosen_by_its_secret(tmp_path):
    """With prepare's generator, held-out documents are scattered through the stream, whole, and
    which ones depends on the seed."""
    import numpy as np

    prepare = load_file("rmlm_prepare", ENV / "prepare.py")
    docs = [np.array([i] * 9 + [50256], dtype=np.uint16) for i in range(1, 401)]
    stream = np.concatenate(docs)

    def held_out(seed: int) -> list[int]:
        writer = prepare.SplitWriter(tmp_path / f"v{seed}.bin", tmp_path / f"t{seed}.bin", val=400, train=3600,
                                     rng=np.random.default_rng(seed))
        writer.add(stream[:1234])  # chunk borders inside documents are fine: documents end at 50256
        writer.add(stream[1234:])
        writer.close()
        val = np.fromfile(tmp_path / f"v{seed}.bin", dtype=np.uint16)
        train = np.fromfile(tmp_path / f"t{seed}.bin", dtype=np.uint16)
        assert 0 < len(val) <= 410 and len(train) <= 3600
        assert len(val) % 10 == 0 and (val[9::10] == 50256).all()  # whole documents only
        return sorted(set(val[val != 50256].tolist()))

    a, b = held_out(1), held_out(2)
    assert 20 <= len(a) <= 41 and a != b
    assert max(a) > 100  # not just the first documents


def test_prepare_from_without_source_fails_clearly(tmp_path):
    proc = subprocess.run([sys.executable, str(ENV / "prepare.py"), "--profile", "smoke", "--mode", "from",
                           "--source", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w")],
                          capture_output=True, text=True, timeout=60, cwd=ENV)
    assert proc.returncode != 0 and "--source" in proc.stderr


def test_starting_solution_scores_as_the_manifest_says(prepared, tmp_path):
    home, protected = _layout(tmp_path, prepared[0], _starting_files())
    result = _score(home, protected)
    assert isinstance(result["score"], float) and math.isfinite(result["score"]), result
    assert abs(result["score"] - SMOKE["start_score"]) <= START_TOLERANCE, result
    assert result["score"] == pytest.approx(math.log(result["message"]["loss"] - 1.5), abs=1e-3)
    assert result["message"]["execution_time"] > 0
    assert result["details"]["masked_tokens"] == 8 * 8 * 19
    assert result["details"]["graph_nodes"] > 5 and result["details"]["parameters"] > 0


FORBIDDEN_MODEL = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class SoftmaxModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50257, 8)
        self.head = nn.Linear(8, 50257)

    def forward(self, ids):
        h = F.softmax(self.emb(ids), dim=-1)  # forbidden
        return self.head(h)


def get_trained_model():
    return SoftmaxModel()
'''

WRONG_SHAPE_MODEL = '''
import torch.nn as nn


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50257, 10)

    def forward(self, ids):
        return self.emb(ids)  # (batch, 128, 10): not the vocabulary


def get_trained_model():
    return Small()
'''


DATA_DEPENDENT_MODEL = '''
import torch.nn as nn


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50257, 4)
        self.head = nn.Linear(4, 50257)

    def forward(self, ids):
        if ids[0, 0] == 50256:  # reads a value of the input: not capturable
            return self.head(self.emb(ids))
        return self.head(self.emb(ids)) * 2


def get_trained_model():
    return Branchy()
'''


def test_forbidden_operation_scores_nan_and_names_it(prepared, tmp_path):
    home, protected = _layout(tmp_path, prepared[0], {"model.py": FORBIDDEN_MODEL})
    result = _score(home, protected)
    assert result["score"] == "NaN", result
    assert "softmax" in result["message"]["disallowed_operation"], result
    assert "model.py:14: h = F.softmax(self.emb(ids), dim=-1)" in result["message"]["disallowed_operation"], result


def test_missing_secret_scores_nan_and_says_to_prepare_again(prepared, tmp_path):
    home, protected = _layout(tmp_path, prepared[0], _starting_files())
    (protected / "assets" / "secret.json").unlink()
    result = _score(home, protected)
    assert result["score"] == "NaN" and "prepare" in result["message"]["error"], result


def test_model_that_cannot_be_captured_scores_nan_with_the_reason(prepared, tmp_path):
    home, protected = _layout(tmp_path, prepared[0], {"model.py": DATA_DEPENDENT_MODEL})
    result = _score(home, protected)
    assert result["score"] == "NaN", result
    assert "torch.export could not capture the forward pass" in result["message"]["error"], result


def test_broken_solution_scores_nan_with_an_error(prepared, tmp_path):
    home, protected = _layout(tmp_path, prepared[0], {"model.py": "def get_trained_model(:\n    pass\n"})
    result = _score(home, protected)
    assert result["score"] == "NaN", result
    assert "SyntaxError" in result["message"]["error"], result


def test_wrong_output_shape_scores_nan(prepared, tmp_path):
    home, protected = _layout(tmp_path, prepared[0], {"model.py": WRONG_SHAPE_MODEL})
    result = _score(home, protected)
    assert result["score"] == "NaN", result
    assert "shape (8, 128, 10)" in result["message"]["error"], result


def test_manifest_is_valid():
    from rebench_tui.catalog.catalog import load_environment

    env, problems = load_environment(ENV)
    assert not problems, problems
    assert env.profile("smoke").gpus == 0 and env.profile("gpu").gpus == 2
    assert env.profile("smoke").score_timeout <= 120


def test_the_whole_corpus_trains_when_no_size_is_given(tmp_path):
    """The gpu default (the paper's setting): every document not held out goes to train.bin, none
    twice, none lost; the held-out share comes from the expected total, and fills its target."""
    import numpy as np

    prepare = load_file("rmlm_prepare", ENV / "prepare.py")
    assert prepare.SIZES["gpu"]["train"] is None or "RMLM_TRAIN_TOKENS" in __import__("os").environ
    docs = [np.array([i % 50000 + 1] * 9 + [50256], dtype=np.uint16) for i in range(2000)]
    stream = np.concatenate(docs)
    writer = prepare.SplitWriter(tmp_path / "v.bin", tmp_path / "t.bin", val=400, train=None,
                                 rng=np.random.default_rng(7), expected_total=len(stream))
    for start in range(0, len(stream), 3000):
        writer.add(stream[start:start + 3000])
    assert not writer.full
    writer.close()
    val = np.fromfile(tmp_path / "v.bin", dtype=np.uint16)
    train = np.fromfile(tmp_path / "t.bin", dtype=np.uint16)
    assert len(val) + len(train) == len(stream)  # every token kept, once
    assert 300 <= len(val) <= 400 and len(val) % 10 == 0
    held = set(val[val != 50256].tolist())
    assert held.isdisjoint(set(train[train != 50256].tolist()))
