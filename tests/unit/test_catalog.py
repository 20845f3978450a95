"""Manifest validation: every problem in every folder is reported at once, with file and field."""

import shutil
from pathlib import Path

from rebench_tui.catalog import load_catalog
from rebench_tui.errors import CatalogError, RebenchError
from tests.conftest import KNOWN_IMAGES, ROOT

import pytest


def test_every_shipped_environment_is_valid(catalog):
    assert catalog.problems == []
    assert {"triton_cumsum", "fix_embedding"} <= set(catalog.environments)


def test_shipped_environments_load(catalog):
    env = catalog.get("triton_cumsum")
    m = env.manifest
    assert m.task_id == "ai_rd_triton_cumsum/main"
    assert set(env.profile_names) == {"gpu", "smoke"}
    smoke = env.profile("smoke")
    assert smoke.gpus == 0 and smoke.env["TRITON_INTERPRET"] == "1"
    gpu = env.profile("gpu")
    assert gpu.gpus == 1 and gpu.memory == 100 * 2**30
    assert gpu.score_timeout == m.score.timeout


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_every_problem_reported_at_once(tmp_path):
    src = ROOT / "environments" / "triton_cumsum"
    root = tmp_path / "envs"
    shutil.copytree(src, root / "broken_one")
    manifest = (root / "broken_one" / "environment.toml").read_text()
    manifest = manifest.replace('direction = "lower"', 'direction = "down"')
    manifest = manifest.replace('aggregation = "min"', 'aggregation = "best"\ncolour = "red"')
    manifest = manifest.replace('base_image = "torch-cpu"', 'base_image = "nope"')
    _write(root, "broken_one/environment.toml", manifest)
    (root / "broken_one" / "instructions.md").write_text("   \n")
    (root / "broken_one" / "Dockerfile").write_text("FROM debian\n")
    shutil.rmtree(root / "broken_one" / "solution")
    # a second broken folder: TOML syntax error, no protected/
    _write(root, "other/environment.toml", "id = [unclosed\n")
    cat = load_catalog(root, KNOWN_IMAGES)
    text = [str(p) for p in cat.problems]
    joined = "\n".join(text)
    assert "score.direction" in joined
    assert "score.aggregation" in joined
    assert "score.colour: unknown field" in joined
    assert "id: 'triton_cumsum' does not match the folder name 'broken_one'" in joined
    assert "instructions are empty" in joined
    assert "ARG BASE_IMAGE" in joined
    assert "missing solution/ folder" in joined
    assert "other/environment.toml: not valid TOML" in joined
    assert "other/protected: missing protected/ folder" in joined
    assert not cat.environments
    with pytest.raises(CatalogError) as exc:
        cat.get("broken_one")
    assert "score.direction" in str(exc.value)


def test_unknown_base_image_and_scorer(tmp_path, env_copy):
    def edit(d: Path):
        t = (d / "environment.toml").read_text().replace('base_image = "torch-cpu"', 'base_image = "nope"')
        (d / "environment.toml").write_text(t.replace('scorer = "score.py"', 'scorer = "missing.py"'))

    root = env_copy(ROOT / "environments" / "triton_cumsum", edit)
    joined = "\n".join(map(str, load_catalog(root, KNOWN_IMAGES).problems))
    assert "profiles.smoke.base_image: unknown base image 'nope'" in joined
    assert "score.scorer: 'missing.py' is not a file in protected/" in joined


def test_equal_start_and_reference_rejected(env_copy):
    def edit(d: Path):
        t = (d / "environment.toml").read_text().replace("reference_score = -1.0995", "reference_score = -0.3037")
        (d / "environment.toml").write_text(t)

    root = env_copy(ROOT / "environments" / "triton_cumsum", edit)
    joined = "\n".join(map(str, load_catalog(root, KNOWN_IMAGES).problems))
    assert "profiles.smoke" in joined and "must differ" in joined


def test_bad_sizes_durations_and_profiles(env_copy):
    def edit(d: Path):
        t = (d / "environment.toml").read_text()
        t = t.replace('memory = "100g"', 'memory = "lots"').replace('limit = "8h"', 'limit = "forever"')
        t += '\n[profiles.turbo]\nbase_image = "base"\nstart_score = 1\nreference_score = 2\n'
        (d / "environment.toml").write_text(t)

    root = env_copy(ROOT / "environments" / "triton_cumsum", edit)
    joined = "\n".join(map(str, load_catalog(root, KNOWN_IMAGES).problems))
    assert "resources.memory" in joined and "not a size" in joined
    assert "time.limit" in joined and "not a duration" in joined
    assert "profiles.turbo.[key]: Input should be 'gpu' or 'smoke'" in joined


