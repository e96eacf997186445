"""``saferl-tui --serve`` (issue 38): the app served by textual-serve, driven in a real headless Chromium."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
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


@pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                    reason="no headless browser: apt-get install chromium chromium-driver to run the browser test")
def test_served_app_draws_the_summary_and_switches_view_in_chromium(small_demo_cube: Path, tmp_path: Path) -> None:
    pytest.importorskip("textual_serve", reason="the [serve] extra (textual-serve) is not installed")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    cube = tmp_path / "cube.zarr"
    shutil.copytree(small_demo_cube, cube)
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "saferl_tui", str(cube), "--serve", "--port", str(port),
                               "--boot", "40", "--no-follow"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
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

        _wait_for(lambda: "IQM R" in screen_text() and "ppo_lag" in screen_text(), 120, "the Summary")
        png = tmp_path / "served_summary.png"
        assert driver.save_screenshot(str(png)) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        before = len(screen_text())
        driver.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea").send_keys("3")
        _wait_for(lambda: "CDF of normalized episodic cost deviation" in screen_text()[before:], 60,
                  "the CDF view after pressing 3")
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
        server.communicate(timeout=20)
