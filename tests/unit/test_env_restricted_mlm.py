"""restricted_mlm: the rule enforcer on real tensors and modules, and prepare.py + score.py end to end.

The enforcer (environments/restricted_mlm/protected/enforcer.py) is loaded by path and run on
small tensors: every forbidden case must be rejected with the operation named, every allowed case
must pass and give the same values as without the enforcer. RMLM_TEST_DEVICE=cuda runs those
cases on a GPU (reference/run_gpu.sh does).

The end-to-end tests run `prepare.py --profile smoke --mode synthetic` once (module fixture), lay
out a home and a protected folder as the container has them, and run score.py as a subprocess on
the starting solution, the reference solution (trained here: about 2 CPU-minutes in all for this
file, so 2-3 minutes of wall time on an idle 2-core machine, more when it is shared), a solution
that uses softmax, one with a syntax error and one with a wrong output shape.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import threading
import tomllib
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.modules import load_file

ENV = Path(__file__).resolve().parents[2] / "environments" / "restricted_mlm"
DEVICE = os.environ.get("RMLM_TEST_DEVICE", "cpu")
MANIFEST = tomllib.loads((ENV / "environment.toml").read_text())
SMOKE = MANIFEST["profiles"]["smoke"]
# Scores are deterministic on one machine (fixed seeds, pinned thread count); the tolerances
# cover other CPUs' float rounding. The starting model is little more than its unigram bias, so
# it moves least; the reference is trained for 400 steps, which amplifies rounding differences.
START_TOLERANCE = 0.03
REFERENCE_TOLERANCE = 0.1


enforcer = load_file("rmlm_enforcer", ENV / "protected" / "enforcer.py")


def run_enforced(fn):
    with torch.no_grad(), enforcer.Enforcer():
        return fn()


# -- cases: each builds its tensors and modules outside the enforcer and returns the call to check
def _x(*shape):
    torch.manual_seed(0)
    return torch.randn(*shape or (2, 5, 4), device=DEVICE)


def _ids():
    torch.manual_seed(0)
    return torch.randint(0, 10, (2, 5), device=DEVICE)


def _module(m):
    return m.to(DEVICE).eval()


def _thread_exp():
    x = _x()

    def call():
        t = threading.Thread(target=lambda: torch.exp(x))
        t.start()
        t.join()

    return call


def _swallowed():
    x = _x()

    def call():
        try:
            torch.exp(x)
        except Exception:  # noqa: BLE001 - the point: the model hides the rejection
            pass
        return x + 1

    return call


def _disable_modes():
    x = _x()

    def call():
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():
            return x.exp()

    return call


def _profile_off():
    x = _x()

    def call():
        old = sys.getprofile()
        sys.setprofile(None)
        y = x.exp()
        sys.setprofile(old)
        return y

    return call


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


class _WrapperTensor(torch.Tensor):
    """A tensor subclass whose __torch_dispatch__ computes exp behind the enforcer's back."""

    @staticmethod
    def __new__(cls, elem):
        return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype, device=elem.device)

    def __init__(self, elem):
        self.elem = elem

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return torch.exp(args[0].elem)


def _inplace_truediv():
    x = _x().clone()

    def call():
        y = x.clone()
        y /= 2
        return y

    return call


