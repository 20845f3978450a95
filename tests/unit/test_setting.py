"""The paper's setting beside each profile's: manifests must answer for every setting, sessions
record where they differ, `list -v` shows it, and compare flags or leaves out such runs."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rebench_tui.catalog.catalog import load_catalog
from rebench_tui.cli import main
from rebench_tui.trajectory.audit import read_entries
from tests.conftest import FIXTURE_ENVS, KNOWN_IMAGES

PAPER = '''
[paper]
source = "a made-up paper, appendix Z"

[paper.settings.judge]
paper = "judge-model-7 at temperature 0"
source = "appendix Z.1"

[paper.settings.problems]
paper = "the 165 test problems"
source = "appendix Z.2"
'''


def with_paper(smoke_setting: str):
    def edit(dest):
        toml = dest / "environment.toml"
        text = toml.read_text()
        # [paper] goes at the top level, before the first profile table
        head, tail = text.split("[profiles.smoke]", 1)
        toml.write_text(head + PAPER + "\n[profiles.smoke]" + tail.replace(
            "[profiles.smoke.calibration]", smoke_setting + "\n[profiles.smoke.calibration]"))
    return edit


DIFFERS = '''setting = { judge = { here = "a rule-based stand-in", why = "no judge API here" }, problems = { here = "same" } }'''


def test_every_shipped_environment_sets_the_papers_setting_beside_its_gpu_profile(catalog):
    assert not catalog.problems, catalog.problems
    for env in catalog.environments.values():
        paper = env.manifest.paper
        assert paper is not None, f"{env.id} states no paper setting"
        gpu = env.profile("gpu")
        assert [r.name for r in gpu.setting] == list(paper.settings), env.id
        for r in gpu.setting:
            assert r.paper.strip() and (r.same or r.why.strip()), (env.id, r)


@pytest.mark.parametrize("setting,problem", [
    ('setting = { judge = { here = "another judge" } }', "say why"),
    ('setting = { judje = { here = "same" } }', "does not have: judje"),
    # a smoke profile may stay silent (all stand-in), but half an answer would leave the rest "not stated"
    ('setting = { judge = { here = "same" } }', "'smoke' does not say how it stands on the paper's setting(s) problems"),
])
def test_a_setting_table_that_does_not_answer_is_a_catalog_problem(env_copy, setting, problem):
    root = env_copy(FIXTURE_ENVS / "toy_score", with_paper(setting))
    cat = load_catalog(root, KNOWN_IMAGES)
    assert any(problem in str(p) for p in cat.problems), cat.problems


def test_a_gpu_profile_must_answer_for_every_setting(env_copy):
    def edit(dest):
        with_paper("")(dest)
        toml = dest / "environment.toml"
        toml.write_text(toml.read_text() + '\n[profiles.gpu]\nbase_image = "base"\nstart_score = 10.0\nreference_score = 2.0\n'
                        'setting = { judge = { here = "same" } }\n')
    cat = load_catalog(env_copy(FIXTURE_ENVS / "toy_score", edit), KNOWN_IMAGES)
    assert any("'gpu' does not say how it stands on the paper's setting(s) problems" in str(p) for p in cat.problems), cat.problems


def test_a_smoke_profile_that_says_nothing_is_a_stand_in_throughout(env_copy):
    cat = load_catalog(env_copy(FIXTURE_ENVS / "toy_score", with_paper("")), KNOWN_IMAGES)
    assert not cat.problems, cat.problems
    rows = cat.get("toy_score").profile("smoke").setting
    assert [r.name for r in rows] == ["judge", "problems"] and not any(r.same for r in rows)


def test_sessions_record_the_differences_and_list_v_shows_them(env_copy, toy_session, monkeypatch, tmp_path):
    root = env_copy(FIXTURE_ENVS / "toy_score", with_paper(DIFFERS))
    s = toy_session(root)
    assert s.meta.setting == {"paper": "a made-up paper, appendix Z", "same": ["problems"],
                              "differs": [{"name": "judge", "paper": "judge-model-7 at temperature 0",
                                           "here": "a rule-based stand-in", "why": "no judge API here"}]}
    on_disk = json.loads((s.folder / "session.json").read_text())["setting"]
    assert on_disk == s.meta.setting
    started = read_entries(s.folder / "audit.jsonl")[0]["content"]["content"]
    assert "differs from the paper's setting in 1: judge" in started[0] and started[1]["setting"] == s.meta.setting

    monkeypatch.setenv("REBENCH_ENVIRONMENTS_DIR", str(root))
    monkeypatch.setenv("COLUMNS", "250")
    r = CliRunner().invoke(main, ["list", "-v"])
    assert r.exit_code == 0, r.output
    assert "smoke: 10 → 2 (0), measured, 1 setting(s) differ" in r.output
    assert "the paper's setting (a made-up paper, appendix Z) beside this project's" in r.output
    assert "judge-model-7 at temperature 0" in r.output and "differs: a rule-based stand-in — no judge API here" in r.output


def test_compare_flags_runs_out_of_the_papers_setting_and_can_leave_them_out(env_copy, toy_session, monkeypatch, fake_clock):
    root = env_copy(FIXTURE_ENVS / "toy_score", with_paper(DIFFERS))
    s = toy_session(root)
    fake_clock.advance(60)
    s.score()
    s.submit("done")
    s.close()
    monkeypatch.setenv("REBENCH_ENVIRONMENTS_DIR", str(root))
    sessions = str(s.folder.parent)
    r = CliRunner().invoke(main, ["compare", s.id, "--sessions-dir", sessions, "--bootstrap", "0"])
    assert r.exit_code == 0, r.output
    assert f"{s.id}: not in the paper's setting: differs in judge" in " ".join(r.output.split())
    r = CliRunner().invoke(main, ["compare", s.id, "--sessions-dir", sessions, "--paper-setting-only"])
    assert r.exit_code != 0
    assert "no runs to compare after --env/--finished-only/--paper-setting-only" in r.output
    assert "left out 1 run(s) not made in the paper's setting" in " ".join(r.output.split())


def test_verify_finds_a_setting_edited_to_look_like_the_papers(env_copy, toy_session):
    """session.json's setting is what compare reads; the chained start row holds the original, so
    rewriting a run as 'in the paper's setting' after the fact is found."""
    from rebench_tui.trajectory.verify import verify

    s = toy_session(env_copy(FIXTURE_ENVS / "toy_score", with_paper(DIFFERS)))
    s.close()
    report = verify(s.folder)
    assert report.ok and any(f.check == "paper setting" and "1 difference(s)" in f.detail for f in report.findings)
    meta = json.loads((s.folder / "session.json").read_text())
    meta["setting"]["same"], meta["setting"]["differs"] = ["problems", "judge"], []
    (s.folder / "session.json").write_text(json.dumps(meta))
    bad = [f for f in verify(s.folder).findings if not f.ok]
    assert [f.check for f in bad] == ["paper setting"] and "edited after the start" in bad[0].detail


