"""A page rendered by a real headless browser: Debian's chromium (package `chromium`)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from pathlib import Path

BROWSER_NAMES = ("chromium", "chromium-browser")
FLAGS = ("--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars")


def browser() -> str:
    """The chromium binary; its absence is an error that says what to install."""
    found = next((path for path in map(shutil.which, BROWSER_NAMES) if path), None)
    if not found:
        raise AssertionError(
            "no headless browser: install Debian's chromium (apt-get install --no-install-recommends chromium)"
        )
    return found


def rendered_dom(page: Path) -> str:
    """The DOM after the browser has loaded and laid out the page."""
    done = subprocess.run(
        [browser(), *FLAGS, "--dump-dom", page.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and "<html" in done.stdout, (
        f"chromium failed (rc {done.returncode}): {done.stderr[-2000:]}"
    )
    return done.stdout


def screenshot(page: Path, png: Path, width: int = 1400, height: int = 2400) -> Path:
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    command = [browser(), *FLAGS, f"--screenshot={png}", f"--window-size={width},{height}", page.resolve().as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and png.is_file(), (
        f"chromium made no screenshot (rc {done.returncode}): {done.stderr[-2000:]}"
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
    return png


# Chromium's own service calls (clock, component updates, sign-in), made whatever the page; none of them
# is a page's asset. Seen through the recording proxy with the flags below.
BROWSER_SERVICE_DOMAINS = ("google.com", "googleapis.com", "gvt1.com")


def _browser_service_call(request_line: str) -> bool:
    parts = request_line.split(" ")
    target = parts[1] if len(parts) > 1 else ""
    host = target.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0].lower()
    return any(host == domain or host.endswith("." + domain) for domain in BROWSER_SERVICE_DOMAINS)


def requests_leaving(page: Path) -> list[str]:
    """The request line of every fetch the page makes beyond its own file while the browser renders it.
    Every request goes to a recording proxy on 127.0.0.1 (no host name resolves, nothing leaves the
    machine); the browser's own service calls (BROWSER_SERVICE_DOMAINS) are left out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def record() -> None:
        while not stop.is_set():
            try:
                connection, _address = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(2)
                try:
                    request = connection.recv(8192).decode("latin-1")
                except OSError:
                    continue
                line = request.partition("\r\n")[0]
                if not _browser_service_call(line):
                    seen.append(line)

    recorder = threading.Thread(target=record, daemon=True)
    recorder.start()
    try:
        isolation = (
            f"--proxy-server=http://127.0.0.1:{listener.getsockname()[1]}",
            "--proxy-bypass-list=<-loopback>",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--virtual-time-budget=3000",
        )
        done = subprocess.run(
            [browser(), *FLAGS, *isolation, "--dump-dom", page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0 and "<html" in done.stdout, (
            f"chromium failed (rc {done.returncode}): {done.stderr[-2000:]}"
        )
    finally:
        stop.set()
        recorder.join()
        listener.close()
    return seen
