"""The participant's model as plain data: read, checked and run by the scorer itself.

The participant's process (worker.py) captures the model's forward pass with ``torch.export``
and sends a memfd with the weights' raw bytes and a JSON graph of ATen operator calls (the format
is described in worker.py). That process is the participant's: it may send anything. So
:class:`Graph` trusts nothing in it:

- the memfd must be a regular file at least as long as announced; its bytes are read (not
  mapped: a peer that shrinks it cannot crash the scorer) into the scorer's own memory once;
- every field is checked (types, names, sizes, offsets inside the buffer, dtypes from a fixed
  list, nesting depth), every reference must name the input, a weight or an earlier node (so the
  graph is acyclic), and nothing is ever unpickled or imported;
- every operator is judged by name against the allow-list before anything runs
  (:func:`enforcer.check_name`); only allowed ATen operators are ever looked up, and operators
  that write into their arguments (in-place or ``out=`` variants) are refused, so the graph is a
  pure function of the weights and the input: nothing carries over from one batch to the next;
- :meth:`Graph.run` executes the graph in the scorer under :class:`enforcer.Checker`, which sees
  every ATen operator that actually runs (composite operators' insides included) and checks the
  conditions on their arguments; device arguments are replaced by the scorer's device; the
  storage of what ``empty``-like operators return is zeroed (uninitialised memory is the
  scorer's, and may hold what it freed); the input is a tensor of its own (no view of other
  batches).

What the model computes is therefore exactly what this module computes from the weights and the
masked ids with allowed operators: the participant's own code never sees the held-out ids.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from typing import Any

import torch

from enforcer import Checker, DisallowedOperation, check_name

FORMAT = "rmlm-graph-1"
ALIGN = 64
MAX_GRAPH_BYTES = 64 << 20
MAX_NODES = 200_000
MAX_TENSORS = 100_000
MAX_DEPTH = 6
MAX_LIST = 100_000
MAX_TEXT = 1000
MAX_DIMS = 8
MAX_INT = (1 << 63) - 1  # int64: slices end at sys.maxsize
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64,
          "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8,
          "bool": torch.bool}
LAYOUTS = {"strided": torch.strided}
MEMORY_FORMATS = {"contiguous_format": torch.contiguous_format, "preserve_format": torch.preserve_format,
                  "channels_last": torch.channels_last, "channels_last_3d": torch.channels_last_3d}
DEVICES = ("cpu", "cuda")
_EMPTY = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")
_PRINTABLE = re.compile(r"[^\x20-\x7e]")


class Invalid(Exception):
    """The graph is malformed, breaks the rules or fails to run; ``message`` is the scorer's
    message for the participant (``error`` or ``disallowed_operation``)."""

    def __init__(self, message: dict[str, Any]) -> None:
        super().__init__(json.dumps(message))
        self.message = message


def _error(text: str) -> Invalid:
    return Invalid({"error": text})


class _Ref:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class _Device:
    """Where a device argument was: replaced by the scorer's device when the graph runs."""


_DEVICE = _Device()


@dataclass
class _Node:
    name: str
    op_name: str
    op: Any  # an OpOverload, or None for getitem
    args: list
    kwargs: dict
    where: str
    empty: bool


def _int(value: Any, what: str, low: int = 0, high: int = MAX_INT) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _error(f"the graph's {what} must be an integer in [{low}, {high}], not {str(value)[:40]}")
    return value


def _clean(text: Any) -> str:
    return _PRINTABLE.sub("?", text)[:300] if isinstance(text, str) else ""


def read_exact(fd: int, offset: int, view: memoryview) -> None:
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], offset + done)
        if n <= 0:
            raise _error("the graph's buffer is shorter than announced")
        done += n


