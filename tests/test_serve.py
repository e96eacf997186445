"""``saferl-tui --serve`` (issue 38): the app served by textual-serve, driven in a real headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from saferl_tui.serve import app_command, tunnel_text

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
WS_TAP = """
window.__saferl = [];
const Orig = window.WebSocket;
window.WebSocket = function(...a) { const ws = new Orig(...a);
  ws.addEventListener('message', ev => { const d = ev.data;
    if (typeof d === 'string') window.__saferl.push(d);
    else if (d instanceof Blob) d.text().then(t => window.__saferl.push(t));
    else window.__saferl.push(new TextDecoder().decode(d)); });
  return ws; };
window.WebSocket.prototype = Orig.prototype; Object.assign(window.WebSocket, Orig);
"""
"""Records what the server sends the page (the terminal's output): xterm.js draws on a canvas, so the
screen's text is read from the stream, not from the DOM."""
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b\][^\x07]*\x07")


def test_the_app_command_leaves_the_serve_flags_out() -> None:
    cmd = app_command(["cube.zarr", "--serve", "--host", "0.0.0.0", "--port=9000", "--boot", "40"])
    assert cmd.endswith("-m saferl_tui cube.zarr --boot 40") and "--serve" not in cmd and "9000" not in cmd
    assert "ssh -N -L 8000:localhost:8000" in tunnel_text("127.0.0.1", 8000)
    assert "anyone who can reach this port" in tunnel_text("0.0.0.0", 8000)


def test_a_bad_port_is_one_line(capsys) -> None:
    from saferl_tui.cli import main

    assert main(["--serve", "--port", "0", "--no-follow"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


NO_BROWSER = pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                                reason="no headless browser: apt-get install chromium chromium-driver to run it")
SHOTS = Path(os.environ.get("SAFERL_SERVE_SHOTS", "")) if os.environ.get("SAFERL_SERVE_SHOTS") else None
"""Where the served Summary's screenshot is copied, to be looked at (unset: only checked to be a PNG)."""


@contextmanager
def served(cube: Path, *flags: str):
    """``saferl-tui CUBE --serve`` on a free port and a headless Chromium on its page (selenium); yields
    (driver, screen_text): what the server has sent the page so far, as text."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "saferl_tui", str(cube), "--serve", "--port", str(port),
                               "--boot", "40", *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    driver = None
    try:
        def listening() -> bool:
            assert server.poll() is None, server.communicate()[0]
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                return True
            except OSError:
                return False

        _wait_for(listening, 60, "the server to listen")
        options = webdriver.ChromeOptions()
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,800"):
            options.add_argument(arg)
        options.binary_location = CHROMIUM
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WS_TAP})
        driver.get(f"http://127.0.0.1:{port}")

        def screen_text() -> str:
            return ANSI.sub("", driver.execute_script("return window.__saferl.join('')"))

        yield driver, screen_text
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
        server.communicate(timeout=20)


def press(driver, key: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea").send_keys(key)


@NO_BROWSER
def test_served_app_draws_the_summary_and_switches_view_in_chromium(small_demo_cube: Path, tmp_path: Path) -> None:
    cube = tmp_path / "cube.zarr"
    shutil.copytree(small_demo_cube, cube)
    with served(cube, "--no-follow") as (driver, screen_text):
        _wait_for(lambda: "IQM R" in screen_text() and "ppo_lag" in screen_text(), 120, "the Summary")
        png = tmp_path / "served_summary.png"
        assert driver.save_screenshot(str(png)) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if SHOTS is not None:
            SHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copy(png, SHOTS / png.name)
        before = len(screen_text())
        press(driver, "3")
        _wait_for(lambda: "CDF of normalized episodic cost deviation" in screen_text()[before:], 60,
                  "the CDF view after pressing 3")


@NO_BROWSER
def test_follow_mode_over_serve_shows_a_run_written_while_served(tmp_path: Path) -> None:
    """A store with a run still training, served with --follow: a writer (its own process) finishes the run;
    its Status row on the page turns complete 4/4, as in a terminal's follow mode."""
    from tests.test_tui_follow import finish_run, make_store, run_writer

    path = make_store(tmp_path)
    with served(path, "--follow", "--follow-interval", "0.3") as (driver, screen_text):
        _wait_for(lambda: "IQM R" in screen_text(), 120, "the Summary")
        press(driver, "8")
        running = re.compile(r"ppo_lag\s+goal\s+15\s+1\s+\w+\s+2/4")
        _wait_for(lambda: running.search(screen_text()) is not None, 60, "the Status view: the run at 2 of 4")
        before = len(screen_text())
        assert run_writer(finish_run, path) == 0
        finished = re.compile(r"ppo_lag\s+goal\s+15\s+1\s+complete\s+4/4")
        _wait_for(lambda: finished.search(screen_text()[before:]) is not None, 60,
                  "the page to show the finished run (ppo_lag goal 15 seed 1: complete 4/4)")
