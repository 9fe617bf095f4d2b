"""Fetching a published archive by URL, Google Drive links included, with the standard library.

Google Drive serves small files directly, but answers a request for a large one (every model
archive) with an HTML page warning that the file is too large to scan for viruses; the file itself
comes from a second request that repeats the page's confirmation form (``confirm`` and ``uuid``
fields; older pages put a ``confirm=`` token in a link and a cookie). A page that still comes back
after that means the file is not shared publicly or its download quota is exhausted, and is
reported as such rather than saved as the archive. The file itself is written by the data root's
downloader (``core.data_root.save_response``), the one that fetches datasets.
"""

from __future__ import annotations

import re
import urllib.request
from html.parser import HTMLParser
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode, urljoin

from benchharness.core.data_root import TIMEOUT_S, save_response
from benchharness.core.errors import UserError

DRIVE_ID = re.compile(r"drive\.google\.com/(?:file/d/|open\?id=|uc\?(?:[^#]*&)?id=)([\w-]+)")
DRIVE_DOWNLOAD = "https://drive.usercontent.google.com/download"


class Opener(Protocol):
    def open(self, url: str, *, timeout: float = ...) -> Any: ...


class DownloadError(UserError, RuntimeError):
    pass


def drive_file_id(url: str) -> str | None:
    """The file id of a Google Drive sharing link, or None for any other URL."""
    m = DRIVE_ID.search(url)
    return m.group(1) if m else None


def direct_url(url: str) -> str:
    """The URL that serves the file itself (Drive's 'view' links serve a web page)."""
    file_id = drive_file_id(url)
    return f"{DRIVE_DOWNLOAD}?{urlencode({'id': file_id, 'export': 'download'})}" if file_id else url


class _ConfirmForm(HTMLParser):
    """Collects the action and hidden fields of the page's download form, and any confirm link."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and self.action is None:
            self.action = a.get("action")
        elif tag == "input" and a.get("type") == "hidden" and a.get("name"):
            self.fields[a["name"]] = a.get("value", "")
        elif tag == "a" and "confirm=" in a.get("href", ""):
            self.links.append(a["href"])


def confirmation_url(page: str, page_url: str) -> str | None:
    """The URL that a Drive warning page's 'download anyway' button requests, if it has one."""
    form = _ConfirmForm()
    form.feed(page)
    if form.action and "confirm" in form.fields:
        return f"{urljoin(page_url, form.action)}?{urlencode(form.fields)}"
    if form.links:  # HTMLParser has already unescaped the attribute values
        return urljoin(page_url, form.links[0])
    return None


def download(url: str, dest: Path, opener: Opener | None = None) -> Path:
    """Stream ``url`` into ``dest`` (atomically: a killed download leaves no partial archive)."""
    client: Opener = opener or urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    first = direct_url(url)
    try:
        response = client.open(first, timeout=TIMEOUT_S)
        if response.headers.get_content_type() == "text/html":
            page = response.read().decode("utf8", "replace")
            second = confirmation_url(page, response.geturl())
            if second is None:
                raise DownloadError(
                    f"{url} answered with a web page, not a file: it is not shared "
                    "publicly, or Google Drive's download quota for it is exhausted"
                )
            response = client.open(second, timeout=TIMEOUT_S)
            if response.headers.get_content_type() == "text/html":
                raise DownloadError(
                    f"{url} still answered with a web page after the virus-scan "
                    "confirmation: the download quota is probably exhausted"
                )
        save_response(response, dest)
    except OSError as exc:  # URLError, HTTPError, timeouts, a full disk
        raise DownloadError(f"could not download {url}: {exc}") from None
    return dest