class Graph:
    """A checked graph with its weights (on ``device``): ``Graph(header, fds, device=..., max_bytes=...)``
    raises :class:`Invalid`; :meth:`run` computes the model's output for a batch of ids."""

    def __init__(self, header: dict[str, Any], fds: list[int], *, device: str, max_bytes: int) -> None:
        self.device = torch.device(device)
        if len(fds) != 1:
            raise _error(f"the model's process sent {len(fds)} buffers with its graph; one was expected")
        fd = fds[0]
        data_bytes = _int(header.get("graph_offset"), "data size", 0, max_bytes)
        graph_bytes = _int(header.get("graph_bytes"), "description size", 2, MAX_GRAPH_BYTES)
        if data_bytes % ALIGN:
            raise _error("the graph's data size is not aligned")
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size < data_bytes + graph_bytes:
            raise _error("the graph's buffer is not a memory file of the announced size")
        text = bytearray(graph_bytes)
        read_exact(fd, data_bytes, memoryview(text))
        try:
            spec = json.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise _error("the graph's description is not JSON") from None
        if not isinstance(spec, dict) or spec.get("format") != FORMAT:
            raise _error(f"the graph's description is not in the {FORMAT} format")
        nodes, tensors = spec.get("nodes"), spec.get("tensors")
        if not isinstance(nodes, list) or not isinstance(tensors, list) or len(nodes) > MAX_NODES \
                or len(tensors) > MAX_TENSORS:
            raise _error(f"the graph must list at most {MAX_NODES} nodes and {MAX_TENSORS} tensors")
        self.ops_by_name = self._check_operators(nodes)
        # the weights: read once into the scorer's memory
        buffer = torch.empty(data_bytes, dtype=torch.uint8)
        read_exact(fd, 0, memoryview(buffer.numpy()))
        self.names: dict[str, int] = {}
        self.base: list[Any] = []
        for entry in tensors:
            self.base.append(self._tensor(entry, buffer, data_bytes))
        self.input_index = self._define(spec.get("input"))
        self.base.append(None)
        self.nodes = [self._node(n, i) for i, n in enumerate(nodes)]
        out = spec.get("output")
        if not isinstance(out, str) or out not in self.names:
            raise _error("the graph's output names nothing in the graph")
        self.output_index = self.names[out]
        self.weight_bytes = data_bytes
        self.ops_seen = 0

    # -- loading -------------------------------------------------------------------------------
    def _define(self, name: Any) -> int:
        if not isinstance(name, str) or not _NAME.match(name) or name in self.names:
            raise _error(f"the graph names something {str(name)[:40]!r} (not a plain name, or twice)")
        self.names[name] = len(self.names)
        return self.names[name]

    @staticmethod
    def _check_operators(nodes: list) -> dict[str, Any]:
        """Every operator named, judged by name before anything is read or run."""
        ops: dict[str, Any] = {}
        for n in nodes:
            if not isinstance(n, dict):
                raise _error("a graph node is not an object")
            name = n.get("op")
            if not isinstance(name, str) or len(name) > MAX_TEXT:
                raise _error("a graph node's operator is not a name")
            if name == "getitem" or name in ops:
                continue
            problem = check_name(name)
            if problem is not None:
                where = _clean(n.get("where"))
                raise Invalid({"disallowed_operation": problem + (f" at {where}" if where else "")})
            _ns, packet, overload = name.split(".")
            packet_obj = getattr(torch.ops.aten, packet, None)
            if packet_obj is None or overload not in packet_obj.overloads():
                raise _error(f"the graph calls {name}, which this PyTorch does not have")
            op = getattr(packet_obj, overload)
            if op._schema.is_mutable:
                raise _error(f"the graph calls {name}, which writes into its arguments: a captured forward pass "
                             "is functional (in-place operations become out-of-place ones)")
            ops[name] = op
        return ops

    def _tensor(self, entry: Any, buffer: torch.Tensor, data_bytes: int) -> torch.Tensor:
        if not isinstance(entry, dict):
            raise _error("a graph tensor is not an object")
        self._define(entry.get("name"))
        dtype = DTYPES.get(entry.get("dtype")) if isinstance(entry.get("dtype"), str) else None
        if dtype is None:
            raise _error(f"a graph tensor has dtype {str(entry.get('dtype'))[:40]!r}, not one of {sorted(DTYPES)}")
        shape = entry.get("shape")
        if not isinstance(shape, list) or len(shape) > MAX_DIMS:
            raise _error(f"a graph tensor's shape must be a list of at most {MAX_DIMS} sizes")
        numel = 1
        for d in shape:
            numel *= _int(d, "tensor size", 0, data_bytes)
        offset = _int(entry.get("offset"), "tensor offset", 0, data_bytes)
        nbytes = _int(entry.get("nbytes"), "tensor length", 0, data_bytes)
        if nbytes != numel * dtype.itemsize or offset % ALIGN or offset + nbytes > data_bytes:
            raise _error("a graph tensor's bytes do not match its shape or lie outside the buffer")
        t = buffer[offset:offset + nbytes].view(dtype).reshape(shape)
        return t.to(self.device) if self.device.type != "cpu" else t

    def _decode(self, obj: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise _error("a graph argument is nested too deeply")
        if obj is None or isinstance(obj, (bool, float)):
            return obj
        if isinstance(obj, int):
            return _int(obj, "integer argument", -MAX_INT - 1, MAX_INT)
        if isinstance(obj, str):
            if len(obj) > MAX_TEXT:
                raise _error("a graph argument's text is too long")
            return obj
        if isinstance(obj, list):
            if len(obj) > MAX_LIST:
                raise _error("a graph argument's list is too long")
            return [self._decode(x, depth + 1) for x in obj]
        if isinstance(obj, dict) and len(obj) == 1:
            ((key, value),) = obj.items()
            if key == "ref" and isinstance(value, str) and value in self.names:
                return _Ref(self.names[value])
            if key == "dtype" and value in DTYPES:
                return DTYPES[value]
            if key == "device" and value in DEVICES:
                return _DEVICE
            if key == "layout" and value in LAYOUTS:
                return LAYOUTS[value]
            if key == "memory_format" and value in MEMORY_FORMATS:
                return MEMORY_FORMATS[value]
        raise _error(f"a graph argument {json.dumps(obj)[:80]} is not one the format allows "
                     "(references must name the input, a tensor or an earlier node)")

    def _node(self, n: dict, i: int) -> _Node:
        op_name = n.get("op")
        args, kwargs = n.get("args", []), n.get("kwargs", {})
        if not isinstance(args, list) or not isinstance(kwargs, dict) or not all(isinstance(k, str) and _NAME.match(k) for k in kwargs):
            raise _error(f"graph node {i} has malformed arguments")
        args = self._decode(args)
        kwargs = {k: self._decode(v) for k, v in kwargs.items()}
        if op_name == "getitem" and not (len(args) == 2 and not kwargs and isinstance(args[0], _Ref)
                                         and isinstance(args[1], int)):
            raise _error(f"graph node {i} (getitem) must take a node and an index")
        node = _Node(str(n.get("name")), op_name, None if op_name == "getitem" else self.ops_by_name[op_name],
                     args, kwargs, _clean(n.get("where")), op_name.split(".")[1] in _EMPTY if op_name != "getitem" else False)
        self._define(n.get("name"))
        return node

    # -- running -------------------------------------------------------------------------------
    def _subst(self, obj: Any, slots: list) -> Any:
        if isinstance(obj, _Ref):
            return slots[obj.index]
        if obj is _DEVICE:
            return self.device
        if isinstance(obj, list):
            return [self._subst(x, slots) for x in obj]
        return obj

    def run(self, ids: torch.Tensor) -> Any:
        """The graph's output for ``ids``, computed here with allowed operators only."""
        slots = self.base + [None] * len(self.nodes)
        slots[self.input_index] = ids
        first = len(self.base)
        checker = Checker()
        with torch.no_grad(), checker:
            for i, node in enumerate(self.nodes):
                try:
                    if node.op is None:
                        seq, idx = slots[node.args[0].index], node.args[1]
                        if not isinstance(seq, (tuple, list)) or not -len(seq) <= idx < len(seq):
                            raise _error(f"graph node {node.name} takes item {idx} of something that has no such item")
                        slots[first + i] = seq[idx]
                        continue
                    out = node.op(*self._subst(node.args, slots), **{k: self._subst(v, slots) for k, v in node.kwargs.items()})
                    if node.empty and isinstance(out, torch.Tensor):  # all of its storage: strides may leave
                        n = out.untyped_storage().nbytes() // out.element_size()  # gaps a view could reach
                        out.as_strided((n,), (1,), 0).zero_()
                    slots[first + i] = out
                except DisallowedOperation as exc:
                    raise Invalid({"disallowed_operation": f"{exc.operation}, reached from {node.op_name}"
                                   + (f" at {node.where}" if node.where else "")}) from None
                except Invalid:
                    raise
                except Exception as exc:  # noqa: BLE001 - the model's fault, reported as NaN
                    raise Invalid({"error": f"the forward pass failed in {node.op_name}"
                                            + (f" at {node.where}" if node.where else "")
                                            + f": {type(exc).__name__}: {str(exc)[:500]}"}) from None
        if checker.violations:
            raise Invalid({"disallowed_operation": checker.violations[0]})
        self.ops_seen += checker.ops_seen
        return slots[self.output_index]
