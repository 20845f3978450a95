"""A real OpenSSH server on loopback, for driving the Docker engine over ``ssh://``.

Everything lives in a temporary folder: the server's host key and config, the client's key,
``known_hosts`` and ``config`` under ``<tmp>/home/.ssh`` (tests point HOME there; the docker
SDK's paramiko transport reads it), and an ``ssh`` wrapper that makes the docker CLI (the shell
key) use that config too (OpenSSH reads the passwd home, not HOME). The server runs in the
foreground as a child: ``stop()`` ends it and every live connection (the link is cut),
``start()`` brings it back on the same port.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (per-connection sshd processes and what they run)."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    kids = [int(x) for x in out.split()]
    return kids + [g for k in kids for g in _children(k)]


class Sshd:
    def __init__(self, root: Path, user: str = "root") -> None:
        self.root = root
        self.user = user
        self.port = free_port()
        self.home = root / "home"
        self.bin = root / "bin"
        self.proc: subprocess.Popen | None = None
        ssh = self.home / ".ssh"
        ssh.mkdir(parents=True)
        self.bin.mkdir()
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / "host_key")], check=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ssh / "id_ed25519")], check=True)
        shutil.copy(ssh / "id_ed25519.pub", root / "authorized_keys")
        os.chmod(root / "authorized_keys", 0o600)
        (root / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\n"
            f"AuthorizedKeysFile {root / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
            f"PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            f"PidFile {root / 'sshd.pid'}\nMaxSessions 64\nMaxStartups 64\n"
            # HOME: the user's own start-up files stay unread. Root's .bashrc on a CI machine may run
            # `pyenv init`, whose rehash lock, left by a login this server cut, stalls every later login.
            f"SetEnv PATH={os.environ.get('PATH', '/usr/local/bin:/usr/bin:/bin')} HOME={self.home}\n")
        host_pub = (root / "host_key.pub").read_text().split()[:2]
        (ssh / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {' '.join(host_pub)}\n")
        (ssh / "config").write_text(
            f"Host 127.0.0.1\n  Port {self.port}\n  User {user}\n  IdentityFile {ssh / 'id_ed25519'}\n"
            f"  UserKnownHostsFile {ssh / 'known_hosts'}\n  StrictHostKeyChecking yes\n  BatchMode yes\n")
        for p in (ssh, ssh / "id_ed25519", ssh / "config"):
            os.chmod(p, 0o700 if p.is_dir() else 0o600)
        wrapper = self.bin / "ssh"
        wrapper.write_text(f"#!/bin/sh\nexec {shutil.which('ssh') or '/usr/bin/ssh'} -F {ssh / 'config'} \"$@\"\n")
        wrapper.chmod(0o755)
        Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation folder

    @property
    def url(self) -> str:
        return f"ssh://{self.user}@127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.root / "sshd.log", "ab")
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")], stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        raise RuntimeError(f"sshd did not start: {(self.root / 'sshd.log').read_text()[-2000:]}")

    def drop_links(self) -> int:
        """Kill every per-connection sshd (live links end); the listener stays."""
        if self.proc is None:
            return 0
        kids = _children(self.proc.pid)
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(kids)

    def stop(self) -> None:
        """Stop the server and cut every live link."""
        if self.proc is None:
            return
        kids = _children(self.proc.pid)
        self.proc.kill()
        self.proc.wait(timeout=10)
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc = None

    def env(self) -> dict[str, str]:
        """Environment for the docker CLI and ssh as the app's shell key runs them."""
        return {**os.environ, "HOME": str(self.home), "PATH": f"{self.bin}:{os.environ.get('PATH', '')}"}


# -- fixtures (imported by the remote tests) ---------------------------------------------------
import pytest  # noqa: E402


@pytest.fixture
def sshd(tmp_path, monkeypatch, docker_client):
    """A running sshd on loopback; HOME points at its client side (never the real ~/.ssh)."""
    server = Sshd(tmp_path / "ssh")
    server.start()
    monkeypatch.setenv("HOME", str(server.home))
    monkeypatch.setenv("PATH", f"{server.bin}:{os.environ.get('PATH', '')}")
    yield server
    server.stop()


@pytest.fixture
def remote_runtime(sshd, settings, docker_client):
    """The real engine driven over ssh:// through the loopback sshd. Afterwards only what this
    test's sessions made is looked at (other work may share the engine): anything of theirs left
    is removed and reported."""
    from rebench_tui.runtime.base import LABEL_SESSION
    from rebench_tui.runtime.docker_runtime import DockerRuntime

    rt = DockerRuntime.connect(sshd.url, settings.images, settings.cache_dir)
    made: list[str] = []
    create = rt.create

    def tracking_create(spec, image, progress):
        made.append(spec.session_id)
        return create(spec, image, progress)

    rt.create = tracking_create  # type: ignore[method-assign]
    yield rt
    left, vols = [], []
    for sid in made:
        left += docker_client.containers.list(all=True, filters={"label": f"{LABEL_SESSION}={sid}"})
    for c in left:
        c.remove(force=True)
    for sid in made:
        vols += docker_client.volumes.list(filters={"label": f"{LABEL_SESSION}={sid}"})
    for v in vols:
        v.remove(force=True)
    assert not left, f"containers left behind: {[c.name for c in left]}"
    assert not vols, f"volumes left behind: {[v.name for v in vols]}"
