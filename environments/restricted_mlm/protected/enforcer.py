"""The rules of restricted_mlm's forward pass, as an allow-list of ATen operators.

The rules allow linear and embedding layers, matrix products (matmul, @, einsum, mm, bmm), sums,
addition (subtraction and negation count as addition), multiplication, ReLU, and operations that
only move, select, copy or create values (indexing, reshaping, views, cat/stack, padding with a
constant, gather, dtype changes between float types). Everything else is rejected: division,
exponentials and logarithms, powers and roots, softmax, normalisation layers, every other
activation, comparisons, max/min/abs/clamp, random numbers, reading tensor values into Python.

Only the scorer uses this file, and only on a graph it runs itself (see graph.py): the
participant's code never runs in the scorer's process, so nothing here has to resist being
switched off. Two checks use the same allow-list:

1. :func:`check_name` on every operator the participant's graph names, before anything runs
   (an operator outside the list is never even looked up);
2. :class:`Checker`, a ``TorchDispatchMode`` around the scorer's own execution of the graph, on
   every ATen operator that actually runs, after PyTorch has decomposed composite operators
   (``aten.linear`` becomes ``aten.t`` + ``aten.addmm``, ``aten.pad`` with ``mode="reflect"``
   becomes ``aten.reflection_pad1d``, which is rejected), with the conditions allowed operators
   carry (``embedding_bag`` only summing; no bit reinterpretation).

One condition holds for every operator, judged by what it did rather than by its name
(:func:`dtype_flow`): **no float value reaches an integer or boolean result.** An operator that
has a float tensor among its inputs and an integer or boolean tensor among its outputs is
refused, whatever it is called: ``x.long()``, ``x.sum(dtype=torch.int64)``, ``copy_`` into an
integer tensor, and the writing operators that copy with a cast (``slice_scatter``,
``diagonal_scatter``, ``as_strided_scatter``, ``index_put``, ``scatter`` ...) alike. A float to
integer conversion is rounding (a comparison or a step function in disguise), and an integer made
from floats can index a table: ``exp`` by lookup. Only the operators that make a new tensor from
another's shape alone (``zeros_like``, ``new_zeros`` ...: :data:`SHAPE_ONLY`) are exempt.

The messages name the operator and why, e.g. ``aten.div.Tensor (x / y, division)``.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["DisallowedOperation", "ALLOWED_ATEN", "SHAPE_ONLY", "check_aten", "check_name", "dtype_flow", "Checker"]


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
    "item": "reading a tensor value into Python: .item(), float(), bool(), if x:", "square": "power (use x * x)",
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
    "aten.diagonal_scatter": _check_write(0, 1),
    "aten.as_strided_scatter": _check_write(0, 1),
    "aten.sum": _check_sum_dtype,
    "aten.cumsum": _check_sum_dtype,
    "aten.cumsum_": _check_sum_dtype,
    "aten.embedding_bag": _check_embedding_bag,
    "aten._embedding_bag": _check_embedding_bag,
    "aten._embedding_bag_forward_only": _check_embedding_bag,
}


# Operators whose result takes only the shape (and device) of their tensor inputs, never a value.
SHAPE_ONLY = frozenset(f"aten.{n}" for n in (
    "zeros_like", "ones_like", "full_like", "empty_like", "new_zeros", "new_ones", "new_full", "new_empty",
    "new_empty_strided", "zeros", "ones", "full", "empty", "empty_strided", "arange", "eye", "scalar_tensor"))

# Operators whose results after the first are bookkeeping made from integer indices alone
# (embedding_bag's offsets and bag sizes): only the first result is judged.
FIRST_RESULT_ONLY = frozenset({"aten._embedding_bag", "aten._embedding_bag_forward_only"})


def _real(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


def dtype_flow(func: Any, args: tuple, kwargs: dict, out: Any) -> str | None:
    """The problem when an operator that ran turned float values into an integer or boolean result
    (see the module docstring), or None."""
    from torch.utils._pytree import tree_leaves

    _full, packet = _op_names(func)
    if packet in SHAPE_ONLY:
        return None
    if packet in FIRST_RESULT_ONLY:
        out = out[0]
    made = [t.dtype for t in tree_leaves(out) if isinstance(t, torch.Tensor) and not _real(t.dtype)]
    if not made:
        return None
    fed = [t.dtype for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor) and _real(t.dtype)]
    if not fed:
        return None
    return _conversion_problem(fed[0], made[0]) or f"float values into a {made[0]} result"


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
    hint = _hint(packet.split(".", 1)[-1])
    return f"{full} ({hint})" if hint else full


def _hint(short: str) -> str | None:
    hint = _ATEN_HINTS.get(short)
    if hint is None and "softmax" in short:
        hint = "softmax"
    elif hint is None and "attention" in short:
        hint = "attention (softmax)"
    return hint


_NAME = re.compile(r"^([a-z_][a-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)$")


def check_name(name: str) -> str | None:
    """The problem with an operator named in a graph (``"aten.add.Tensor"``), or None when the
    allow-list has it. Only the name is judged: the conditions on arguments are checked when the
    operator runs (:class:`Checker`)."""
    m = _NAME.match(name) if isinstance(name, str) else None
    if m is None:
        return f"{str(name)[:120]!r} (not an operator name)"
    ns, packet, _overload = m.groups()
    if ns == "aten" and (name in ALLOWED_ATEN or f"aten.{packet}" in ALLOWED_ATEN):
        return None
    hint = _hint(packet) if ns == "aten" else None
    return f"{name} ({hint})" if hint else name


_PLAIN_DISPATCH = torch.Tensor.__torch_dispatch__


class Checker(TorchDispatchMode):
    """``with Checker() as c: ...`` raises DisallowedOperation when an ATen operator outside the
    rules runs (and lists it in ``c.violations``). ``c.ops_seen`` counts the operators that ran.
    The scorer makes only plain tensors, so a tensor subclass here is rejected too."""

    def __init__(self) -> None:
        super().__init__()
        self.ops_seen = 0
        self.violations: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        custom = [t for t in types if getattr(t, "__torch_dispatch__", None) is not _PLAIN_DISPATCH]
        problem = f"tensor subclass {custom[0].__name__}" if custom else check_aten(func, args, kwargs)
        if problem is not None:  # recorded too: the caller checks `violations` after the block
            self.violations.append(problem)
            raise DisallowedOperation(problem)
        self.ops_seen += 1
        out = func(*args, **kwargs)
        flow = dtype_flow(func, args, kwargs, out)
        if flow is not None:
            problem = f"{_op_names(func)[0]} ({flow})"
            self.violations.append(problem)
            raise DisallowedOperation(problem)
        return out
