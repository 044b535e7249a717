"""The repository tests on its own: a user's clone has nothing beside it,
so no tracked file may read a path outside the repository, and the schema
every synthesized answer is checked against is the vendored copy."""

import schema_check
from conftest import REPO

OUTSIDE = "../" + "shared"  # spelt apart, or this file would name it


def repository_files():
    """Every file of the source tree: what a clone has (no .git, no builds)."""
    for f in REPO.rglob("*"):
        rel = f.relative_to(REPO).parts
        if rel[0] == ".git" or rel[0].startswith("build") or not f.is_file():
            continue
        yield f


def test_no_file_reads_outside_the_repository():
    bad = []
    for f in repository_files():
        if f.suffix == ".json" or not f.is_file():
            continue
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        if OUTSIDE in text:
            bad.append(str(f.relative_to(REPO)))
    assert bad == [], "files that read " + OUTSIDE + ": %s" % bad


def test_the_schema_is_the_vendored_copy(monkeypatch):
    monkeypatch.delenv("OPENAI_SCHEMA", raising=False)
    path = schema_check.schema_path()
    assert path == REPO / "tests" / "schema" / "openai" / "openapi.json"
    assert path.is_file()
    assert (path.parent / "LICENSE").is_file()
    # it loads, and it judges: an empty object is no Response
    assert schema_check.errors({}, "Response") != []
