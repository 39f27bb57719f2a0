"""The versions the parity suite was measured with are the ones installed, and pyproject.toml's ranges admit them.

A failure here is not a bug: it says a dependency changed under the parity claims of COMPATIBILITY.md.
Bump consciously: run the parity tests (tests/runtime, tests/syntax, tests/analysis) on the new version
(for transformers, `tools/parity-against VERSION` does it and prints what differs),
update COMPATIBILITY.md, then the version below (and pyproject.toml's range if needed).
"""

from __future__ import annotations

import importlib.metadata

import pytest
from packaging.requirements import Requirement

from tests.conftest import REPO

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

# distribution -> the version every parity number in COMPATIBILITY.md was measured with
MEASURED = {
    "jinja2": "3.1.6",
    "lark": "1.3.1",
    "markupsafe": "3.0.4",
    "minijinja": "3.1.0",
    "transformers": "5.25.0",
}
# chatjinja reads these packages' private code, so their range must have an upper bound
BOUNDED = ("jinja2", "lark")


def _requirements() -> dict[str, Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [*project["dependencies"], *(line for extra in project["optional-dependencies"].values() for line in extra)]
    found: dict[str, Requirement] = {}
    for line in lines:
        requirement = Requirement(line)
        if requirement.name.lower() in MEASURED and requirement.specifier:
            found.setdefault(requirement.name.lower(), requirement)
    return found


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_installed_version_is_the_measured_one(name: str) -> None:
    try:
        installed = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"{name} is not installed; the parity suite needs {name}=={MEASURED[name]} (pip install -e '.[test]')")
    assert installed == MEASURED[name], (
        f"{name} {installed} is installed, but the parity suite was measured with {name} {MEASURED[name]}: "
        f"run the parity tests on {installed}, update COMPATIBILITY.md, then MEASURED in tests/test_versions.py"
    )


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_pyproject_admits_the_measured_version(name: str) -> None:
    requirement = _requirements().get(name)
    assert requirement is not None, f"pyproject.toml states no version range for {name}"
    assert requirement.specifier.contains(MEASURED[name], prereleases=True), (
        f"pyproject.toml's {requirement} excludes {name} {MEASURED[name]}, the version the parity suite was measured with"
    )


@pytest.mark.parametrize("name", BOUNDED)
def test_private_code_dependencies_have_an_upper_bound(name: str) -> None:
    requirement = _requirements()[name]
    assert any(spec.operator in ("<", "<=", "==", "~=") for spec in requirement.specifier), (
        f"chatjinja overrides or reads {name}'s private code: give {requirement} an upper bound"
    )
