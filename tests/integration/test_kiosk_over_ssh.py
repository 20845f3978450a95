"""The kiosk set-up end to end: a participant logs in through a real sshd on loopback whose
authorized key runs `rebench-tui kiosk` as a forced command (``restrict,pty,command=...``), as
docs/study.md sets it up. The login gets the participant's own session in a terminal (a pty): the
shell key opens a shell in the session's container, a scoring is recorded, a second login
resumes the session. Everything else the participant asks for is refused in one line: an
arbitrary command, a second start, another participant's session, scp and sftp into the
sessions folder, and forwarding a port to the engine's socket.

The sshd here logs in as root, which stands for the service account that owns the sessions
folder: the participant acts on the host only through the kiosk.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from rebench_tui.runtime.base import LABEL_SESSION
from rebench_tui.trajectory.audit import read_entries
from rebench_tui.trajectory.entries import log_event
from tests.conftest import FIXTURE_ENVS, ROOT
from tests.sshd import _children, free_port, sshd  # noqa: F401 - fixture
from tests.tui.test_study_start import Terminal

pytestmark = pytest.mark.docker

SSH = shutil.which("ssh") or "/usr/bin/ssh"
REFUSED = "error: this login only starts or resumes your own session"


@pytest.fixture
def kiosk(sshd, settings, tmp_path, docker_client):  # noqa: F811
    """The loopback sshd with ada's key forced into the kiosk; the sessions folder only the service
    account (root here) may enter. Afterwards the containers and volumes of ada's sessions go."""
    srv = tmp_path / "srv"
    sessions, config = srv / "sessions", srv / "config"
    sessions.mkdir(parents=True)
    config.mkdir()
    os.chmod(sessions, 0o700)
    (config / "kiosk.toml").write_text(f'sessions_dir = "{sessions}"\nprofile = "smoke"\n'
                                       '[participants.ada]\nenvironments = ["toy_score"]\n')
    passed = {"PYTHONPATH": str(ROOT), "REBENCH_ENVIRONMENTS_DIR": str(FIXTURE_ENVS), "REBENCH_CONFIG_DIR": str(config),
              "REBENCH_CACHE_DIR": str(settings.cache_dir), "REBENCH_SCORER_LIB": os.environ["REBENCH_SCORER_LIB"],
              **{k: os.environ[k] for k in ("DOCKER_HOST", "REBENCH_CONTAINER_THREADS") if k in os.environ}}
    forced = (f"cd {srv} && exec env " + " ".join(f"{k}={v}" for k, v in passed.items())
              + f" {sys.executable} -m rebench_tui.cli kiosk --participant ada")
    key = (sshd.home / ".ssh" / "id_ed25519.pub").read_text().strip()
    (sshd.root / "authorized_keys").write_text(f'restrict,pty,command="{forced}" {key}\n')
    yield sessions
    for folder in sessions.glob("toy_*"):
        for c in docker_client.containers.list(all=True, filters={"label": f"{LABEL_SESSION}={folder.name}"}):
            c.remove(force=True)
        for v in docker_client.volumes.list(filters={"label": f"{LABEL_SESSION}={folder.name}"}):
            v.remove(force=True)


def ssh(sshd, *words: str, timeout: int = 60) -> subprocess.CompletedProcess:  # noqa: F811
    return subprocess.run([SSH, "-F", str(sshd.home / ".ssh" / "config"), "127.0.0.1", *words],
                          capture_output=True, text=True, timeout=timeout, env=sshd.env())


def login(sshd, *words: str) -> Terminal:  # noqa: F811
    return Terminal([SSH, "-tt", "-F", str(sshd.home / ".ssh" / "config"), "127.0.0.1", *words],
                    {**sshd.env(), "TERM": "xterm-256color", "COLUMNS": "200", "LINES": "40"})


def quit_app(term: Terminal) -> None:
    mark = len(term.screen)
    term.press(b"q")
    assert term.until(lambda s: b"Pause clock and quit" in s[mark:], 60), bytes(term.screen[-3000:])
    term.press(b"\r")  # the dialog's first button
    assert term.wait(60) == 0, bytes(term.screen[-3000:])


def events(folder) -> list[str]:
    return [(log_event(r["content"]) or {}).get("event") or r["content"]["type"] for r in read_entries(folder / "audit.jsonl")]


