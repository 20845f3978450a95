"""Every refusal of the collector, over real HTTP(S) on loopback: tokens, ownership, roles,
request bounds, rewriting what was witnessed, TLS, and the append-only tables."""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import json
import socket
import sqlite3

import pytest

from rebench_tui.study.client import Collector, CollectorRefused, CollectorUnreachable
from rebench_tui.study.ledger import Ledger
from rebench_tui.study.server import CollectorServer, tls_context
from rebench_tui.trajectory.audit import chain_line, genesis_hash
from tests.study_collector import Study

RUN = 4242
INFO = {"run_id": RUN, "env_id": "toy_score"}


@pytest.fixture
def study(tmp_path):
    s = Study(tmp_path / "study.db")
    yield s
    s.close()


def lines(n, start_hash=None, run_id=RUN, score=None):
    """``n`` chained audit lines as the workstation writes them (without the newline)."""
    prev, out = start_hash or genesis_hash(run_id), []
    for i in range(n):
        content = {"type": "log", "content": [f"row {i}"]} if score is None else {
            "type": "intermediateScore", "score": score, "message": {}, "details": {}}
        row = {"runId": run_id, "index": i + 1, "agentBranchNumber": 0, "calledAt": 1000 + i, "modifiedAt": 1000 + i,
               "usageTotalSeconds": i, "content": content, "workingMs": i * 1000}
        line, prev = chain_line(row, prev)
        out.append(line.rstrip("\n"))
    return out


def refused(fn) -> int:
    with pytest.raises(CollectorRefused) as exc:
        fn()
    return exc.value.status


def refusals(study):
    return [(r["participant"], r["status"]) for r in study.ledger.db.query("SELECT * FROM refusals")]


def test_a_request_without_a_token_or_with_an_unknown_one_is_refused(study):
    assert refused(lambda: Collector(study.url, "").head("s1")) == 401
    assert refused(lambda: Collector(study.url, "not-a-token").send("s1", 0, lines(1), INFO)) == 401
    assert study.ledger.sessions() == []
    assert refusals(study) == [(None, 401), (None, 401)]


def test_a_participant_writes_and_reads_only_its_own_sessions(study):
    ada, bob = study.client("ada"), study.client("bob")
    assert ada.send("s1", 0, lines(2), INFO)["count"] == 2
    more = lines(3)
    assert refused(lambda: bob.send("s1", 2, more[2:], INFO)) == 403
    # Another's session reads as one that does not exist: same status, same words but the id.
    for path in ("rows", "head"):
        real = answer(study, bob, f"/v1/sessions/s1/{path}")
        made_up = answer(study, bob, f"/v1/sessions/s9/{path}")
        assert real[0] == made_up[0] == 404
        assert real[1].replace("s1", "s9") == made_up[1]
    assert bob.head("s1") == {"count": 0, "head": None}
    assert len(study.client("res").rows("s1")) == 2  # a researcher reads every session
    assert refused(lambda: study.client("res").send("s2", 0, lines(1), INFO)) == 403  # and writes none
    assert [s["id"] for s in study.ledger.sessions()] == ["s1"]
    assert refusals(study) == [("bob", 403)] + [("bob", 404)] * 5 + [("res", 403)]


def answer(study, client, path):
    """(status, error words) of a GET, without the client's own handling of a 404."""
    try:
        client.request("GET", path)
    except CollectorRefused as exc:
        return exc.status, exc.what
    return 200, ""


def test_only_a_researcher_lists_the_study(study):
    study.client("ada").send("s1", 0, lines(1), INFO)
    assert refused(lambda: study.client("ada").study()) == 403
    assert [s["id"] for s in study.client("res").study()] == ["s1"]


