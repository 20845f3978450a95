"""Hostile: tries to read the held-out tokens, the validation seed and the scorer, and to change
the scorer, then hands in the honest model. Expected: every attempt refused (printed), /protected
unchanged, the honest score."""

import os

import _start

for path in ("/protected/assets/val.bin", "/protected/assets/secret.json", "/protected/assets/info.json",
             "/protected/score.py", "/protected/graph.py"):
    try:
        with open(path, "rb") as fh:
            print(f"read {path}: {len(fh.read())} bytes", flush=True)
    except OSError as exc:
        print(f"{path}: {exc.strerror}", flush=True)
for path in ("/protected/score.py", "/protected/assets/secret.json", "/protected/planted.py"):
    try:
        with open(path, "a") as fh:
            fh.write("\n# planted\n")
        print(f"wrote {path}", flush=True)
    except OSError as exc:
        print(f"{path}: {exc.strerror}", flush=True)
print("listing /protected:", os.access("/protected", os.R_OK), flush=True)

get_trained_model = _start.get_trained_model
