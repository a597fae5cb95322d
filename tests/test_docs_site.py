"""The docs site builds as MkDocs builds it for readers, with --strict: a broken link or anchor,
a nav entry naming no page, or a page left out of the nav fails the build, and so this test.
Then it is opened from disk (file://), as `make docs` leaves it, in headless Chromium: every
link names a page's file (a folder opens as a directory listing), and search finds pages
without a server or a network."""

import html
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from conftest import arguments, chromium

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("docs") / "site"
    command = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    config = ["--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(folder)]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice of its successor
    done = subprocess.run([*command, *config], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


def test_site_builds_strict(site):
    assert (site / "index.html").is_file()


def _links(page: str) -> list[str]:
    """The site's own links of a page: relative hrefs, anchors within the page left out."""
    hrefs = (html.unescape(href) for href in re.findall(r'<a [^>]*href="([^"]*)"', page))
    return [href for href in hrefs if not urlsplit(href).scheme and not href.startswith("#")]


def test_every_link_of_every_page_names_a_file(site):
    pages = sorted(set(site.rglob("*.html")) - {site / "404.html"})  # a server's, absolute
    assert len(pages) > 15
    for page in pages:
        text = page.read_text()
        assert "unpkg.com" not in text, page  # nothing fetched: the site works offline
        for link in _links(text):
            target = page.parent / unquote(urlsplit(link).path)
            assert target.is_file(), f"{page.relative_to(site)}: {link}"


def test_search_finds_pages_opened_from_disk_in_a_browser(site, tmp_path):
    """Material opens its search with the page's `q` parameter; the results are in the DOM
    Chromium dumps once the page has had its time to run."""
    done = subprocess.run(
        arguments(
            "{browser} --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
            " --disable-background-networking --disable-component-update --disable-sync"
            " --user-data-dir={profile} --virtual-time-budget=10000 --dump-dom {page}",
            browser=chromium(),
            profile=tmp_path / "profile",
            page=(site / "index.html").as_uri() + "?q=ArrayRecord",
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r'md-search-result__meta">(\d+) matching documents<', done.stdout)
    assert found and int(found[1]) >= 3, done.stderr[-2000:]
    results = re.findall(r'<a href="([^"]*)" class="md-search-result__link"', done.stdout)
    assert results and all(link.split("#")[0].endswith(".html") for link in results)
    for link in results:
        path = (site / unquote(urlsplit(html.unescape(link)).path)).resolve()
        assert path.is_file() and path.is_relative_to(site.resolve()), link
