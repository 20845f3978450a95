"""Hostile: rewrites the graph its own process hands in (the worker runs in the participant's
process, so it can) to add a node that writes into a weight in place, a memory across batches.
Expected: NaN, "writes into its arguments"."""

import __main__

import _start

_to_plain = __main__.to_plain


def to_plain(ep, torch, solution_dir):
    graph, tensors = _to_plain(ep, torch, solution_dir)
    weight = next(iter(tensors))
    out = graph["output"]
    graph["nodes"].append({"name": "remember", "op": "aten.add_.Tensor",
                           "args": [{"ref": weight}, 1.0], "kwargs": {}, "where": ""})
    graph["nodes"].append({"name": "result", "op": "aten.add.Tensor", "args": [{"ref": out}, 0.0], "kwargs": {}})
    graph["output"] = "result"
    return graph, tensors


__main__.to_plain = to_plain
get_trained_model = _start.get_trained_model
