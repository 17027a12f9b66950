"""The check that keeps the suite runnable from a fresh clone: it must notice a read outside its bounds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .helpers import ROOT
from .isolation import Isolation


def test_a_read_outside_the_bounds_is_recorded(isolation: Isolation) -> None:
    probe = Path("/docvec-isolation-probe/MANIFEST.tsv")  # outside every allowed place, and missing
    assert not isolation.allows(str(probe))
    with pytest.raises(FileNotFoundError):
        probe.read_text()  # the audit event fires before the open fails
    with pytest.raises(FileNotFoundError):
        os.listdir(probe.parent)
    assert isolation.violations.pop(str(probe)) == isolation.current
    assert isolation.violations.pop(str(probe.parent)) == isolation.current


def test_the_repository_and_temporary_folders_are_within_bounds(isolation: Isolation, tmp_path: Path) -> None:
    assert isolation.allows(str(ROOT / "README.md")) and isolation.allows(str(tmp_path))
    assert not isolation.allows(str(Path.home() / ".ssh"))
