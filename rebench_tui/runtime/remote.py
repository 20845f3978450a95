"""What a remote engine (``ssh://user@host``) needs that a local one does not.

A remote engine cannot bind-mount a folder of this machine: the participant's home is a named
volume on the remote host (one per session, labelled with it, removed only with the container
by ``stop --remove``), filled with the starting workspace through the engine's archive API;
participant assets go into a read-only volume keyed by their manifest digest, filled once per
host. The file feed comes from a poller in the container (``poller.py``) read over an exec
stream (:class:`FileStream`). Reconnecting means a new client: the SDK's SSH transport does not
come back by itself after the link drops.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable, Any, Iterator

from .base import LABEL_MANAGED, LABEL_SESSION

POLLER = Path(__file__).with_name("poller.py")
POLLER_PATH = "/opt/rebench/poller.py"
POLLER_PIDFILE = "/run/rebench/poller.pid"
LABEL_VOLUME = "rebench.volume"  # home | assets
LABEL_ASSETS = "rebench.assets"
FILLED_MARK = ".rebench-filled"


def is_remote(base_url: str | None) -> bool:
    return bool(base_url) and not str(base_url).startswith(("unix://", "npipe://"))


def home_volume(session_id: str) -> str:
    return f"rebench-home-{session_id}"


def assets_digest(folder: Path) -> str:
    """The manifest's sha256 where there is one, else a digest of the listing (names, sizes, mtimes)."""
    manifest = folder / "MANIFEST.json"
    if manifest.is_file():
        return hashlib.sha256(manifest.read_bytes()).hexdigest()
    h = hashlib.sha256()
    for p in sorted((folder / "workspace").rglob("*")):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(folder)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def assets_volume(digest: str) -> str:
    return f"rebench-assets-{digest[:24]}"


def tar_contents(folder: Path, uid: int = 1000, gid: int = 1000) -> "tempfile._TemporaryFileWrapper[bytes]":
    """The folder's contents (not the folder) as a tar owned by the participant, in a temp file."""
    tmp = tempfile.TemporaryFile()

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid, info.gid, info.uname, info.gname = uid, gid, "agent", "agent"
        return info

    with tarfile.open(fileobj=tmp, mode="w") as tar:
        for p in sorted(folder.iterdir()):
            tar.add(str(p), arcname=p.name, filter=owned)
    tmp.seek(0)
    return tmp  # type: ignore[return-value]


def ensure_home_volume(client: Any, session_id: str, labels: dict[str, str]) -> str:
    name = home_volume(session_id)
    client.volumes.create(name=name, labels={**labels, LABEL_VOLUME: "home"})
    return name


def ensure_assets_volume(client: Any, image: str, folder: Path, progress: Any) -> str:
    """A volume holding ``folder/workspace``, filled once per host (a mark file is written last)."""
    import docker.errors

    digest = assets_digest(folder)
    name = assets_volume(digest)
    try:
        client.volumes.get(name)
    except docker.errors.NotFound:
        client.volumes.create(name=name, labels={LABEL_MANAGED: "1", LABEL_VOLUME: "assets", LABEL_ASSETS: digest})
    helper = client.containers.create(image, ["true"], user="root", network_disabled=True, labels={LABEL_MANAGED: "1"},
                                      volumes={name: {"bind": "/fill", "mode": "rw"}})
    try:
        try:
            helper.get_archive(f"/fill/{FILLED_MARK}")
            return name  # filled by an earlier session on this host
        except docker.errors.NotFound:
            pass
        progress(f"copying participant assets to the remote host (volume {name}, once per host)")
        with tar_contents(folder / "workspace", 0, 0) as tmp:
            helper.put_archive("/fill", tmp)
        mark = io.BytesIO()
        with tarfile.open(fileobj=mark, mode="w") as tar:
            info = tarfile.TarInfo(FILLED_MARK)
            data = digest.encode()
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        helper.put_archive("/fill", mark.getvalue())
    finally:
        helper.remove(force=True)
    return name


def remove_session_volumes(client: Any, session_id: str) -> int:
    """The session's home volume (assets volumes are shared and stay)."""
    vols = client.volumes.list(filters={"label": [f"{LABEL_SESSION}={session_id}", f"{LABEL_VOLUME}=home"]})
    for v in vols:
        v.remove(force=True)
    return len(vols)


class FileStream:
    """The poller's JSON lines, read from an exec stream; ``close()`` ends it from another thread.

    A read that sees nothing for ``stall_s`` (the poller writes twice a second) raises, so a hung
    link is noticed here too, not only by the heartbeat.
    """

    def __init__(self, api: Any, container_id: str, root: str, ignore: tuple[str, ...], interval: float,
                 stall_s: float = 10.0, frozen: Callable[[], bool] = lambda: False) -> None:
        self.frozen = frozen  # the container is frozen for a scoring: silence then is not a hung link
        argv = ["python3", POLLER_PATH, root, "--ignore", json.dumps(list(ignore)), "--interval", str(interval),
                "--pidfile", POLLER_PIDFILE]
        exec_id = api.exec_create(container_id, argv, user="root", stdout=True, stderr=True)["Id"]
        self._sock = api.exec_start(exec_id, socket=True)
        raw = getattr(self._sock, "_sock", self._sock)
        self._raw = raw
        try:
            raw.settimeout(stall_s)
        except (AttributeError, OSError):
            pass
        self.closed = False

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            try:
                if hasattr(self._raw, "recv"):
                    chunk = self._raw.recv(n - len(out))
                else:
                    chunk = os.read(self._raw.fileno(), n - len(out))
            except (socket.timeout, TimeoutError):
                if self.frozen() and not self.closed:
                    continue
                raise
            if not chunk:
                raise EOFError("the file poller's stream ended")
            out += chunk
        return out

    def __iter__(self) -> Iterator[dict[str, Any]]:
        buf = b""
        err = b""
        while not self.closed:
            try:
                header = self._read(8)
                size = int.from_bytes(header[4:8], "big")
                data = self._read(size)
            except (socket.timeout, TimeoutError) as exc:
                raise ConnectionError("the file poller sent nothing for too long (link or engine not answering)") from exc
            except EOFError:
                if self.closed:
                    return
                raise ConnectionError("the file poller's stream ended: " + err.decode("utf-8", "replace")[-500:]) from None
            if header[0] == 2:
                err = (err + data)[-4000:]
                continue
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    yield json.loads(line)

    def close(self) -> None:
        self.closed = True
        for fn in ("shutdown", "close"):
            try:
                getattr(self._raw, fn)(*((socket.SHUT_RDWR,) if fn == "shutdown" else ()))
            except Exception:  # noqa: BLE001 - closing a dead link may fail in many ways
                pass


def wait_for(pred: Any, timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()