def test_witnessed_rows_cannot_be_rewritten_nor_the_chain_broken(study):
    ada = study.client("ada")
    ada.send("s1", 0, lines(3), INFO)
    other = lines(3, score=1.5)  # a consistent chain, but not the one witnessed
    assert refused(lambda: ada.send("s1", 0, other, INFO)) == 409
    assert refused(lambda: ada.send("s1", 3, lines(1), INFO)) == 409  # does not chain onto row 2
    assert refused(lambda: ada.send("s1", 5, lines(1), INFO)) == 409  # rows 3 and 4 skipped
    edited = lines(4)[3].replace('"row 3"', '"row 9"')  # bytes that no longer match their hash
    assert refused(lambda: ada.send("s1", 3, [edited], INFO)) == 409
    assert ada.send("s1", 0, lines(4), INFO)["count"] == 4  # resending what was witnessed is harmless
    assert [r["hash"] for r in ada.rows("s1")] == [json.loads(x)["hash"] for x in lines(4)]


def test_a_refused_request_keeps_none_of_its_rows(study):
    ada = study.client("ada")
    good = lines(3)
    bad = good[:2] + [good[2].replace('"row 2"', '"row X"')]
    assert refused(lambda: ada.send("s1", 0, bad, INFO)) == 409
    assert study.ledger.sessions() == [] and ada.head("s1")["count"] == 0


def test_request_bodies_are_bounded(tmp_path):
    ledger = Ledger(tmp_path / "small.db")
    token = ledger.add("ada")
    server = CollectorServer(ledger, ("127.0.0.1", 0), max_body=2048)
    server.start()
    try:
        c = Collector(f"http://127.0.0.1:{server.server_address[1]}", token)
        assert refused(lambda: c.send("s1", 0, lines(20), INFO)) == 413
        assert _raw(server, b"POST /v1/sessions/s1/rows HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token.encode()
                    + b"\r\nTransfer-Encoding: chunked\r\n\r\n") == 411
        assert _raw(server, b"POST /v1/sessions/s1/rows HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token.encode()
                    + b"\r\nContent-Length: 5\r\n\r\n{nope") == 400
        assert ledger.sessions() == []
    finally:
        server.stop()
        ledger.close()


def _raw(server, request: bytes) -> int:
    with socket.create_connection(server.server_address[:2], timeout=5) as sock:
        sock.sendall(request)
        resp = http.client.HTTPResponse(sock)
        resp.begin()
        return resp.status


def test_the_witnessed_tables_are_append_only(study):
    study.client("ada").send("s1", 0, lines(2), INFO)
    refused(lambda: study.client("bob").rows("s1"))  # a refusal row too
    conn = sqlite3.connect(study.db)
    for sql in ("UPDATE audit_rows SET hash = 'x'", "DELETE FROM audit_rows", "DELETE FROM refusals"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(sql)
    conn.close()


def test_tls_with_the_researchers_certificate(tmp_path):
    cert, key = _self_signed(tmp_path)
    ledger = Ledger(tmp_path / "tls.db")
    token = ledger.add("ada")
    server = CollectorServer(ledger, ("127.0.0.1", 0), tls=tls_context(cert, key))
    server.start()
    port = server.server_address[1]
    try:
        assert server.url.startswith("https://")
        trusted = Collector(f"https://127.0.0.1:{port}", token, ca=cert)
        assert trusted.whoami() == {"participant": "ada", "role": "participant"}
        with pytest.raises(CollectorUnreachable, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            Collector(f"https://127.0.0.1:{port}", token).whoami()  # a certificate nobody said to trust
        with pytest.raises(CollectorUnreachable):
            Collector(f"http://127.0.0.1:{port}", token, timeout=2).whoami()  # plain HTTP is not answered
        assert trusted.send("s1", 0, lines(2), INFO)["count"] == 2  # and the server still serves
    finally:
        server.stop()
        ledger.close()


def _self_signed(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "collector")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_a_long_sessions_rows_come_in_pages(study):
    study.server.rows_per_answer = 3
    ada = study.client("ada")
    ada.send("s1", 0, lines(8), INFO)
    assert len(ada.request("GET", "/v1/sessions/s1/rows?from=0")["rows"]) == 3  # one answer is one page
    got = ada.rows("s1")
    assert [r["n"] for r in got] == list(range(8))
    assert [r["n"] for r in ada.rows("s1", 5)] == [5, 6, 7]