FORBIDDEN = {
    # name: (builder returning the call, text the reported operation must contain)
    "operator x / y": (lambda: (lambda x=_x(), y=_x(): x / y), "aten.div.Tensor"),
    "operator 1 / x": (lambda: (lambda x=_x(): 1 / x), "aten.reciprocal"),
    "operator ids // 2": (lambda: (lambda i=_ids(): i // 2), "aten.floor_divide"),
    "operator ids % 3": (lambda: (lambda i=_ids(): i % 3), "aten.remainder"),
    "operator x ** 2": (lambda: (lambda x=_x(): x ** 2), "aten.pow"),
    "operator x /= 2 (in place)": (_inplace_truediv, "aten.div_"),
    "method x.div": (lambda: (lambda x=_x(): x.div(2)), "aten.div"),
    "method x.exp": (lambda: (lambda x=_x(): x.exp()), "aten.exp"),
    "method x.softmax": (lambda: (lambda x=_x(): x.softmax(-1)), "softmax"),
    "method x.mean (divides)": (lambda: (lambda x=_x(): x.mean(1)), "aten.mean"),
    "method x.max": (lambda: (lambda x=_x(): x.max()), "aten.max"),
    "method x.abs": (lambda: (lambda x=_x(): x.abs()), "aten.abs"),
    "in-place div_": (lambda: (lambda x=_x(): x.clone().div_(2)), "aten.div_"),
    "in-place exp_": (lambda: (lambda x=_x(): x.clone().exp_()), "aten.exp_"),
    "torch.exp": (lambda: (lambda x=_x(): torch.exp(x)), "aten.exp"),
    "torch.softmax": (lambda: (lambda x=_x(): torch.softmax(x, -1)), "softmax"),
    "torch.sigmoid": (lambda: (lambda x=_x(): torch.sigmoid(x)), "aten.sigmoid"),
    "torch.tanh": (lambda: (lambda x=_x(): torch.tanh(x)), "aten.tanh"),
    "torch.sqrt": (lambda: (lambda x=_x(): torch.sqrt(x)), "aten.sqrt"),
    "torch.rsqrt": (lambda: (lambda x=_x(): torch.rsqrt(x)), "aten.rsqrt"),
    "torch.log": (lambda: (lambda x=_x(): torch.log(x)), "aten.log"),
    "torch.pow": (lambda: (lambda x=_x(): torch.pow(x, 3)), "aten.pow"),
    "torch.square": (lambda: (lambda x=_x(): torch.square(x)), "aten.pow"),
    "torch.clamp": (lambda: (lambda x=_x(): torch.clamp(x, min=0)), "aten.clamp"),
    "torch.where with a constant mask": (lambda: (lambda x=_x(), m=_x() > 0: torch.where(m, x, 0.0)), "aten.where"),
    "comparison x > 0": (lambda: (lambda x=_x(): x > 0), "aten.gt"),
    "masked_fill with a constant mask": (lambda: (lambda x=_x(), m=_x() > 0: x.masked_fill(m, 0.0)), "aten.masked_fill"),
    "F.softmax": (lambda: (lambda x=_x(): F.softmax(x, dim=-1)), "softmax"),
    "F.log_softmax": (lambda: (lambda x=_x(): F.log_softmax(x, dim=-1)), "log_softmax"),
    "F.gelu": (lambda: (lambda x=_x(): F.gelu(x)), "aten.gelu"),
    "F.silu": (lambda: (lambda x=_x(): F.silu(x)), "aten.silu"),
    "F.leaky_relu": (lambda: (lambda x=_x(): F.leaky_relu(x)), "leaky_relu"),
    "F.layer_norm": (lambda: (lambda x=_x(): F.layer_norm(x, (4,))), "native_layer_norm"),
    "F.normalize": (lambda: (lambda x=_x(): F.normalize(x, dim=-1)), "aten.linalg_vector_norm"),
    "F.scaled_dot_product_attention": (lambda: (lambda x=_x(): F.scaled_dot_product_attention(x, x, x)), "softmax"),
    "nn.LayerNorm": (lambda: (lambda m=_module(nn.LayerNorm(4)), x=_x(): m(x)), "native_layer_norm"),
    "nn.Softmax": (lambda: (lambda m=_module(nn.Softmax(dim=-1)), x=_x(): m(x)), "softmax"),
    "nn.GELU": (lambda: (lambda m=_module(nn.GELU()), x=_x(): m(x)), "aten.gelu"),
    "nn.MultiheadAttention": (lambda: (lambda m=_module(nn.MultiheadAttention(4, 1, batch_first=True)), x=_x(): m(x, x, x)), "softmax"),
    "nn.Sequential with a Tanh inside": (lambda: (lambda m=_module(nn.Sequential(nn.Linear(4, 4), nn.Tanh())), x=_x(): m(x)), "aten.tanh"),
    "einsum, then division": (lambda: (lambda x=_x(): torch.einsum("bij->bi", x) / 3), "aten.div.Tensor"),
    "aten operator called directly": (lambda: (lambda x=_x(): torch.ops.aten.exp.default(x)), "aten.exp.default"),
    "custom autograd.Function": (lambda: (lambda x=_x(): _ExpFunction.apply(x)), "aten.exp"),
    "autograd-free x.data path": (lambda: (lambda x=_x(): x.data.exp()), "aten.exp"),
    "TorchScript function": (lambda: (lambda x=_x(): _scripted_sigmoid(x)), "aten.sigmoid"),
    "custom operator (torch.library)": (lambda: (lambda x=_x(): _custom_exp(x)), "rmlm_test.exp_op"),
    "float -> int conversion": (lambda: (lambda x=_x(): x.long()), "conversion from float32 to int64"),
    "sum with an integer dtype (truncates)": (lambda: (lambda x=_x(): x.sum(dtype=torch.int64)), "conversion from float32 to int64"),
    "bit reinterpretation view(dtype)": (lambda: (lambda x=_x(): x.view(torch.int32)), "aten.view.dtype"),
    "random numbers": (lambda: (lambda x=_x(): x + torch.rand(x.shape, device=x.device)), "aten.rand"),
    "embedding_bag mean": (lambda: (lambda w=_x(10, 4), i=_ids(): F.embedding_bag(i, w, mode="mean")), "mode=mean"),
    "x.item()": (lambda: (lambda x=_x(): x.sum().item()), "item"),
    "float(x)": (lambda: (lambda x=_x(): float(x.sum())), "_local_scalar_dense"),
    "x.numpy()": (lambda: (lambda x=_x(): x.cpu().numpy()), "numpy"),
    "x.tolist()": (lambda: (lambda x=_x(): x.tolist()), "tolist"),
    "x.data_ptr() (custom kernels)": (lambda: (lambda x=_x(): x.data_ptr()), "data_ptr"),
    "tensor subclass with __torch_dispatch__": (lambda: (lambda w=_WrapperTensor(_x()): w + 1), "tensor subclass _WrapperTensor"),
    "work in another thread": (_thread_exp, "start_new_thread"),
    "rejection caught by the model": (_swallowed, "aten.exp"),
    "modes popped with _disable_current_modes": (_disable_modes, "removed from its stack"),
    "profile hook switched off": (_profile_off, "setprofile"),
}


def _starting_model():
    model_mod = load_file("rmlm_start_model", ENV / "solution" / "model.py")
    torch.manual_seed(0)
    return _module(model_mod.build("tiny"))


def _reference_model():
    model_mod = load_file("rmlm_ref_model", ENV / "reference" / "model.py")
    torch.manual_seed(0)
    return _module(model_mod.build("tiny"))


def _index_assign():
    x = _x()

    def call():
        y = x.clone()
        y[:, 0] = 0.0
        y[:, 1] = x[:, 2]
        y[torch.tensor([0], device=x.device)] = x[1:]
        return y

    return call


def _autocast_call(m, x):
    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        return m(x)


ALLOWED = {
    "nn.Linear": lambda: (lambda m=_module(nn.Linear(4, 3)), x=_x(): m(x)),
    "nn.Linear without bias on 2-D input": lambda: (lambda m=_module(nn.Linear(4, 3, bias=False)), x=_x(5, 4): m(x)),
    "nn.Embedding": lambda: (lambda m=_module(nn.Embedding(10, 4)), i=_ids(): m(i)),
    "F.embedding_bag sum": lambda: (lambda w=_x(10, 4), i=_ids(): F.embedding_bag(i, w, mode="sum")),
    "torch.matmul": lambda: (lambda x=_x(): torch.matmul(x, x.transpose(1, 2))),
    "operator @": lambda: (lambda x=_x(), w=_x(4, 6): x @ w),
    "torch.bmm": lambda: (lambda x=_x(): torch.bmm(x, x.transpose(1, 2))),
    "einsum contraction": lambda: (lambda x=_x(): torch.einsum("bij,bkj->bik", x, x)),
    "einsum reduction": lambda: (lambda x=_x(): torch.einsum("bij->b", x)),
    "sum": lambda: (lambda x=_x(): x.sum()),
    "sum over a dim": lambda: (lambda x=_x(): x.sum(dim=1, keepdim=True)),
    "cumsum": lambda: (lambda x=_x(): x.cumsum(1)),
    "sum of integer ids in int64": lambda: (lambda i=_ids(): i.sum(dtype=torch.int64) + (i * 50257 + i).sum()),
    "operator +": lambda: (lambda x=_x(): x + x + 1),
    "operator - and negation": lambda: (lambda x=_x(): 1 - x - (-x)),
    "operator *": lambda: (lambda x=_x(): x * x),
    "multiply by a constant (instead of dividing)": lambda: (lambda x=_x(): x * (1.0 / 128)),
    "in-place add_ and mul_": lambda: (lambda x=_x(): x.clone().add_(1).mul_(2)),
    "torch.relu": lambda: (lambda x=_x(): torch.relu(x)),
    "F.relu": lambda: (lambda x=_x(): F.relu(x)),
    "nn.ReLU in nn.Sequential": lambda: (lambda m=_module(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))), x=_x(): m(x)),
    "nn.Dropout in eval mode": lambda: (lambda m=_module(nn.Dropout(0.1)), x=_x(): m(x)),
    "integer indexing": lambda: (lambda x=_x(): x[0, 1]),
    "slicing and None": lambda: (lambda x=_x(): x[:, 1:3, None]),
    "index tensor": lambda: (lambda x=_x(), i=torch.tensor([1, 0, 1], device=DEVICE): x[i]),
    "index assignment": _index_assign,
    "gather": lambda: (lambda x=_x(), i=torch.zeros(2, 5, 4, dtype=torch.long, device=DEVICE): x.gather(1, i)),
    "index_select": lambda: (lambda x=_x(), i=torch.tensor([0, 2], device=DEVICE): x.index_select(1, i)),
    "reshape of a non-contiguous tensor": lambda: (lambda x=_x(): x.transpose(0, 1).reshape(10, 4)),
    "view": lambda: (lambda x=_x(): x.view(-1)),
    "permute": lambda: (lambda x=_x(): x.permute(2, 0, 1)),
    "transpose and .T": lambda: (lambda x=_x(): x.transpose(1, 2)[0].T),
    "cat": lambda: (lambda x=_x(): torch.cat([x, x], dim=1)),
    "stack": lambda: (lambda x=_x(): torch.stack([x, x])),
    "unsqueeze and squeeze": lambda: (lambda x=_x(): x.unsqueeze(0).squeeze(0)[:, :1].squeeze(1)),
    "contiguous": lambda: (lambda x=_x(): x.transpose(0, 1).contiguous()),
    "clone and detach": lambda: (lambda x=_x(): x.clone().detach()),
    "expand": lambda: (lambda x=_x(): x[:, :1].expand(2, 5, 4)),
    "split, chunk, unbind": lambda: (lambda x=_x(): torch.cat(x.split(2, 1) + x.chunk(2, 1)[:1] + (x.unbind(1)[0][:, None],), 1)),
    "flip, roll, tril": lambda: (lambda x=_x(): x.flip(1).roll(1, 1).tril()),
    "unfold (sliding windows)": lambda: (lambda x=_x(): x.unfold(1, 3, 1)),
    "F.pad with zeros": lambda: (lambda x=_x(): F.pad(x, (0, 0, 1, 1))),
    "constants: zeros_like, new_zeros, arange, full": lambda: (lambda x=_x(): torch.zeros_like(x) + x.new_zeros(4) + torch.arange(4, device=x.device) + torch.full((4,), 2.0, device=x.device)),
    "ids to float and bfloat16": lambda: (lambda i=_ids(), x=_x(): i.float() + x[:, :, 0].to(torch.bfloat16).float()),
    "autocast to bfloat16": lambda: (lambda m=_module(nn.Linear(4, 3)), x=_x(): _autocast_call(m, x)),
    "shape arithmetic in Python": lambda: (lambda x=_x(): x.reshape(x.shape[0] * x.size(1), -1)),
    "the starting model (tiny)": lambda: (lambda m=_starting_model(), i=torch.randint(0, 50257, (2, 128), device=DEVICE): m(i)),
    "the reference model (tiny)": lambda: (lambda m=_reference_model(), i=torch.randint(0, 50257, (2, 128), device=DEVICE): m(i)),
}


