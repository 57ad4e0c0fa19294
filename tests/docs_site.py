"""`make docs`: the collection's docs site, built with antsibull-docs and rendered with Sphinx.

antsibull-docs generates a page per module, role, filter and inventory plugin from its documentation
and the collection's extra docs (docs/docsite/extra-docs.yml, docs/docsite/rst/); the Markdown pages
of docs/ (guides, runbooks, the reference pages) go in under guides/, read by MyST, with the finding
tables of docs/findings.md generated again from the registry. The HTML lands in <dest>/html.

    python -m tests.docs_site [--dest build/docs]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
COLLECTION = "kubegpu.scheduling"
BIN = Path(sys.executable).parent

# The guides' table of contents in the site, in the order of the README's links.
GUIDES = (
    "runbooks",
    "runbooks/gpu-failure",
    "runbooks/gpu-device-quarantine",
    "runbooks/gpu-unattended",
    "runbooks/gpu-driver-upgrade",
    "real-cluster",
    "modules",
    "gpu-health",
    "alert-rules",
    "awx",
    "placement",
    "ci-validation",
    "plugin-config",
    "findings",
    "security",
    "clean-up",
    "supported-versions",
    "local-cluster",
    "testing",
    "benchmarks",
)

CONF = """
# Added by tests/docs_site.py: the site's title, and the guides, the Markdown pages of docs/, read by MyST.
project = "kubegpu.scheduling"
title = html_short_title = html_title = "kubegpu.scheduling: safe, observable Kubernetes GPU scheduling"
extensions.append("myst_parser")
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]
# Built offline: no inventories of other sites are fetched.
intersphinx_mapping = {}
# The guides link to files of the repository (playbooks, rbac, the README) that are not pages of the site.
suppress_warnings = ["myst.xref_missing", "myst.header"]
"""

WELCOME = "Welcome to my Ansible collection documentation"
TITLE = "kubegpu.scheduling"
INTRO = (
    "An Ansible collection that makes default Kubernetes GPU scheduling safe and observable: the module, role, "
    "filter and inventory pages are generated from their documentation; the guides and runbooks say which "
    "playbook to run for each task (start with :doc:`guides/runbooks`)."
)

INDEX = """

.. toctree::
   :maxdepth: 1
   :caption: Guides and runbooks:

{entries}
"""


def env() -> dict[str, str]:
    """The venv's tools first on PATH (antsibull-docs calls ansible and ansible-doc by name), and this checkout as
    the collection they document, not a kubegpu.scheduling installed in ~/.ansible."""
    from tests.collection import collections_root

    return dict(
        os.environ,
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        ANSIBLE_COLLECTIONS_PATH=str(collections_root()),
        ANSIBLE_NOCOLOR="1",
    )


def run(*argv: str, cwd: Path = REPO) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, cwd=cwd, env=env(), check=True)


def findings_page() -> str:
    """docs/findings.md with its tables generated from the registry as they are now."""
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.reference import (
        BEGIN,
        END,
        kinds_markdown,
    )

    text = (DOCS / "findings.md").read_text()
    return text[: text.index(BEGIN)] + kinds_markdown() + text[text.index(END) + len(END) :]


def copy_guides(rst: Path) -> None:
    guides = rst / "guides"
    for page in sorted(DOCS.rglob("*.md")):
        target = guides / page.relative_to(DOCS)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(page, target)
    for asset in sorted(DOCS.glob("*.png")):
        shutil.copyfile(asset, guides / asset.name)
    (guides / "findings.md").write_text(findings_page())
    missing = [g for g in GUIDES if not (guides / f"{g}.md").is_file()]
    assert not missing, f"guides without a page under docs/: {missing}"


def build(dest: Path) -> Path:
    """Build the site into dest; return the path of its index.html."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    run(str(BIN / "antsibull-docs"), "sphinx-init", "--use-current", "--dest-dir", str(dest), COLLECTION)
    rst = dest / "rst"
    rst.mkdir(exist_ok=True)
    rst.chmod(0o755)
    run(
        str(BIN / "antsibull-docs"),
        "--config-file",
        str(dest / "antsibull-docs.cfg"),
        "collection",
        "--cleanup",
        "everything",
        "--use-current",
        "--dest-dir",
        str(rst),
        COLLECTION,
    )
    copy_guides(rst)
    with (dest / "conf.py").open("a") as conf:
        conf.write(CONF)
    index = (rst / "index.rst").read_text()
    index = index.replace(WELCOME, TITLE).replace("=" * len(WELCOME), "=" * len(TITLE))
    index = index.replace("This docsite contains documentation of kubegpu.scheduling.", INTRO)
    (rst / "index.rst").write_text(index + INDEX.format(entries="\n".join(f"   guides/{g}" for g in GUIDES)))
    html = dest / "html"
    run(
        str(BIN / "sphinx-build"),
        "-b",
        "html",
        "-q",
        "-c",
        str(dest),
        "-d",
        str(dest / "doctrees"),
        str(rst),
        str(html),
    )
    return html / "index.html"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dest", type=Path, default=REPO / "build" / "docs")
    args = parser.parse_args()
    index = build(args.dest.resolve())
    print(f"the docs site: {index}")


if __name__ == "__main__":
    main()