def _paper_row_edit(row: str, figures: str = ""):
    """The toy environment with a one-row [paper] table (and optional figures), the smoke profile silent."""
    def edit(dest):
        toml = dest / "environment.toml"
        head, tail = toml.read_text().split("[profiles.smoke]", 1)
        toml.write_text(head + f'[paper]\nsource = "a made-up paper"\n{figures}\n[paper.settings.judge]\n{row}\n'
                        + "\n[profiles.smoke]" + tail)
    return edit


@pytest.mark.parametrize("row,problem", [
    ('paper = "judge-model-7"', "paper.settings.judge.source"),  # no source at all
    ('paper = "judge-model-7"\nsource = "a blog post"', "names no section of the paper"),  # not a citation
    ('paper = "judge-model-7"\nsource = "a blog post"\nbasis = "rumour"', "paper.settings.judge.basis"),
])
def test_a_paper_row_without_a_source_it_can_be_traced_to_is_a_catalog_problem(env_copy, row, problem):
    cat = load_catalog(env_copy(FIXTURE_ENVS / "toy_score", _paper_row_edit(row)), KNOWN_IMAGES)
    assert any(problem in str(p) for p in cat.problems), cat.problems


@pytest.mark.parametrize("row,cited", [
    ('paper = "judge-model-7"\nsource = "appendix Z.1"', "(appendix Z.1)"),
    ('paper = "judge-model-7"\nsource = "a blog post"\nbasis = "secondary"', "(secondary: a blog post)"),
    ('paper = "unknown"\nsource = "looked for in appendix Z"\nbasis = "not found"', "(not found: looked for in appendix Z)"),
])
def test_list_v_says_where_each_paper_value_comes_from(env_copy, monkeypatch, row, cited):
    root = env_copy(FIXTURE_ENVS / "toy_score", _paper_row_edit(row))
    monkeypatch.setenv("REBENCH_ENVIRONMENTS_DIR", str(root))
    monkeypatch.setenv("COLUMNS", "250")
    r = CliRunner().invoke(main, ["list", "-v"])
    assert r.exit_code == 0, r.output
    assert cited in r.output


FIGURES = '''
[paper.start_spread]
sd = 0.02
source = "Table 4"

[paper.run_and_score]
time = "{time}"
covers = "one scoring, which the scorer runs itself"
scorer_runs_it = true
source = "Table 3"
'''