def test_unknown_environment_names_the_known_ones(catalog):
    with pytest.raises(RebenchError) as exc:
        catalog.get("fix_embeding")
    assert "triton_cumsum" in exc.value.fix


def test_missing_environments_folder(tmp_path):
    cat = load_catalog(tmp_path / "nowhere")
    assert "environments folder not found" in str(cat.problems[0])


# -- anchors: the published table and each profile's calibration table -----------------------------
def test_published_figures_live_in_one_file_the_catalog_reads(catalog):
    pub = catalog.published
    assert pub is not None and pub.path == ROOT / "environments" / "published.toml"
    assert sorted(pub.envs) == sorted(catalog.environments)
    assert (pub.get("triton_cumsum").start, pub.get("triton_cumsum").reference) == (1.56, 0.47)
    assert pub.source["by"] == "METR" and "H100" in pub.source["hardware"]
    for env in catalog.environments.values():
        gpu = env.profile("gpu")
        assert env.published is pub.get(env.id)
        if gpu.anchors == "published":
            assert (gpu.start_score, gpu.reference_score) == (pub.get(env.id).start, pub.get(env.id).reference), env.id
    # this project's own H200 figures are labelled as such, not as METR's
    assert catalog.get("triton_cumsum").profile("gpu").anchors == "measured"


def _with_published(root: Path) -> Path:
    shutil.copy(ROOT / "environments" / "published.toml", root / "published.toml")
    return root


def test_a_profile_that_says_published_must_carry_the_published_figures(env_copy):
    def edit(d: Path):
        t = (d / "environment.toml").read_text().replace("start_score = 2.2\n", "start_score = 2.1\n")
        (d / "environment.toml").write_text(t)

    root = _with_published(env_copy(ROOT / "environments" / "fix_embedding", edit))
    joined = "\n".join(map(str, load_catalog(root, KNOWN_IMAGES).problems))
    assert "profiles.gpu.anchors: says 'published', but start/reference 2.1/0.26 are not METR's 2.2/0.26" in joined
    (root / "published.toml").unlink()  # no published table beside it at all
    assert "has no figures for 'fix_embedding'" in "\n".join(map(str, load_catalog(root, KNOWN_IMAGES).problems))


def test_a_broken_published_table_is_reported(tmp_path):
    shutil.copytree(ROOT / "tests" / "fixtures" / "environments" / "toy_score", tmp_path / "toy_score")
    (tmp_path / "published.toml").write_text('[environments.toy]\nfamily = "x"\nstart = "high"\n')
    joined = "\n".join(map(str, load_catalog(tmp_path, KNOWN_IMAGES).problems))
    assert "published.toml: environments.toy: missing or mistyped" in joined and "start" in joined


def test_calibration_tables_are_checked(tmp_path):
    def copy(name: str, *subs: tuple[str, str]) -> str:
        root = tmp_path / name
        shutil.copytree(ROOT / "environments" / "triton_cumsum", root / "triton_cumsum")
        t = (root / "triton_cumsum" / "environment.toml").read_text()
        for a, b in subs:
            assert a in t, a
            t = t.replace(a, b)
        (root / "triton_cumsum" / "environment.toml").write_text(t)
        return "\n".join(map(str, load_catalog(root, KNOWN_IMAGES).problems))

    assert ("profiles.smoke.calibration.reference.files.solution/solution.py: '../../etc/passwd' points outside"
            in copy("a", ('"reference/smoke_solution.py"', '"../../etc/passwd"')))
    assert "'reference/gone.py' is not in the environment folder" in copy("b", ('"reference/smoke_solution.py"', '"reference/gone.py"'))
    assert "profiles.gpu.calibration: Value error, give calibration.reference" in copy(
        "c", ('reference = { files = { "solution/solution.py" = "reference/solution.py" } }  # the Triton kernel',
              'tolerance = { start = 1, reference = 1 }'))
    assert "must be a path inside the participant's home" in copy(
        "d", ('{ "solution/solution.py" = "reference/smoke_solution.py" }', '{ "/etc/cron.d/x" = "reference/smoke_solution.py" }'))
    assert "must be a path inside the participant's home" in copy(
        "e", ('{ "solution/solution.py" = "reference/smoke_solution.py" }',
              '{ "solution/solution.py" = "reference/smoke_solution.py" }, command = ["true"], workdir = "../.."'))