def until_event(folder, name: str, timeout_s: float = 60.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if name in events(folder):
            return True
        time.sleep(0.2)
    return False


def until_gone(sshd, timeout_s: float = 60.0) -> bool:  # noqa: F811
    """Whether every process of the server's logins (the kiosk, the screen, its docker CLI) ends."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if not _children(sshd.proc.pid):
            return True
        time.sleep(0.2)
    return False


def test_a_participant_gets_their_session_over_ssh_and_nothing_else(kiosk, sshd):  # noqa: F811
    sessions = kiosk
    r = ssh(sshd, "ls", "/")  # an arbitrary command: one line, nothing run
    assert r.returncode == 2 and r.stdout == "" and r.stderr.strip().splitlines() == [
        f"{REFUSED}, so 'ls /' was refused: use `ssh HOST` (your session), `ssh HOST start ENV` or `ssh HOST resume`"]
    assert not any(sessions.iterdir())

    app = login(sshd, "start", "toy_score")  # the first login: a new session in a container
    try:
        assert app.until(lambda s: b"Quit" in s and b"Score" in s, 180), bytes(app.screen[-3000:])
        (folder,) = sessions.glob("toy_score-*")
        meta = json.loads((folder / "session.json").read_text())
        assert meta["participant"]["id"] == "ada" and meta["runtime"] == "docker" and meta["isolated"]
        app.press(b"t")  # the shell key: a shell inside the container, as the participant's user
        assert app.until(lambda s: b"agent@" in s or b"$ " in s[-200:], 60), bytes(app.screen[-3000:])
        app.press(b"echo me=$(id -un) && echo 3 > solution/answer.txt && exit\r")
        assert app.until(lambda s: b"me=agent" in s, 60), bytes(app.screen[-3000:])
        assert until_event(folder, "shell_close"), events(folder)
        app.press(b"s")
        assert until_event(folder, "intermediateScore"), events(folder)
    finally:  # the participant's connection drops (their laptop goes to sleep)
        os.kill(app.pid, 9)
        os.waitpid(app.pid, 0)
    assert until_gone(sshd), "the kiosk outlived its connection"
    scored = [r["content"] for r in read_entries(folder / "audit.jsonl") if r["content"]["type"] == "intermediateScore"]
    assert scored[-1]["score"] == 3

    app = login(sshd)  # a plain login resumes the unfinished session
    later = None
    try:
        assert app.until(lambda s: b"Quit" in s and b"Score" in s, 120), bytes(app.screen[-3000:])
        assert f"kiosk: ada, resume {folder.name}".encode() in app.screen
        # A connection the server has not noticed is gone yet: the participant logs in again while
        # the earlier login still holds the session. The new login takes it over; the earlier ends.
        later = login(sshd)
        assert later.until(lambda s: b"Quit" in s and b"Score" in s, 120), bytes(later.screen[-3000:])
        assert b"still open in an earlier login" in later.screen, bytes(later.screen[-3000:])
        ended, app = app, None
        ended.wait(30)  # the earlier login's connection closes with its app (raises if it does not)
        quit_app(later)
        later = None
    finally:
        for term in (app, later):
            if term is not None:
                os.kill(term.pid, 9)
                os.waitpid(term.pid, 0)
    assert events(folder).count("session_resumed") == 2

    r = ssh(sshd, "start", "toy_score")  # one session at a time, each environment once
    assert r.returncode == 1 and f"your session {folder.name} is not finished" in r.stderr
    bob = sessions / "toy_score-20261207-000000-b0b0"  # another participant's session: as if it did not exist
    bob.mkdir()
    (bob / "session.json").write_text(json.dumps({**meta, "id": bob.name, "participant": {"id": "bob"}}))
    r = ssh(sshd, "resume", bob.name)
    assert r.returncode == 1 and r.stderr.strip() == f"error: you have no session '{bob.name}'"


def test_the_sessions_folder_cannot_be_written_or_the_engine_reached(kiosk, sshd, tmp_path):  # noqa: F811
    sessions = kiosk
    r = ssh(sshd, f"touch {sessions}/planted")
    assert r.returncode == 2 and REFUSED in r.stderr
    local = tmp_path / "planted"
    local.write_text("a forged record\n")
    for scp in (["scp", "-s"], ["scp", "-O"]):  # over sftp (the default) and the old scp protocol
        r = subprocess.run([*scp, "-F", str(sshd.home / ".ssh" / "config"), str(local), f"127.0.0.1:{sessions}/planted"],
                           capture_output=True, text=True, timeout=60, env=sshd.env())
        assert r.returncode != 0, r
    r = subprocess.run(["sftp", "-F", str(sshd.home / ".ssh" / "config"), "-b", "-", "127.0.0.1"], input=f"ls {sessions}\n",
                       capture_output=True, text=True, timeout=60, env=sshd.env())
    assert r.returncode != 0
    assert not any(sessions.iterdir())
    # A forwarded port to the engine's socket would be root on the host: restrict refuses it.
    port = free_port()
    fwd = subprocess.Popen([SSH, "-F", str(sshd.home / ".ssh" / "config"), "-N", "-L",
                            f"127.0.0.1:{port}:/var/run/docker.sock", "127.0.0.1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=sshd.env())
    try:
        answer = b""
        for _ in range(100):  # until the client listens (it does before any channel is asked for)
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                    c.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
                    c.settimeout(5)
                    try:
                        answer = c.recv(4096)
                    except ConnectionResetError:  # the server refused the channel: the client drops us
                        answer = b""
                break
            except ConnectionRefusedError:
                time.sleep(0.1)
        else:
            pytest.fail("the ssh client never listened on the forwarded port")
        assert b"OK" not in answer and b"HTTP" not in answer, answer
    finally:
        fwd.kill()
        fwd.wait()
