"""The docs site (`make docs`): antsibull-docs' lint of the collection's docs passes, and the built site, opened
in headless chromium, shows a page with a title and a body for every module and every runbook."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser import rendered_dom
from tests.docs_site import GUIDES, build

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("gpu_*.py"))
ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "meta" / "argument_specs.yml").is_file())
RUNBOOK_PAGES = ("runbooks", *(g for g in GUIDES if g.startswith("runbooks/")))


def test_antsibull_docs_lint_collection_docs_passes():
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(
        [str(BIN / "antsibull-docs"), "lint-collection-docs", "--plugin-docs", "."],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("docs")).parent


def shown(page: Path) -> tuple[str, str]:
    """The first heading and the text of the main article of a page, as chromium renders it."""
    dom = rendered_dom(page)
    heading = re.search(r"<h1[^>]*>(.*?)</h1>", dom, re.S)
    body = re.search(r'<div[^>]*itemprop="articleBody"[^>]*>(.*)', dom, re.S)
    assert heading and body, f"{page}: no title or no article body"

    def text(fragment: str) -> str:
        return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())

    return text(heading.group(1)), text(body.group(1))


@pytest.mark.parametrize("module", MODULES)
def test_every_module_has_a_rendered_page(site: Path, module: str):
    title, body = shown(site / "collections" / "kubegpu" / "scheduling" / f"{module}_module.html")
    assert f"kubegpu.scheduling.{module}" in title
    assert "Synopsis" in body and "Parameters" in body and "Examples" in body and "Return Values" in body


def test_every_role_and_the_plugins_have_a_rendered_page(site: Path):
    folder = site / "collections" / "kubegpu" / "scheduling"
    for name in [f"{r}_role" for r in ROLES] + [
        "gpu_nodes_inventory",
        "fleet_summary_filter",
        "fleet_diagnosis_filter",
    ]:
        assert (folder / f"{name}.html").is_file(), name


@pytest.mark.parametrize("guide", RUNBOOK_PAGES)
def test_every_runbook_page_renders(site: Path, guide: str):
    source = (REPO / "docs" / f"{guide}.md").read_text()
    wanted = " ".join(re.sub(r"[`*]", "", source.splitlines()[0].lstrip("# ")).split())
    title, body = shown(site / "guides" / f"{guide}.html")
    assert wanted in title
    assert len(body) > 1000, body


def test_the_collection_index_links_the_guides_and_every_guide_is_built(site: Path):
    for guide in GUIDES:
        assert (site / "guides" / f"{guide}.html").is_file(), guide
    index = (site / "collections" / "kubegpu" / "scheduling" / "index.html").read_text()
    assert "Guides and runbooks" in index
    guides = (site / "collections" / "kubegpu" / "scheduling" / "docsite" / "guides.html").read_text()
    assert all(f"guides/{g}.html" in guides for g in GUIDES), "docs/docsite/rst/guides.rst misses a guide"
