"""The rule enforcer of restricted_mlm: run a forward pass and reject every operation outside the rules.

The rules allow linear and embedding layers, matrix products (matmul, @, einsum, mm, bmm), sums,
addition (subtraction and negation count as addition), multiplication, ReLU, and operations that
only move, select, copy or create values (indexing, reshaping, views, cat/stack, padding with a
constant, gather, dtype changes between float types). Everything else is rejected: division,
exponentials and logarithms, powers and roots, softmax, normalisation layers, every other
activation, comparisons, max/min/abs/clamp, random numbers, reading tensor values into Python.

How it works (``with Enforcer(): out = model(ids)``), from the top down:

1. A ``TorchFunctionMode`` sees every call of the torch Python API: ``torch.*`` and
   ``torch.nn.functional.*`` functions, tensor methods and the operators (``x / y`` arrives as
   ``torch.Tensor.div``). It keeps the outermost call's name so that a rejection lower down can
   say how the operation was reached, rejects calls that take tensor data out of torch
   (``.numpy()``, ``.tolist()``, ``.data_ptr()``, storages, DLPack), and, as a second net, rejects
   calls of forbidden functions by name even if nothing below stopped them.
2. A ``TorchDispatchMode`` sees every ATen operator the call finally runs, after PyTorch has
   decomposed composite functions (``nn.Linear`` becomes ``aten.t`` + ``aten.addmm``, ``einsum``
   becomes permutes, views and ``aten.bmm``, ``nn.LayerNorm`` becomes ``aten.native_layer_norm``).
   This is the authority: an ALLOW-list, so any operator not named below is rejected, including
   custom operators and ones added to PyTorch later. A few allowed operators carry conditions
   (no float-to-integer conversion, also not through ``sum(dtype=...)``; no bit reinterpretation;
   ``embedding_bag`` only summing).
   Tensor subclasses with their own ``__torch_dispatch__`` are rejected: their code would run
   below this mode, unchecked.
3. A profile hook (``sys.setprofile``) watches the calls made from Python while the forward pass
   runs and rejects the known ways around 1 and 2: removing the modes from their stacks, excluding
   the Python dispatch key, switching the hook off, replaying CUDA graphs, starting threads or
   processes, exporting tensors through DLPack. The checks apply to calls made from the model's
   own code (files outside torch, the standard library and the installed site-packages). While
   the enforcer runs, torch._C's switches (DisableTorchFunction, _DisableTorchDispatch,
   _ExcludeDispatchKeyGuard) are wrapped so the model's code cannot use them unnoticed, and
   torch.compile and TorchScript's fusing executor are off (their kernels bypass the dispatcher).

Every rejection is recorded before it is raised, so a model that catches the exception is still
rejected when the ``with`` block ends. The messages name the ATen operator and the Python call
that reached it, e.g. ``aten.div.Tensor (x / y, division) via torch.Tensor.div``.

What this is not: a sandbox against code written to defeat it. Code that, say, captures torch
internals to run kernels without the dispatcher is breaking the rules in plain sight of anyone
reading the solution; the enforcer's job is to make every ordinary route, and every accidental
one, fail loudly with the operation named.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
import threading
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["DisallowedOperation", "Enforcer", "ALLOWED_ATEN", "check_aten"]


class DisallowedOperation(RuntimeError):
    """Raised (and recorded) when the forward pass uses an operation outside the rules."""

    def __init__(self, operation: str) -> None:
        super().__init__(f"operation not allowed in the forward pass: {operation}")
        self.operation = operation


# ---------------------------------------------------------------------------------------------
# The allow-list at the ATen level. Keys are operator packets ("aten.add": every overload) or
# exact overloads ("aten.view.default"). Nothing else runs.
# ---------------------------------------------------------------------------------------------
_ARITHMETIC = [
    # addition (subtraction and negation are addition of a negated term)
    "add", "add_", "sub", "sub_", "subtract", "subtract_", "rsub", "neg", "neg_", "negative", "negative_",
    # multiplication
    "mul", "mul_", "multiply", "multiply_", "addcmul", "addcmul_",
    # sums (a cumulative sum is a sum over a prefix)
    "sum", "cumsum", "cumsum_",
    # ReLU
    "relu", "relu_",
    # matrix products and linear layers
    "mm", "bmm", "addmm", "addmm_", "matmul", "linear", "einsum", "dot", "mv", "addmv", "addmv_",
    "baddbmm", "baddbmm_", "addbmm", "addbmm_", "outer", "ger", "tensordot", "inner",
    # embeddings (embedding_bag only with mode="sum": see _CONDITIONS)
    "embedding", "embedding_bag", "_embedding_bag", "_embedding_bag_forward_only",
]
_MOVEMENT = [
    # views and reshapes
    "_unsafe_view", "view_as", "reshape", "reshape_as", "_reshape_alias", "flatten", "unflatten",
    "squeeze", "squeeze_", "unsqueeze", "unsqueeze_", "expand", "expand_as", "broadcast_to",
    "t", "t_", "transpose", "transpose_", "permute", "numpy_T", "mT", "movedim", "moveaxis",
    "swapaxes", "swapdims", "unfold", "as_strided", "alias", "detach", "detach_", "lift", "lift_fresh",
    "lift_fresh_copy", "contiguous", "clone", "view_copy", "_unsafe_view_copy", "permute_copy",
    "transpose_copy", "t_copy", "unsqueeze_copy", "squeeze_copy", "expand_copy", "slice_copy",
    "select_copy", "alias_copy", "as_strided_copy", "unfold_copy", "diagonal_copy", "split_copy",
    "split_with_sizes_copy", "unbind_copy", "narrow_copy", "detach_copy",
    # selecting (indexing)
    "select", "slice", "narrow", "index", "index_select", "gather", "take", "take_along_dim", "diagonal",
    "split", "split_with_sizes", "unsafe_split", "unsafe_split_with_sizes", "tensor_split", "chunk",
    "unsafe_chunk", "unbind", "flip", "roll", "tril", "tril_", "triu", "triu_",
    # joining and padding with a constant
    "cat", "concat", "concatenate", "stack", "hstack", "vstack", "repeat", "tile", "constant_pad_nd",
    # writing into tensors (index assignment)
    "copy", "copy_", "_copy_from", "_copy_from_and_resize", "index_put", "index_put_", "_index_put_impl_",
    "index_add", "index_add_", "index_copy", "index_copy_", "scatter_add", "scatter_add_",
    "slice_scatter", "select_scatter", "diagonal_scatter", "as_strided_scatter",
    # creating constants
    "zeros", "ones", "full", "empty", "empty_strided", "empty_like", "zeros_like", "ones_like", "full_like",
    "new_zeros", "new_ones", "new_full", "new_empty", "new_empty_strided", "arange", "scalar_tensor",
    "eye", "zero_", "fill", "fill_",
    # changing dtype or device (conditions: see _CONDITIONS)
    "_to_copy", "to", "_autocast_to_reduced_precision", "_autocast_to_full_precision",
    # shape queries
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size",
]
ALLOWED_ATEN: frozenset[str] = frozenset(
    [f"aten.{n}" for n in _ARITHMETIC + _MOVEMENT]
    + [
        "aten.view.default",  # not aten.view.dtype: reinterpreting float bits as integers is not allowed
        "aten.scatter.src", "aten.scatter.value", "aten.scatter_.src", "aten.scatter_.value",  # not the reducing overloads
        "aten.pad.default",
    ]
)

# Hints for the message when a forbidden operator is met (operator packet -> how people reach it).
_ATEN_HINTS = {
    "div": "x / y, division", "div_": "x /= y, division", "true_divide": "division", "floor_divide": "x // y",
    "remainder": "x % y", "fmod": "x % y", "reciprocal": "1 / x", "pow": "x ** y, power (use x * x)",
    "float_power": "power", "exp": "exponential", "exp2": "exponential", "expm1": "exponential",
    "log": "logarithm", "log2": "logarithm", "log10": "logarithm", "log1p": "logarithm", "logsumexp": "logsumexp",
    "sqrt": "square root", "rsqrt": "reciprocal square root", "sigmoid": "sigmoid", "tanh": "tanh",
    "_softmax": "softmax", "_log_softmax": "log_softmax", "gelu": "GELU", "silu": "SiLU", "mish": "Mish",
    "elu": "ELU", "softplus": "softplus", "hardtanh": "hardtanh / ReLU6 / clamp", "leaky_relu": "leaky ReLU",
    "native_layer_norm": "layer norm", "native_group_norm": "group norm", "_fused_rms_norm": "RMS norm",
    "native_batch_norm": "batch norm", "_native_batch_norm_legit_no_training": "batch norm",
    "linalg_vector_norm": "norm", "norm": "norm", "mean": "mean divides: use sum and multiply by 1/n",
    "var": "variance", "std": "standard deviation", "max": "max", "min": "min", "amax": "max", "amin": "min",
    "maximum": "max", "minimum": "min", "clamp": "clamp", "clamp_min": "clamp (use relu)", "clamp_max": "clamp",
    "abs": "abs", "sign": "sign", "where": "where / masking", "masked_fill": "masked_fill (multiply by a 0/1 mask)",
    "gt": "comparison", "lt": "comparison", "ge": "comparison", "le": "comparison", "eq": "comparison",
    "ne": "comparison", "_local_scalar_dense": "reading a tensor value into Python: .item(), float(), bool(), if x:",
    "is_nonzero": "reading a tensor value into Python: bool(x), if x:", "view": "reinterpreting bits with .view(dtype)",
    "uniform_": "random numbers", "normal_": "random numbers", "bernoulli_": "random numbers",
    "bernoulli": "random numbers", "randn": "random numbers", "rand": "random numbers", "randint": "random numbers",
    "native_dropout": "dropout in training mode (random numbers)", "round": "rounding", "floor": "rounding",
    "ceil": "rounding", "trunc": "rounding", "sort": "sorting", "topk": "top-k", "argmax": "argmax",
    "_scaled_dot_product_flash_attention_for_cpu": "scaled dot product attention (softmax)",
    "_scaled_dot_product_flash_attention": "scaled dot product attention (softmax)",
    "_scaled_dot_product_efficient_attention": "scaled dot product attention (softmax)",
    "_scaled_dot_product_cudnn_attention": "scaled dot product attention (softmax)",
    "_native_multi_head_attention": "multi-head attention (softmax)", "_trilinear": "bilinear layer",
    "scatter_reduce": "scatter with a reduction", "nonzero": "data-dependent indexing (nonzero)",
}

_FLOATS = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})


def _is_int(dtype: torch.dtype) -> bool:
    return not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool


def _conversion_problem(src: torch.dtype, dst: torch.dtype) -> str | None:
    """Converting is moving values, except where it rounds, truncates or reinterprets them."""
    if src == dst:
        return None
    if dst in _FLOATS and (src in _FLOATS or _is_int(src) or src == torch.bool):
        return None
    if _is_int(dst) and (_is_int(src) or src == torch.bool):
        return None
    return f"conversion from {str(src).replace('torch.', '')} to {str(dst).replace('torch.', '')}"


def _dtype_of(x: Any) -> torch.dtype | None:
    return x.dtype if isinstance(x, torch.Tensor) else None


def _check_to_copy(args: tuple, kwargs: dict) -> str | None:
    src = _dtype_of(args[0]) if args else None
    dst = kwargs.get("dtype")
    for a in args[1:]:
        if isinstance(a, torch.dtype):
            dst = a
        elif isinstance(a, torch.Tensor):  # to.other
            dst = a.dtype
    if src is None or dst is None:
        return None
    return _conversion_problem(src, dst)


def _check_write(dst_index: int, src_index: int) -> Callable[[tuple, dict], str | None]:
    def check(args: tuple, kwargs: dict) -> str | None:
        if len(args) <= max(dst_index, src_index):
            return None
        dst, src = _dtype_of(args[dst_index]), _dtype_of(args[src_index])
        if dst is None or src is None:
            return None
        return _conversion_problem(src, dst)

    return check


def _check_sum_dtype(args: tuple, kwargs: dict) -> str | None:
    """x.sum(dtype=torch.int64) truncates every float before adding: a conversion in disguise."""
    src, dst = _dtype_of(args[0]) if args else None, kwargs.get("dtype")
    if src is None or not isinstance(dst, torch.dtype):
        return None
    return _conversion_problem(src, dst)


def _check_embedding_bag(args: tuple, kwargs: dict) -> str | None:
    mode = args[4] if len(args) > 4 else kwargs.get("mode", 0)
    if mode not in (0, "sum"):
        return "embedding_bag with mode=" + {1: "mean", 2: "max"}.get(mode, repr(mode)) + " (only mode='sum' is allowed)"
    return None


_CONDITIONS: dict[str, Callable[[tuple, dict], str | None]] = {
    "aten._to_copy": _check_to_copy,
    "aten.to": _check_to_copy,
    "aten.copy_": _check_write(0, 1),
    "aten.copy": _check_write(0, 1),
    "aten._copy_from": _check_write(1, 0),
    "aten._copy_from_and_resize": _check_write(1, 0),
    "aten.fill_": _check_write(0, 1),
    "aten.fill": _check_write(0, 1),
    "aten.index_put": _check_write(0, 2),
    "aten.index_put_": _check_write(0, 2),
    "aten._index_put_impl_": _check_write(0, 2),
    "aten.index_add": _check_write(0, 3),
    "aten.index_add_": _check_write(0, 3),
    "aten.index_copy": _check_write(0, 3),
    "aten.index_copy_": _check_write(0, 3),
    "aten.scatter": _check_write(0, 3),
    "aten.scatter_": _check_write(0, 3),
    "aten.scatter_add": _check_write(0, 3),
    "aten.scatter_add_": _check_write(0, 3),
    "aten.slice_scatter": _check_write(0, 1),
    "aten.select_scatter": _check_write(0, 1),
    "aten.sum": _check_sum_dtype,
    "aten.cumsum": _check_sum_dtype,
    "aten.cumsum_": _check_sum_dtype,
    "aten.embedding_bag": _check_embedding_bag,
    "aten._embedding_bag": _check_embedding_bag,
    "aten._embedding_bag_forward_only": _check_embedding_bag,
}


def _op_names(func: Any) -> tuple[str, str]:
    """('aten.div.Tensor', 'aten.div') for an OpOverload; something readable for anything else."""
    packet = getattr(func, "overloadpacket", None)
    if packet is not None:
        ns = getattr(func, "namespace", "aten")
        return str(func), f"{ns}.{packet.__name__}"
    name = str(getattr(func, "name", None) or getattr(func, "__name__", None) or func)
    if callable(name):
        name = name()
    return str(name), str(name)


def check_aten(func: Any, args: tuple = (), kwargs: dict | None = None) -> str | None:
    """The problem with running this ATen operator on these arguments, or None when it is allowed."""
    full, packet = _op_names(func)
    if full in ALLOWED_ATEN or packet in ALLOWED_ATEN:
        condition = _CONDITIONS.get(packet)
        problem = condition(args, kwargs or {}) if condition else None
        return None if problem is None else f"{full} ({problem})"
    short = packet.split(".", 1)[-1]
    hint = _ATEN_HINTS.get(short)
    if hint is None and "softmax" in short:
        hint = "softmax"
    elif hint is None and "attention" in short:
        hint = "attention (softmax)"
    return f"{full} ({hint})" if hint else full


# ---------------------------------------------------------------------------------------------
# The Python API level
# ---------------------------------------------------------------------------------------------
# Tensor methods that hand tensor data to code outside torch (where no rule could be checked).
DATA_ESCAPES = {
    "numpy": "tensor data leaves torch", "tolist": "tensor data leaves torch", "item": "tensor value read into Python",
    "__array__": "tensor data leaves torch (numpy)", "__array_wrap__": "tensor data leaves torch (numpy)",
    "data_ptr": "raw memory access (custom kernels, ctypes, Triton)", "untyped_storage": "raw storage access",
    "storage": "raw storage access", "_storage": "raw storage access", "_typed_storage": "raw storage access",
    "__dlpack__": "tensor data leaves torch (DLPack)", "__cuda_array_interface__": "raw memory access",
    "apply_": "applies a Python function to each element", "map_": "applies a Python function to each element",
    "map2_": "applies a Python function to each element", "__reduce_ex__": "pickling a tensor",
    "__setstate__": "unpickling into a tensor", "_to_dlpack": "tensor data leaves torch (DLPack)",
    "to_dlpack": "tensor data leaves torch (DLPack)",
}

# Forbidden by name at the Python level: the second net below the ATen allow-list. Names are
# compared after dropping a trailing "_" (in-place variants).
FORBIDDEN_FUNCTIONS = frozenset("""
div divide true_divide floor_divide remainder fmod reciprocal pow float_power square exp exp2 expm1 log log2 log10
log1p logaddexp logaddexp2 logsumexp logcumsumexp sqrt rsqrt sigmoid logit tanh sinh cosh asinh acosh atanh sin cos
tan asin acos atan atan2 arctan2 erf erfc erfinv softmax log_softmax softmin gelu silu mish elu selu celu softplus
softsign softshrink hardshrink tanhshrink hardtanh hardswish hardsigmoid relu6 leaky_relu prelu rrelu glu logsigmoid
threshold layer_norm group_norm batch_norm instance_norm rms_norm local_response_norm normalize cosine_similarity
pairwise_distance cdist pdist norm dist renorm mean nanmean var std var_mean std_mean median nanmedian max min amax
amin aminmax maximum minimum fmax fmin clamp clip clamp_min clamp_max abs absolute sign sgn round floor ceil trunc
frac where masked_fill masked_scatter masked_select sort argsort topk kthvalue argmax argmin cummax cummin cumprod
prod scaled_dot_product_attention multi_head_attention_forward eq ne lt le gt ge greater less equal not_equal
greater_equal less_equal isnan isinf isfinite nan_to_num heaviside lerp addcdiv bilinear
__truediv__ __rtruediv__ __itruediv__ __div__ __rdiv__ __idiv__ __floordiv__ __rfloordiv__ __ifloordiv__ __pow__
__rpow__ __ipow__ __mod__ __rmod__ __imod__ __lt__ __le__ __gt__ __ge__ __eq__ __ne__ __abs__ __and__ __or__ __xor__
__invert__ __lshift__ __rshift__ __rand__ __ror__ __rxor__ __iand__ __ior__ __ixor__ __ilshift__ __irshift__
""".split())

_OPERATOR_SPELLING = {
    "div": "x / y", "true_divide": "x / y", "divide": "x / y", "__truediv__": "x / y", "__rtruediv__": "n / x",
    "__rdiv__": "n / x", "__itruediv__": "x /= y", "floor_divide": "x // y", "__floordiv__": "x // y",
    "__rfloordiv__": "n // x", "pow": "x ** y", "__pow__": "x ** y", "__rpow__": "n ** x", "__ipow__": "x **= y",
    "remainder": "x % y", "__mod__": "x % y", "__rmod__": "n % x",
}


def _describe(func: Any) -> str:
    try:
        name = resolve_name(func)
    except Exception:  # noqa: BLE001 - only for the message
        name = None
    if not name:
        mod = getattr(func, "__module__", None) or ""
        name = f"{mod}.{getattr(func, '__qualname__', getattr(func, '__name__', repr(func)))}".lstrip(".")
    return name


def _base(name: str) -> str:
    parts = name.split(".")
    if parts[-1] == "__get__" and len(parts) > 1:
        parts = parts[:-1]
    return parts[-1]


class _FunctionGuard(TorchFunctionMode):
    def __init__(self, owner: "Enforcer") -> None:
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        owner = self.owner
        name = _describe(func)
        base = _base(name)
        if base in DATA_ESCAPES:
            owner.reject(f"{name} ({DATA_ESCAPES[base]})")
        stripped = base[:-1] if base.endswith("_") and not base.endswith("__") else base
        owner.route.append(name)
        try:
            out = func(*args, **kwargs)
        finally:
            owner.route.pop()
        if stripped in FORBIDDEN_FUNCTIONS:
            spelled = _OPERATOR_SPELLING.get(stripped)
            owner.reject(f"{name} ({spelled})" if spelled else name)
        return out


_PLAIN_DISPATCH = torch.Tensor.__torch_dispatch__


class _DispatchGuard(TorchDispatchMode):
    def __init__(self, owner: "Enforcer") -> None:
        super().__init__()
        self.owner = owner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        owner = self.owner
        custom = [t for t in types if getattr(t, "__torch_dispatch__", None) is not _PLAIN_DISPATCH]
        if custom:  # the subclass's own __torch_dispatch__ would run below this mode, unchecked
            owner.reject(f"tensor subclass {custom[0].__name__} with its own __torch_dispatch__ "
                         "(its code runs outside the enforcer)")
        problem = check_aten(func, args, kwargs)
        if problem is not None:
            route = owner.route[0] if owner.route else None
            owner.reject(f"{problem} via {route}" if route else problem)
        owner.ops_seen += 1
        owner.in_handler += 1
        try:
            return func(*args, **kwargs)
        finally:
            owner.in_handler -= 1


# Builtins that switch the enforcer off or move work out of its sight (checked by name).
_MODE_TAMPERING = frozenset({
    "_pop_torch_dispatch_stack", "_push_on_torch_dispatch_stack", "_pop_torch_function_stack",
    "_push_on_torch_function_stack", "_set_dispatch_mode", "_unset_dispatch_mode", "_set_torch_function_mode",
    "_dispatch_tls_set_dispatch_key_excluded", "_dispatch_tls_set_dispatch_key_included",
    "_set_torch_dispatch_mode", "_disable_torch_function_impl", "_disabled_torch_function_impl",
})
_PROFILER_SWITCHES = frozenset({"setprofile", "settrace", "setprofile_all_threads", "settrace_all_threads"})
_PROCESS_MODULES = ("posix", "nt", "os", "_thread", "_posixsubprocess")
_PROCESS_AND_THREAD = frozenset({
    "fork", "forkpty", "system", "posix_spawn", "posix_spawnp", "execv", "execve", "execl", "execvp", "execvpe",
    "start_new_thread", "start_new", "start_joinable_thread", "fork_exec", "popen",
})


_THIS_FILE = os.path.abspath(__file__)
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def _library_dirs() -> set[str]:
    """Where installed code lives: the standard library and the system's site-packages (not the
    user's ~/.local one, which the participant controls). Import hooks from these folders (such
    as setuptools' distutils finder) run during torch's lazy imports while a mode is popped."""
    paths = sysconfig.get_paths()
    dirs = [paths.get("stdlib"), paths.get("platstdlib"), paths.get("purelib"), paths.get("platlib")]
    try:
        dirs += site.getsitepackages()
    except AttributeError:  # old virtualenvs
        pass
    return {os.path.abspath(d) + os.sep for d in dirs if d}


# "<frozen importlib...>" and "<string>": code generated by importlib and by torch
_LIBRARY_PREFIXES = tuple({_TORCH_DIR, _THIS_FILE, "<"} | _library_dirs())
# Context managers in torch._C that switch modes or the Python dispatch key off; while the
# enforcer runs they are wrapped so that the model's own code cannot use them unnoticed.
_GUARDED_SWITCHES = ("DisableTorchFunction", "_DisableTorchDispatch", "_ExcludeDispatchKeyGuard")


def _is_model_code(filename: str) -> bool:
    """Frames of the participant's code: anything but torch, installed libraries and this file."""
    return not filename.startswith(_LIBRARY_PREFIXES)


