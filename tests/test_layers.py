"""The layer contract: import-linter keeps it, docs/architecture.md states it, and a planted upward import breaks it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="import-linter is not installed (pip install '.[test]')")
tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]


def _lint(root: Path) -> subprocess.CompletedProcess:
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")
    return subprocess.run([sys.executable, "-c", code], cwd=root, env={"PYTHONPATH": str(root), "PATH": ""},
                          capture_output=True, text=True, timeout=120)


def test_every_layer_imports_only_the_layers_below_it() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "meshcomm", tmp_path / "meshcomm", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    handle = tmp_path / "meshcomm" / "transport" / "handle.py"
    handle.write_text(handle.read_text() + "\nimport meshcomm.group.group  # planted: transport reaching up\n")
    done = _lint(tmp_path)
    assert done.returncode != 0
    assert "meshcomm.transport is not allowed to import meshcomm.group" in done.stdout


def test_every_folder_and_module_of_the_package_has_a_layer() -> None:
    placed = {name.strip() for layer in CONTRACT["layers"] for name in layer.split("|")}
    package = ROOT / "meshcomm"
    present = {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    present |= {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    assert present == placed


def test_docs_architecture_lists_the_contract_s_layers_in_order() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("<!-- layers:", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    documented = [re.sub(r"\s+", " ", row.split("`")[1].replace("\\|", "|")) for row in rows]
    assert documented == [re.sub(r"\s+", " ", layer) for layer in CONTRACT["layers"]]
