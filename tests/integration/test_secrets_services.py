"""Secrets reach only services and the root-only secrets file; no record keeps a value."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from rebench_tui import workstation
from rebench_tui.catalog import load_catalog
from rebench_tui.config import Settings
from rebench_tui.errors import RebenchError
from rebench_tui.runtime.local import LocalRuntime
from rebench_tui.session import Session
from tests.conftest import FIXTURE_ENVS, KNOWN_IMAGES

SECRET = "sk-test-Zq8v1LxT0pSecretValue"
SERVICE = '''
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("token-ok" if os.environ.get("TOY_TOKEN", "").startswith("sk-") else "token-missing").encode()
        self.send_response(200); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", 8765), H).serve_forever()
'''


@pytest.fixture
def env(env_copy):
    def edit(d):
        t = (d / "environment.toml").read_text().replace(
            'resources = { cpus = 1, memory = "256m" }',
            'resources = { cpus = 1, memory = "256m" }\nsecrets = ["TOY_TOKEN"]\nservices = [["python3", "/protected/service.py"]]')
        (d / "environment.toml").write_text(t)
        (d / "protected" / "service.py").write_text(SERVICE)

    return load_catalog(env_copy(FIXTURE_ENVS / "toy_score", edit), KNOWN_IMAGES).get("toy_score")


def every_file_bytes(folder):
    for root, _dirs, files in os.walk(folder):
        for name in files:
            yield os.path.join(root, name), open(os.path.join(root, name), "rb").read()


def test_missing_secrets_are_named_before_anything_starts(env, settings, tmp_path, monkeypatch):
    monkeypatch.delenv("TOY_TOKEN", raising=False)
    monkeypatch.setenv("REBENCH_SECRETS_FILE", str(tmp_path / "none.env"))
    settings = Settings(root=settings.root, sessions_dir=settings.sessions_dir)  # variables are read when Settings is made
    assert settings.secrets_path == tmp_path / "none.env"
    with pytest.raises(RebenchError) as exc:
        workstation.resolve_secrets(env, "smoke", settings)
    assert "TOY_TOKEN" in exc.value.what and "chmod 600" in exc.value.fix
    with pytest.raises(RebenchError):
        Session.create(env, "smoke", LocalRuntime(), settings.sessions)
    assert not settings.sessions.exists() or not any(settings.sessions.iterdir())


def test_a_secrets_file_readable_by_others_is_refused(env, settings, tmp_path, monkeypatch):
    f = tmp_path / "secrets.env"
    f.write_text(f"TOY_TOKEN={SECRET}\n")
    f.chmod(0o644)
    monkeypatch.delenv("TOY_TOKEN", raising=False)
    monkeypatch.setenv("REBENCH_SECRETS_FILE", str(f))
    settings = Settings(root=settings.root, sessions_dir=settings.sessions_dir)  # variables are read when Settings is made
    with pytest.raises(RebenchError) as exc:
        workstation.resolve_secrets(env, "smoke", settings)
    assert "chmod 600" in exc.value.fix and "can be read by others" in exc.value.what
    f.chmod(0o600)
    assert workstation.resolve_secrets(env, "smoke", settings) == {"TOY_TOKEN": SECRET}


@pytest.mark.docker
def test_secrets_reach_services_only_and_no_record_keeps_them(env, docker_runtime, settings):
    s = Session.create(env, "smoke", docker_runtime, settings.sessions, secrets={"TOY_TOKEN": SECRET})
    try:
        s.start_capture(interval=3600)
        s.start_watching()
        answer = s.workspace / "solution" / "answer.txt"
        answer.write_text("service")
        rec = s.score()
        assert rec.message["service"] == "token-ok"  # the service was started with the secret
        answer.write_text("leak")
        leak = s.score()
        assert leak.score == 2.0 and "[redacted:TOY_TOKEN]" in leak.message["echo"]
        env_out = s.sandbox.exec(["env"]).stdout
        assert SECRET not in env_out and "TOY_TOKEN" not in env_out
        denied = s.sandbox.exec(["cat", "/protected/secrets.env"])
        assert denied.exit_code != 0 and "Permission denied" in denied.stderr
        mode = s.sandbox.exec(["stat", "-c", "%U:%G %a", "/protected/secrets.env"], user="root").stdout.strip()
        assert mode == "root:protected 640"
        # the participant echoes it in a shell (as if they had found it): the terminal copy is redacted too
        argv, _, _ = s.sandbox.shell_command()
        subprocess.run(["-i" if a == "-it" else a for a in argv], input=f"echo {SECRET}\nexit\n".encode(), capture_output=True, timeout=60)
        s.collect_commands()
        s.watcher.flush()
        s.submit("")
        s.close()
    finally:
        if s.lock.held:
            s.close()
        s.sandbox.stop(remove=True)
    hits = [path for path, data in every_file_bytes(s.folder) if SECRET.encode() in data and "/workspace/" not in path]
    assert hits == [], hits
    assert "TOY_TOKEN" in s.meta.metadata["secrets"]


def test_local_runtime_starts_services_with_secrets_and_keeps_no_copy(env, settings):
    s = Session.create(env, "smoke", LocalRuntime(), settings.sessions, secrets={"TOY_TOKEN": SECRET})
    try:
        (s.workspace / "solution" / "answer.txt").write_text("service")
        assert s.score().message["service"] == "token-ok"
    finally:
        s.close()
        s.sandbox.stop()
    assert [p for p, data in every_file_bytes(s.folder) if SECRET.encode() in data] == []
