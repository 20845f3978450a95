import math

from rebench_tui.store import Store


def test_upsert_list_scores_and_rebuild(tmp_path):
    st = Store(tmp_path)
    st.upsert_session({"id": "a", "env_id": "e1", "status": "active", "created_at": 1, "final_score": math.nan})
    st.upsert_session({"id": "b", "env_id": "e2", "status": "finished", "created_at": 2, "final_score": 0.5})
    st.add_score("a", 1, 1000, 10.0, math.nan, math.nan, {"timeout": True})
    st.add_score("a", 2, 2000, 20.0, 1.5, 0.5, {"time": 1})
    assert [r["id"] for r in st.sessions()] == ["b", "a"]
    assert [r["id"] for r in st.sessions(env_id="e1")] == ["a"]
    assert [r["id"] for r in st.sessions(status="finished")] == ["b"]
    assert st.get("a")["final_score"] is None
    scores = st.scores("a")
    assert [(s["attempt"], s["valid"], s["score"]) for s in scores] == [(1, 0, None), (2, 1, 1.5)]
    n = st.rebuild([({"id": "c", "env_id": "e3", "status": "active", "created_at": 3}, [])])
    assert n == 1 and [r["id"] for r in st.sessions()] == ["c"]
    st.close()
    assert Store(tmp_path).get("c")["env_id"] == "e3"  # persisted in a real SQLite file


def test_scores_keep_their_attempt_fingerprint_and_an_older_index_gains_the_column(tmp_path):
    import sqlite3

    old = sqlite3.connect(tmp_path / "index.db")  # an index written before attempts were grouped
    old.execute("create table sessions (id text primary key, env_id text, status text, created_at integer)")
    old.execute("create table scores (session_id text, attempt integer, called_at integer, working_s float, "
                "score float, normalized float, valid integer, message text, primary key (session_id, attempt))")
    old.execute("insert into scores values ('a', 1, 1, 1.0, 2.0, 0.5, 1, '{}')")
    old.commit()
    old.close()
    st = Store(tmp_path)
    assert st.moved_aside is None
    st.add_score("a", 2, 2000, 20.0, 1.5, 0.5, {}, fingerprint="f" * 64)
    assert [(s["attempt"], s["fingerprint"]) for s in st.scores("a")] == [(1, None), (2, "f" * 64)]
