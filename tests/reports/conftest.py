"""Fixtures of the report tests: audit results shaped, reports built from the
example specs, and a headless Chromium driven over the DevTools protocol (stdlib only: ``--remote-debugging-pipe``,
NUL-delimited JSON on file descriptors 3 and 4)."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dplens._api import report_summary
from dplens.reports.build import build_report
from dplens.reports.model import AuditEvidence
from dplens.spec import load_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FIXED_TIME = "2025-01-01T00:00:00Z"


def contract_audit_dict(**overrides: Any) -> dict[str, Any]:
    """An ``AuditResult.to_dict()`` (a Gaussian σ = 1 audit, 1e5 trials).

    The numbers are plausible for that audit (research note §5.2: CP realistic 2.55 at N = 1e5, GDP estimate
    4.2, ceiling 10.21 from §5.4) but they are test data, not results of dplens.
    """
    data: dict[str, Any] = {
        "epsilon_lower_bound": 2.546,
        "bound_direction": "D_vs_D'",
        "epsilon_claimed": 1.0,
        "delta": 1e-5,
        "confidence": 0.95,
        "claim_source": "spec [claim]",
        "trials": 100_000,
        "method": "Clopper-Pearson, Bonferroni over an a-priori grid of 1001 thresholds",
        "threshold_strategy": {"name": "bonferroni_grid", "grid_size": 1001, "low": -2.0, "high": 8.0},
        "score": "exact log-likelihood ratio",
        "mechanism": "Gaussian(noise_multiplier=1.0)",
        "pair": "D = {x}, D' = {} (sensitivity 1)",
        "operating_point": {
            "threshold": 3.29,
            "false_positives": 47,
            "false_negatives": 96_120,
            "negatives": 100_000,
            "positives": 100_000,
            "fpr": 4.7e-4,
            "fnr": 0.9612,
            "fpr_upper": 6.6e-4,
            "fnr_upper": 0.9628,
        },
        "ceiling": 10.21,
        "estimates": [
            {
                "name": "gdp",
                "epsilon": 4.215,
                "mu": 0.97,
                "is_estimate": True,
                "assumption": "valid under the GDP-shape assumption (Nasr et al. 2023)",
            },
            {"name": "point", "epsilon": 2.9, "is_estimate": True, "assumption": "raw counts, no confidence"},
        ],
        "empirical_trade_off": [
            {"threshold": t, "fpr": fpr, "fnr": fnr}
            for t, fpr, fnr in [(-1.0, 0.84, 0.02), (0.5, 0.31, 0.31), (1.5, 0.067, 0.69), (3.29, 4.7e-4, 0.9612)]
        ],
        "trajectory": [
            {"trials": n, "epsilon_lower_bound": e} for n, e in [(1_000, 0.99), (10_000, 1.869), (100_000, 2.546)]
        ],
        "verdict": "VIOLATION",
        "verdict_reason": "the 95% lower bound 2.546 exceeds the claimed epsilon 1.0",
        "seed": 7,
        "chunks": 4,
        "backend": "in-process",
        "elapsed_seconds": 0.8,
    }
    data.update(overrides)
    return data


@pytest.fixture(scope="session")
def audit_dict():
    """The factory :func:`contract_audit_dict` (stateless)."""
    return contract_audit_dict


@pytest.fixture(scope="session")
def audited_report():
    """The under-claimed Gaussian example with a contract-shaped audit, and hostile text in its title."""
    spec = load_spec(EXAMPLES / "gaussian_claim.toml")
    return build_report(
        spec=spec,
        accounting=report_summary(spec, 1e-5),
        title='Gaussian <script>alert("x")</script> & "quotes"',
        audit=AuditEvidence.from_audit_dict(contract_audit_dict()),
        privacy_unit="one patient <record> & their visits",
        created_utc=FIXED_TIME,
        command=("dplens", "report"),
    )


@pytest.fixture(scope="session")
def unaudited_report():
    spec = load_spec(EXAMPLES / "heterogeneous.toml")
    return build_report(
        spec=spec,
        accounting=report_summary(spec, 1e-6),
        title="heterogeneous composition",
        not_audited_reason="the audit was switched off (--no-audit)",
        created_utc=FIXED_TIME,
        command=("dplens", "report"),
    )


# --------------------------------------------------------------------------------------------
# Headless Chromium over the DevTools protocol (pipe transport)
# --------------------------------------------------------------------------------------------


def chromium_executable() -> str | None:
    """Debian's chromium (or ``DPLENS_CHROMIUM``)."""
    explicit = os.environ.get("DPLENS_CHROMIUM")
    if explicit:
        return explicit
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)


