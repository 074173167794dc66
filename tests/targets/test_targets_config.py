"""targets.toml: the default (the reference store alone), the format, and one clear line and exit 3
for bad configuration, naming the key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from cli.main import app
from erasure.config import PROJECT_ROOT, Home
from erasure.errors import ConfigError
from erasure.targets import load_targets


def _cli(home: Home, *args: str) -> Result:
    return CliRunner().invoke(app, ["targets", *args, "--home", str(home.root)])


def test_without_a_file_the_one_target_is_the_reference_store(home: Home) -> None:
    found = load_targets(home.root, home.store_dir)
    assert [(t.name, t.kind) for t in found.targets] == [("reference", "reference")]
    assert found.targets[0].path("path") == home.store_dir
    res = _cli(home, "list", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["targets"][0]["kind"] == "reference" and len(doc["targets"][0]["tiers"]) == 9


def test_relative_paths_are_read_from_the_files_folder(home: Home, tmp_path: Path) -> None:
    conf = tmp_path / "conf" / "targets.toml"
    conf.parent.mkdir()
    conf.write_text(
        'tenant = "acme"\n[[targets]]\nname = "kb"\nkind = "chroma"\npath = "chroma"\n'
        'subject_key = "user_id"\n[[targets]]\nname = "ref"\nkind = "reference"\n'
    )
    found = load_targets(home.root, home.store_dir, conf)
    assert found.tenant == "acme"
    assert found.by_name("kb").path("path") == conf.parent / "chroma"
    assert found.by_name("kb").text("subject_key") == "user_id"
    assert found.reference() is not None and found.reference().path("path") == home.store_dir  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('[[targets]]\nname = "a"\n', "targets[0].kind"),
        ('[[targets]]\nname = "../x"\nkind = "chroma"\n', "targets[0].name"),
        ('[[targets]]\nname = "a"\nkind = "chroma"\n[[targets]]\nname = "a"\nkind = "mem0"\n', "two targets are named"),
        ('tenant = 5\n[[targets]]\nname = "a"\nkind = "chroma"\n', "'tenant'"),
        ("targets = 1\n", "'targets'"),
        ('colour = "red"\n[[targets]]\nname = "a"\nkind = "chroma"\n', "unknown key 'colour'"),
        ("[[targets\n", "not valid TOML"),
    ],
)
def test_bad_configuration_names_the_key(home: Home, tmp_path: Path, body: str, says: str) -> None:
    conf = tmp_path / "targets.toml"
    conf.write_text(body)
    with pytest.raises(ConfigError) as err:
        load_targets(home.root, home.store_dir, conf)
    assert says in str(err.value)


def test_the_cli_says_one_line_and_exits_3(home: Home, tmp_path: Path) -> None:
    (home.root / "targets.toml").write_text('[[targets]]\nname = "kb"\nkind = "no-such-kind"\n')
    res = _cli(home, "list")
    assert res.exit_code == 0  # listed, with the reason it cannot be used
    assert "unknown kind" in res.output
    (home.root / "targets.toml").write_text('[[targets]]\nname = "kb"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "targets", "list", "--home", str(home.root)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "targets[0].kind" in proc.stderr


def test_the_zero_device_as_targets_file_is_refused_at_once(home: Home) -> None:
    with pytest.raises(ConfigError) as err:
        load_targets(home.root, home.store_dir, Path("/dev/zero"))
    assert "larger than" in str(err.value)