class Enforcer:
    """``with Enforcer() as e: out = model(ids)`` raises DisallowedOperation on any rule break.

    ``e.violations`` lists every rejection (the first is the one reported). One enforcer may be
    entered many times (once per batch); violations accumulate.
    """

    def __init__(self) -> None:
        self.violations: list[str] = []
        self.route: list[str] = []
        self.ops_seen = 0
        self.in_handler = 0
        self._saved_profile: Any = None
        self._fn: _FunctionGuard | None = None
        self._disp: _DispatchGuard | None = None
        self._dispatch_depth = 0
        self._thread = None
        self._saved_dynamo: Any = None
        self._saved_switches: dict[str, Any] = {}
        self._saved_jit_optimize = True

    # -- recording ----------------------------------------------------------------------------
    def reject(self, operation: str) -> None:
        self.note(operation)
        raise DisallowedOperation(operation)

    def note(self, operation: str) -> None:
        if operation not in self.violations:
            self.violations.append(operation)

    # -- the profile hook ---------------------------------------------------------------------
    def _profile(self, frame, event, arg):  # noqa: ANN001 - sys.setprofile's signature
        if self.in_handler or (event != "call" and event != "c_call") or threading.get_ident() != self._thread:
            return
        # c_call: `frame` made the call; call: `frame` is the Python function being entered.
        filename = frame.f_code.co_filename
        if filename == _THIS_FILE:
            return
        if event == "c_call":
            name = getattr(arg, "__name__", "")
            owner = getattr(arg, "__self__", None)
            if isinstance(owner, torch.Tensor) and name in DATA_ESCAPES:
                self.note(f"torch.Tensor.{name} ({DATA_ESCAPES[name]})")
            elif name in _MODE_TAMPERING and not filename.startswith(_TORCH_DIR):  # torch pops modes for handlers
                self.note(f"torch._C.{name} (switching the enforcer's modes off)")
            elif name in ("_to_dlpack", "to_dlpack", "_to_dlpack_versioned"):
                self.note(f"{name} (tensor data leaves torch (DLPack))")
            elif name in _PROFILER_SWITCHES and owner is sys:
                self.note(f"sys.{name} (switching the enforcer's hook off)")
            elif name in _PROCESS_AND_THREAD and getattr(owner, "__name__", "") in _PROCESS_MODULES:
                self.note(f"{getattr(owner, '__name__', '')}.{name} (threads and processes run outside the enforcer)")
            elif name == "replay" and "Graph" in type(owner).__name__:
                self.note("CUDAGraph.replay (replaying a captured graph runs kernels outside the enforcer)")
        # Whenever the model's own code calls a builtin, or one of its functions is entered, the
        # modes must be in place. Torch's frames (and the standard library's) are not checked:
        # they legitimately run while a mode is popped for its handler.
        if _is_model_code(filename):
            if torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python):
                self.note("torch._C._DisableTorchDispatch (the Python dispatch key was excluded)")
            elif torch._C._len_torch_dispatch_stack() < self._dispatch_depth:
                self.note("the enforcer's dispatch mode was removed from its stack")

    def _guard_switch(self, name: str, original: Any) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if _is_model_code(sys._getframe(1).f_code.co_filename):
                self.note(f"torch._C.{name} (switching the enforcer's modes off)")
            return original(*args, **kwargs)

        return guarded

    # -- the context manager --------------------------------------------------------------------
    def __enter__(self) -> "Enforcer":
        self.route.clear()
        self.in_handler = 0
        self._thread = threading.get_ident()
        dynamo_config = sys.modules.get("torch._dynamo.config")
        if dynamo_config is not None:  # compiled code would run kernels the modes never see
            self._saved_dynamo = getattr(dynamo_config, "disable", None)
            dynamo_config.disable = True
        self._fn = _FunctionGuard(self)
        self._disp = _DispatchGuard(self)
        self._fn.__enter__()
        self._disp.__enter__()
        self._dispatch_depth = torch._C._len_torch_dispatch_stack()
        # TorchScript's optimizing executor fuses ops into kernels that bypass the dispatcher.
        self._saved_jit_optimize = torch._C._get_graph_executor_optimize()
        torch._C._set_graph_executor_optimize(False)
        self._saved_switches = {n: getattr(torch._C, n) for n in _GUARDED_SWITCHES if hasattr(torch._C, n)}
        for n, original in self._saved_switches.items():
            setattr(torch._C, n, self._guard_switch(n, original))
        self._saved_profile = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        hook = sys.getprofile()
        sys.setprofile(self._saved_profile)
        for n, original in self._saved_switches.items():
            setattr(torch._C, n, original)
        torch._C._set_graph_executor_optimize(self._saved_jit_optimize)
        if hook != self._profile:  # a bound method: equal, not identical
            self.note("sys.setprofile (the enforcer's hook was replaced)")
        if torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python):
            self.note("torch._C._DisableTorchDispatch (the Python dispatch key was left excluded)")
        for guard in (self._disp, self._fn):
            try:
                guard.__exit__(None, None, None)  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 - a stack the model changed
                self.note("the enforcer's modes were changed during the forward pass")
        dynamo_config = sys.modules.get("torch._dynamo.config")
        if dynamo_config is not None and self._saved_dynamo is not None:
            dynamo_config.disable = self._saved_dynamo
        if self.violations:
            if isinstance(exc, DisallowedOperation) and exc.operation == self.violations[0]:
                return False
            raise DisallowedOperation(self.violations[0]) from exc
        return False