def _high(fd: int) -> int:
    """Move ``fd`` to a number >= 10 (close-on-exec), so dup2 onto 3 / 4 in the child never aliases it."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class DevTools:
    """A minimal DevTools-protocol client: Chromium reads commands on fd 3 and writes replies on fd 4."""

    def __init__(self, executable: str, *, timeout: float = 30.0) -> None:
        self.profile = tempfile.mkdtemp(prefix="dplens-chromium-")
        child_in, self._write = map(_high, os.pipe())
        self._read_fd, child_out = map(_high, os.pipe())

        def wire() -> None:  # runs in the child between fork and exec
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            preexec_fn=wire,
            close_fds=False,  # fds 3 and 4 must survive exec; the pipes' other ends are close-on-exec
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        os.close(child_in)
        os.close(child_out)
        self.timeout = timeout
        self.events: list[dict[str, Any]] = []
        self._buffer = b""
        self._next_id = 0

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            ready, _, _ = select.select([self._read_fd], [], [], left)
            if ready:
                chunk = os.read(self._read_fd, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium exited: {self._stderr()}")
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def _stderr(self) -> str:
        try:
            self.proc.wait(5)
            return self.proc.stderr.read().decode(errors="replace")[-2000:]
        except subprocess.TimeoutExpired:
            return "(still running)"

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None) -> dict:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        try:
            os.write(self._write, json.dumps(message).encode() + b"\0")
        except BrokenPipeError:
            raise RuntimeError(f"chromium exited: {self._stderr()}") from None
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method} failed: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, *, session: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        for event in self.events:
            if event.get("method") == method and event.get("sessionId") == session:
                return event
        while True:
            event = self._message(deadline)
            self.events.append(event)
            if event.get("method") == method and event.get("sessionId") == session:
                return event

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.send("Browser.close")
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._write)
        os.close(self._read_fd)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)


@dataclass
class RenderedPage:
    """What Chromium saw: the rendered DOM, visible text, screenshot, console errors, network requests."""

    url: str
    dom: str
    text: str
    values: dict[str, str]
    images: list[dict[str, Any]]
    screenshot: bytes
    console_errors: list[str]
    requests: list[str]

    @property
    def network_requests(self) -> list[str]:
        """Requests other than the page itself and ``data:`` URIs (which never touch the network)."""
        return [u for u in self.requests if u != self.url and not u.startswith("data:")]


_PAGE_STATE = """(() => ({
  dom: document.documentElement.outerHTML,
  text: document.body.innerText,
  values: Object.fromEntries([...document.querySelectorAll('[id][data-value]')].map(e => [e.id, e.dataset.value])),
  images: [...document.images].map(i => ({src: i.src.slice(0, 40), complete: i.complete, width: i.naturalWidth})),
}))()"""


def render_page(executable: str, path: Path, *, width: int = 1200) -> RenderedPage:
    """Load ``path`` in a fresh headless Chromium, wait for ``load``, and collect what it rendered."""
    browser = DevTools(executable)
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.send(f"{domain}.enable", session=session)
        browser.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        url = Path(path).resolve().as_uri()
        browser.send("Page.navigate", {"url": url}, session=session)
        browser.wait_for("Page.loadEventFired", session=session)
        state = browser.send("Runtime.evaluate", {"expression": _PAGE_STATE, "returnByValue": True}, session=session)[
            "result"
        ]["value"]
        shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=session)
        events = [e for e in browser.events if e.get("sessionId") == session]
    finally:
        browser.close()
    errors = []
    for event in events:
        params = event.get("params", {})
        match event.get("method"):
            case "Runtime.consoleAPICalled" if params.get("type") in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            case "Runtime.exceptionThrown":
                errors.append(params.get("exceptionDetails", {}).get("text", "exception"))
            case "Log.entryAdded" if params.get("entry", {}).get("level") == "error":
                errors.append(params["entry"].get("text", ""))
    requests = [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"]
    return RenderedPage(
        url=url,
        dom=state["dom"],
        text=state["text"],
        values=state["values"],
        images=state["images"],
        screenshot=base64.b64decode(shot["data"]),
        console_errors=errors,
        requests=requests,
    )


def require_chromium() -> str:
    """The chromium executable; skips when absent, but FAILS under ``CI=true`` (CI must run the browser test)."""
    executable = chromium_executable()
    if executable is None:
        message = "chromium is not installed (apt-get install chromium); .ci/run installs it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {message}")
        pytest.skip(message)
    return executable


@pytest.fixture(scope="session")
def chromium():
    return require_chromium()


@pytest.fixture(scope="session")
def render(chromium):
    """``render(path) -> RenderedPage`` in a fresh headless Chromium."""
    return lambda path, **kwargs: render_page(chromium, path, **kwargs)
