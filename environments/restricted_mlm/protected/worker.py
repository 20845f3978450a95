"""The participant's side of restricted_mlm's scoring: runs in a process of its own, as the
participant, started by score.py (which reads this file as root and passes it to ``python3 -c``).

It never sees held-out data. It waits for the scorer's request
``{"op": "export", "batch_size": B, "seq_len": 128, "vocab_size": 50257, "mask_id": 50256}``,
imports ~/solution/model.py, calls ``get_trained_model()``, captures the model's forward pass on
an int64 input of shape (B, 128) with ``torch.export`` (non-strict; the input is symbolic, so
its values are never seen) and hands back the graph as plain data:

- one memfd holding every weight the graph reads (parameters, buffers, constants) as raw
  little-endian bytes at 64-byte-aligned offsets, then the graph as JSON (``graph_bytes`` bytes
  from ``graph_offset``);
- the message ``{"ok": true, "graph_offset": D, "graph_bytes": G, ...}`` with the memfd attached.

Graph JSON: ``{"format": "rmlm-graph-1", "input": NAME, "output": NAME, "tensors": [{"name",
"dtype", "shape", "offset", "nbytes"}], "nodes": [{"name", "op", "args", "kwargs", "where"}]}``.
``op`` is an ATen operator (``"aten.add.Tensor"``) or ``"getitem"`` (an element of a multi-output
operator's result). An argument is JSON null/bool/int/float/string, a list of arguments,
``{"ref": NAME}`` (the input, a tensor or an earlier node), or ``{"dtype": ...}``,
``{"device": ...}``, ``{"layout": ...}``, ``{"memory_format": ...}``. ``where`` is only for
messages (the line of model.py that made the operator). Only the nodes the output depends on are
sent.

Or, when something fails: ``{"error": TEXT, "stage": "import" | "load" | "export" | "serialize",
"traceback": TEXT}``.

Nothing in here is trusted by the scorer: it checks every operator of the graph against the rules
and runs the graph itself. A solution that changes what this file does (it can: it runs here)
only changes the graph it hands in, and that graph is what gets checked and scored.
"""

import importlib.util
import json
import mmap
import os
import sys
import traceback

ALIGN = 64


def load_model(solution_dir):
    path = os.path.join(solution_dir, "model.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist")
    os.chdir(solution_dir)
    sys.path.insert(0, solution_dir)
    spec = importlib.util.spec_from_file_location("model", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["model"] = module
    spec.loader.exec_module(module)
    if not hasattr(module, "get_trained_model"):
        raise AttributeError("model.py defines no get_trained_model()")
    return module


def where(node, solution_dir):
    """'model.py:14: h = F.softmax(x, -1)' for messages: the innermost frame in the solution
    folder (else the innermost frame) of the node's stack trace."""
    trace = node.meta.get("stack_trace") or ""
    frames = []
    lines = trace.splitlines()
    for i, line in enumerate(lines):
        line = line.strip()
        if line.startswith('File "') and ", line " in line:
            path = line[6:line.index('"', 6)]
            number = line.split(", line ", 1)[1].split(",", 1)[0]
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            frames.append((path, number, code))
    if not frames:
        return ""
    mine = [f for f in frames if os.path.abspath(f[0]).startswith(solution_dir + os.sep)]
    path, number, code = (mine or frames)[-1]
    return f"{os.path.basename(path)}:{number}: {code}"[:300]


def encode(value, torch):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.fx.Node):
        return {"ref": value.name}
    if isinstance(value, (list, tuple)):
        return [encode(v, torch) for v in value]
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": value.type}
    if isinstance(value, torch.layout):
        return {"layout": str(value).removeprefix("torch.")}
    if isinstance(value, torch.memory_format):
        return {"memory_format": str(value).removeprefix("torch.")}
    raise TypeError(f"an argument of type {type(value).__name__} ({value!r:.80}) cannot be sent to the scorer")