@pytest.mark.parametrize("name", list(FORBIDDEN))
def test_enforcer_rejects_forbidden_operation(name):
    build, expected = FORBIDDEN[name]
    call = build()
    with pytest.raises(enforcer.DisallowedOperation) as info:
        run_enforced(call)
    assert expected in info.value.operation, f"{name}: reported {info.value.operation!r}"


@pytest.mark.parametrize("name", list(ALLOWED))
def test_enforcer_allows_permitted_operation(name):
    call = ALLOWED[name]()
    with torch.no_grad():
        expected = call()
    got = run_enforced(call)
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got, expected)


def test_enforcer_message_names_the_aten_operator_and_the_python_route():
    x = _x()
    with pytest.raises(enforcer.DisallowedOperation) as info:
        run_enforced(lambda: x / 3)
    assert info.value.operation == "aten.div.Tensor (x / y, division) via torch.Tensor.div"


def test_enforcer_allow_list_is_an_allow_list():
    assert enforcer.check_aten(torch.ops.aten.addmm.default) is None
    assert enforcer.check_aten(torch.ops.aten.view.default) is None
    assert enforcer.check_aten(torch.ops.aten.view.dtype) is not None
    assert enforcer.check_aten(torch.ops.aten.scatter.reduce) is not None
    # an operator nobody thought of is rejected by default
    assert enforcer.check_aten(torch.ops.aten.special_bessel_j0.default) == "aten.special_bessel_j0.default"


