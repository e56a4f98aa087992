"""The documents: a short front door, links that resolve, papers cited by name.

README.md is the front door and stays short; every relative link in a tracked
Markdown file names a file or directory the repository holds (and, where it has
an anchor into a Markdown file, a heading or `id` of that file); and no tracked
file cites a paper by the name of a file the repository does not hold, a
`papers/` or `shared/` folder, or a design document that is not in it. Papers
are cited by the short names docs/papers.md defines.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 250

#: the five papers' file stems, built from parts so that this file does not hold them
PAPER_STEMS = [
    "-".join(("tcpw", "faster", "recovery", "slides")),
    "-".join(("logwestwood", "plus")),
    "-".join(("tcpw", "abse", "experiments")),
    "-".join(("btbe", "bottleneck", "target", "estimates")),
    "-".join(("mptcpw", "coupled", "multipath")),
]
#: citations of what the repository does not hold; a stem followed by "/" is one of the
#: repository's own directories (experiments/<paper>/, results/reference/<paper>/), not a citation
FORBIDDEN = [
    ("a paper's file name", re.compile(r"\.tx" + r"t §")),
    ("a paper's file stem", re.compile("(?:" + "|".join(map(re.escape, PAPER_STEMS)) + r")(?![/\w-])")),
    ("a papers folder", re.compile(r"\bpapers" + "/")),
    ("a shared folder", re.compile(r"\bshared" + "/")),
    ("a design document the repository lacks", re.compile("DESIGN" + r"\.md")),
]
#: files allowed one of those, each with why
EXEMPT = {
    "tests/test_docs.py": "builds the patterns",
    # the CI machine's own toolchain installer, outside the clone, run when present
    ".ci/run": "a shared folder",
}
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
ANCHOR_ID = re.compile(r"<a\s+id=\"([^\"]+)\"")


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / p for p in out.decode().split("\0") if p]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(md: Path) -> set[str]:
    text = md.read_text()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    heads = [m.group(1) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", text, flags=re.M)]
    return {slug(h) for h in heads} | set(ANCHOR_ID.findall(text))


def test_readme_is_a_front_door() -> None:
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines, at most {README_MAX_LINES}: move the detail to docs/"


def relative_links(md: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", md.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def markdown_files() -> list[Path]:
    return [p for p in tracked() if p.suffix == ".md"]


def test_the_check_sees_the_documents() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in markdown_files()}
    assert {"README.md", "docs/papers.md", "docs/benchmarks.md"} <= names, sorted(names)
    assert sum(len(relative_links(p)) for p in markdown_files()) >= 20, "too few links found: is the pattern broken?"


@pytest.mark.parametrize("md", markdown_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(md: Path) -> None:
    files = {p.relative_to(ROOT).as_posix() for p in tracked()}
    dirs = {Path(f).parent.as_posix() for f in files} | {p for f in files for p in map(str, Path(f).parents)}
    bad = []
    for target in relative_links(md):
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        rel = dest.relative_to(ROOT).as_posix() if dest.is_relative_to(ROOT) else None
        if rel is None or (rel not in files and rel not in dirs):
            bad.append(f"{target}: no such file in the repository")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: {rel} has no heading or id '{anchor}'")
    assert not bad, f"{md.relative_to(ROOT)}: " + "; ".join(bad)


def test_no_citation_of_what_the_repository_lacks() -> None:
    bad = []
    for p in tracked():
        rel = p.relative_to(ROOT).as_posix()
        if EXEMPT.get(rel) == "builds the patterns" or not p.is_file():
            continue
        try:
            text = p.read_text()
        except UnicodeDecodeError:
            continue
        for what, pattern in FORBIDDEN:
            if EXEMPT.get(rel) == what:
                continue
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{rel}:{line}: {what} ({m.group(0)!r})")
    assert not bad, "cite papers by the short names of docs/papers.md:\n" + "\n".join(bad)


def test_the_patterns_catch_what_they_are_for() -> None:
    """Each pattern matches a citation of its kind and not the repository's own paper directories."""
    stem = PAPER_STEMS[1]
    samples = {
        "a paper's file name": f"{stem}.tx" + "t §II",
        "a paper's file stem": f"({stem} §III)",
        "a papers folder": "papers" + "/x",
        "a shared folder": "../shared" + "/papers",
        "a design document the repository lacks": "(DESIGN" + ".md)",
    }
    for what, pattern in FORBIDDEN:
        assert pattern.search(samples[what]), what
    assert not any(p.search(f"experiments/{stem}/per.toml") for _, p in FORBIDDEN)


def test_slug_matches_githubs() -> None:
    assert slug("The host's sysctls") == "the-hosts-sysctls"
    assert slug("OVS switches and an os-ken (Ryu) app") == "ovs-switches-and-an-os-ken-ryu-app"
    assert slug("In an editor: `cclab schema`") == "in-an-editor-cclab-schema"