def to_plain(ep, torch, solution_dir):
    """(graph dict without offsets, {name: cpu tensor}) for an ExportedProgram."""
    import operator

    sig = ep.graph_signature
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(sig.input_specs):
        raise ValueError("the exported program's inputs do not match its signature")
    tensors, user_inputs = {}, []
    for node, spec in zip(placeholders, sig.input_specs):
        kind = spec.kind.name
        if kind == "USER_INPUT":
            user_inputs.append(node.name)
        elif kind in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
            t = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants.get(spec.target)
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{spec.target} is a {type(t).__name__}, not a tensor")
            tensors[node.name] = t
        else:
            raise TypeError(f"the forward pass uses a {kind} ({spec.target}); only tensors can be sent")
    if len(user_inputs) != 1:
        raise ValueError(f"the forward pass takes {len(user_inputs)} tensor inputs; it must take one (the ids)")
    out_node = next(n for n in ep.graph.nodes if n.op == "output")
    results = list(out_node.args[0])
    user_outputs = [results[i] for i, spec in enumerate(sig.output_specs) if spec.kind.name == "USER_OUTPUT"]
    if len(user_outputs) != 1 or not isinstance(user_outputs[0], torch.fx.Node):
        raise TypeError(f"the forward pass returns {len(user_outputs)} values; it must return one tensor (the logits)")
    needed, todo = set(), [user_outputs[0]]
    while todo:  # only what the output depends on (assertions and dead code stay behind)
        n = todo.pop()
        if n.name not in needed:
            needed.add(n.name)
            todo.extend(n.all_input_nodes)
    nodes = []
    for n in ep.graph.nodes:
        if n.name not in needed or n.op == "placeholder":
            continue
        if n.op != "call_function":
            raise TypeError(f"graph node {n.name} is a {n.op}; only operator calls can be sent")
        if n.target is operator.getitem:
            op = "getitem"
        elif isinstance(n.target, torch._ops.OpOverload):
            op = str(n.target)
        else:
            raise TypeError(f"graph node {n.name} calls {n.target}, which is not an ATen operator")
        nodes.append({"name": n.name, "op": op, "args": encode(list(n.args), torch),
                      "kwargs": {k: encode(v, torch) for k, v in n.kwargs.items()}, "where": where(n, solution_dir)})
    used = {k: v for k, v in tensors.items() if k in needed}
    graph = {"format": "rmlm-graph-1", "input": user_inputs[0], "output": user_outputs[0].name, "nodes": nodes}
    return graph, used


def pack(graph, tensors, torch):
    """A memfd with the tensors' bytes, then the graph's JSON: (fd, graph_offset, graph_bytes)."""
    entries, plain, offset = [], [], 0
    for name, t in tensors.items():
        t = t.detach().to("cpu").contiguous()
        nbytes = t.numel() * t.element_size()
        entries.append({"name": name, "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                        "offset": offset, "nbytes": nbytes})
        plain.append(t)
        offset += -(-nbytes // ALIGN) * ALIGN
    body = json.dumps({**graph, "tensors": entries}, allow_nan=True).encode()
    total = offset + len(body)
    from rebench_scorer import arrays

    fd = arrays.memfd(total, "rmlm-graph")
    buf = mmap.mmap(fd, total, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    for e, t in zip(entries, plain):
        if e["nbytes"]:
            buf[e["offset"]:e["offset"] + e["nbytes"]] = t.reshape(-1).view(torch.uint8).numpy()
    buf[offset:total] = body
    buf.close()
    return fd, offset, len(body)


def capture(model, example, torch):
    """The forward pass on an input shaped like ``example``, as a functional ATen graph."""
    with torch.no_grad():
        ep = torch.export.export(model, (example,), strict=False)
        return ep.run_decompositions({})  # functional ATen: no in-place writes, no wrapped regions


def main():
    sys.path.insert(0, os.environ["REBENCH_SCORER_LIB"])
    from rebench_scorer.channel import Channel

    ch = Channel.from_env()
    req, _ = ch.recv(timeout=120)
    batch, seq, vocab, mask_id = (int(req[k]) for k in ("batch_size", "seq_len", "vocab_size", "mask_id"))
    home = os.environ.get("REBENCH_HOME", os.path.expanduser("~"))
    solution_dir = os.path.abspath(os.path.join(home, "solution"))
    stage = "import"
    try:
        import torch

        module = load_model(solution_dir)
        stage = "load"
        model = module.get_trained_model()
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"get_trained_model() returned {type(model).__name__}, not a torch.nn.Module")
        model = model.to("cpu").eval()
        stage = "export"
        gen = torch.Generator().manual_seed(0)
        example = torch.randint(0, vocab, (batch, seq), generator=gen)  # symbolic during export: values unseen
        example[:, ::7] = mask_id
        ep = capture(model, example, torch)
        stage = "serialize"
        graph, tensors = to_plain(ep, torch, solution_dir)
        fd, graph_offset, graph_bytes = pack(graph, tensors, torch)
    except BaseException as exc:  # noqa: BLE001 - the scorer reports it as NaN
        ch.send({"error": f"{type(exc).__name__}: {exc}"[:3000], "stage": stage,
                 "traceback": traceback.format_exc()[-4000:]})
        return
    ch.send({"ok": True, "graph_offset": graph_offset, "graph_bytes": graph_bytes, "nodes": len(graph["nodes"]),
             "torch": torch.__version__}, fds=[fd])


if __name__ == "__main__":  # also under `python -c`, as the scorer starts it
    main()