def test_enforcer_leaves_no_trace_after_exit():
    x = _x()
    def state():
        return (sys.getprofile(), torch._C._len_torch_dispatch_stack(), torch._C._len_torch_function_stack(),
                torch._C.DisableTorchFunction, torch._C._get_graph_executor_optimize())

    before = state()
    seen = []
    with pytest.raises(enforcer.DisallowedOperation):
        run_enforced(lambda: seen.append(torch._C._get_graph_executor_optimize()) or torch.exp(x))
    run_enforced(lambda: x + 1)
    assert seen == [False]  # TorchScript's fusing executor is off inside
    assert state() == before
    assert torch.exp(x).shape == x.shape  # outside the enforcer everything works again


# -- end to end: prepare.py and score.py as the workstation runs them ----------------------------
@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("rmlm_assets")
    proc = subprocess.run([sys.executable, str(ENV / "prepare.py"), "--profile", "smoke", "--mode", "synthetic",
                           "--out", str(out), "--work", str(out / "work")],
                          capture_output=True, text=True, timeout=300, cwd=ENV)
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
    env = {**os.environ, "REBENCH_HOME": str(home), "REBENCH_PROTECTED": str(protected), "REBENCH_PROFILE": "smoke"}
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


def test_reference_solution_scores_better(prepared, tmp_path):
    files = {"model.py": ENV / "reference" / "model.py", "train.py": ENV / "solution" / "train.py",
             "train_reference.py": ENV / "reference" / "train_reference.py"}
    home, protected = _layout(tmp_path, prepared[0], files)
    proc = subprocess.run([sys.executable, str(home / "solution" / "train_reference.py")], capture_output=True, text=True,
                          timeout=240, cwd=home / "solution")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = _score(home, protected)
    assert isinstance(result["score"], float), result
    assert result["score"] < SMOKE["start_score"] - 0.2, result
    assert abs(result["score"] - SMOKE["reference_score"]) <= REFERENCE_TOLERANCE, result


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


def test_forbidden_operation_scores_nan_and_names_it(prepared, tmp_path):
    home, protected = _layout(tmp_path, prepared[0], {"model.py": FORBIDDEN_MODEL})
    result = _score(home, protected)
    assert result["score"] == "NaN", result
    assert "aten._softmax" in result["message"]["disallowed_operation"], result
    assert "torch.nn.functional.softmax" in result["message"]["disallowed_operation"], result


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
