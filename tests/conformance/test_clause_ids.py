"""The contract document and the conformance suite name the same clauses (no root: text only).

A clause is a heading `### C-XXX-N — title` of docs/dataplane-contract.md; a
conformance test carries its clause's id in its name, test_c_xxx_n_<what>.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOC = HERE.parents[1] / "docs" / "dataplane-contract.md"
SUITE = HERE / "test_contract.py"
CLAUSE = re.compile(r"^### (C-[A-Z]+-\d+)\b", re.MULTILINE)
TEST = re.compile(r"^test_c_([a-z]+)_(\d+)_[a-z0-9_]+$")


def doc_ids() -> list[str]:
    return CLAUSE.findall(DOC.read_text())


def suite_tests() -> list[str]:
    tree = ast.parse(SUITE.read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


def test_every_clause_has_a_test_and_every_test_a_clause() -> None:
    ids = doc_ids()
    assert len(ids) == len(set(ids)), f"a clause id twice in {DOC.name}: {sorted(ids)}"
    names = suite_tests()
    unnamed = [n for n in names if not TEST.match(n)]
    assert not unnamed, f"conformance tests without a clause id (test_c_xxx_n_...): {unnamed}"
    tested = {"C-{}-{}".format(*TEST.match(n).groups()).upper() for n in names}  # type: ignore[union-attr]
    assert set(ids) == tested, (
        f"clauses without a test: {sorted(set(ids) - tested)}; tests of no clause in {DOC.name}: "
        f"{sorted(tested - set(ids))}"
    )


def test_the_parsers_see_the_suite() -> None:
    """The two readers above find something: an empty document and an empty suite would agree."""
    assert len(doc_ids()) >= 10 and len(suite_tests()) >= 10, (doc_ids(), suite_tests())