def test_a_scorer_timeout_without_headroom_over_the_papers_scoring_time_is_a_catalog_problem(env_copy, monkeypatch):
    row = 'paper = "judge-model-7"\nsource = "appendix Z.1"'
    gpu = '\n[profiles.gpu]\nbase_image = "base"\nstart_score = 10.0\nreference_score = 2.0\nsetting = { judge = { here = "same" } }\n'

    def edit(time, timeout):
        def apply(dest):
            _paper_row_edit(row, FIGURES.format(time=time))(dest)
            toml = dest / "environment.toml"
            toml.write_text(toml.read_text() + gpu + f'score_timeout = "{timeout}"\n')
        return apply

    root = env_copy(FIXTURE_ENVS / "toy_score", edit("40s", "60s"))
    cat = load_catalog(root, KNOWN_IMAGES)
    assert any("the scorer's timeout 60 s is under 2 x the paper's 40 s" in str(p) for p in cat.problems), cat.problems
    toml = root / "toy_score" / "environment.toml"
    toml.write_text(toml.read_text().replace('score_timeout = "60s"', 'score_timeout = "80s"'))
    cat = load_catalog(root, KNOWN_IMAGES)
    assert not cat.problems, cat.problems
    monkeypatch.setenv("REBENCH_ENVIRONMENTS_DIR", str(root))
    monkeypatch.setenv("COLUMNS", "250")
    out = " ".join(CliRunner().invoke(main, ["list", "-v"]).output.split())
    assert "toy_score: start-score spread: sd 0.02 (Table 4)" in out
    assert "toy_score: one run and scoring: 40 s (Table 3) — one scoring, which the scorer runs itself" in out


def test_every_shipped_paper_row_names_its_source_and_the_papers_figures_are_given(catalog):
    from rebench_tui.catalog.paper_figures import HEADROOM
    from rebench_tui.catalog.setting import CITATION

    for env in catalog.environments.values():
        paper = env.manifest.paper
        for name, row in paper.settings.items():
            assert row.source.strip(), (env.id, name)
            assert row.basis != "paper" or CITATION.search(row.source), (env.id, name, row.source)
        assert paper.start_spread is not None and "Table 4" in paper.start_spread.source, env.id
        run = paper.run_and_score
        assert run is not None and "Table 3" in run.source, env.id
        if run.scorer_runs_it:
            assert env.profile("gpu").score_timeout >= HEADROOM * run.time, env.id


def test_the_gpu_defaults_are_the_values_the_manifests_say_they_follow(catalog):
    """Where a gpu profile answers "same" to a size the paper (or a secondary source) gives, the code's
    default is that size: the scorer's, prepare's and the resources' own figures, read from their files."""
    import re

    envs = catalog.root
    gpu = re.search(r'"gpu": \{"batches": (\d+), "batch_size": (\d+)', (envs / "restricted_mlm" / "protected" / "score.py").read_text())
    assert gpu and (int(gpu.group(1)), int(gpu.group(2))) == (2000, 8)
    assert "2000 batches of 8" in catalog.get("restricted_mlm").manifest.paper.settings["evaluation_size"].paper

    held = re.search(r'CHATRL_HELDOUT", "(\d+)"', (envs / "nanogpt_chat_rl" / "prepare.py").read_text())
    assert held and int(held.group(1)) == 512
    assert catalog.get("nanogpt_chat_rl").manifest.paper.settings["held_out"].paper.startswith("512 ")

    rust = catalog.get("rust_codecontests")
    assert rust.profile("gpu").memory >= 100 * 10**9 and "100 GB" in rust.manifest.paper.settings["hardware"].paper


def test_the_readme_noise_table_quotes_every_manifests_paper_figures(catalog):
    """The README's noise section says, per environment, what the manifest's [paper.start_spread] and
    [paper.run_and_score] hold, and the gpu scorer's timeout: a manifest changed alone fails here."""
    from rebench_tui.catalog.paper_figures import duration_words
    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    section = readme.split("**How noisy each environment is, by the paper.**", 1)[1].split("\n\n**", 1)[0]
    rows = {cells[0].strip("` "): [c.strip() for c in cells[1:]]
            for line in section.splitlines() if line.startswith("| `")
            for cells in [line.strip("|").split("|")]}
    assert sorted(rows) == sorted(catalog.environments)
    for env in catalog.environments.values():
        sd, share, run, timeout, _ = rows[env.id]
        paper, published = env.manifest.paper, env.published
        assert sd.split()[0] == f"{paper.start_spread.sd:g}", env.id
        gap = abs(published.reference - published.start)
        assert float(share.split()[0].rstrip(",")) == pytest.approx(paper.start_spread.sd / gap, abs=0.0015), env.id
        t = paper.run_and_score.time
        assert run.startswith("none given" if t is None else duration_words(t)), (env.id, run)
        assert timeout == f"{env.profile('gpu').score_timeout:g} s", env.id
