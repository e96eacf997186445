"""A cube at a URL: `saferl publish` to a real S3-compatible server (moto's server mode) and to a folder that
Python's HTTP server serves, then report, plot, validate, status and the TUI read it with the local cube's
numbers; writers refuse URLs; failures are one line; readers write nothing remotely."""

from __future__ import annotations

import asyncio
import functools
import shutil
import socket
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("aiohttp")
moto_server = pytest.importorskip("moto.server")

from cube.cli.entry import main  # noqa: E402

BUCKET = "results"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Handler(SimpleHTTPRequestHandler):
    """Serves a folder; paths under /private/ answer 403 (a store without permission)."""

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 - the http.server spelling
        if self.path.startswith("/private/"):
            self.send_error(403)
            return
        super().do_GET()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Test credentials and a moto S3 server on a free port (AWS_ENDPOINT_URL), a bucket, and a local cache
    folder for remote statistics; restored afterwards."""
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    values = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
              "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
              "SAFERL_CACHE_DIR": str(tmp_path_factory.mktemp("cache"))}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in values.items():
            mp.setenv(key, value)
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()
        s3fs.S3FileSystem(client_kwargs={"endpoint_url": values["AWS_ENDPOINT_URL"]}).mkdir(BUCKET)
        yield values
    server.stop()


@pytest.fixture(scope="module")
def http_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """(folder, base URL): Python's HTTP server serving a folder, in a thread."""
    root = tmp_path_factory.mktemp("www")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def local(small_demo_cube: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("local") / "cube.zarr"
    shutil.copytree(small_demo_cube, dest)
    return dest


@pytest.fixture(scope="module")
def published_http(local: Path, http_root: tuple[Path, str], env: dict[str, str]) -> str:
    root, base = http_root
    assert main(["publish", str(local), str(root / "cube.zarr")]) == 0
    return f"{base}/cube.zarr"


@pytest.fixture(scope="module")
def published_s3(local: Path, env: dict[str, str]) -> str:
    url = f"s3://{BUCKET}/cube.zarr"
    assert main(["publish", str(local), url]) == 0
    return url


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def report_csv(capsys: pytest.CaptureFixture[str], source: str) -> str:
    rc, out, err = run_cli(capsys, "report", source, "--format", "csv", "--boot", "200")
    assert rc == 0, err
    return out


def bucket_keys() -> list[str]:
    import s3fs

    return sorted(s3fs.S3FileSystem().find(BUCKET))


# --------------------------------------------------------------------------------------------- publish
def test_publish_prints_the_table2_command(local: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "publish", str(local), str(tmp_path / "snap.zarr"))
    assert rc == 0
    assert f"saferl report {tmp_path / 'snap.zarr'} --format latex --style paper" in out
    assert not (tmp_path / "snap.zarr" / "write_seq").exists()  # the writers' seqlock stays behind


def test_publish_refuses_an_existing_destination(published_s3: str, local: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(capsys, "publish", str(local), published_s3)
    assert rc == 2 and "already holds a store" in err and len(err.strip().splitlines()) == 1


def test_publish_keeps_complete_runs_only_unless_partial(local: Path, tmp_path: Path) -> None:
    import numpy as np
    import zarr

    from cube import open_cube
    from cube.schema import RUN_STATUS

    source = tmp_path / "src.zarr"
    shutil.copytree(local, source)
    zarr.open_group(source, mode="r+")["run_status"][0, 1, 0, 2] = RUN_STATUS["partial"]
    assert main(["publish", str(source), str(tmp_path / "complete.zarr")]) == 0
    assert main(["publish", str(source), str(tmp_path / "all.zarr"), "--partial"]) == 0
    want = open_cube(source).isel(algo=0, task=1, bound=0, seed=2)
    left_out = open_cube(tmp_path / "complete.zarr").isel(algo=0, task=1, bound=0, seed=2)
    kept = open_cube(tmp_path / "all.zarr").isel(algo=0, task=1, bound=0, seed=2)
    assert np.isnan(left_out["cost"].values).all() and int(left_out["run_status"]) == RUN_STATUS["pending"]
    np.testing.assert_array_equal(kept["cost"].values, want["cost"].values)
    other = {"algo": 0, "task": 1, "bound": 0, "seed": 1}
    np.testing.assert_array_equal(open_cube(tmp_path / "complete.zarr").isel(other)["cost"].values,
                                  open_cube(source).isel(other)["cost"].values)


class FailingPipes:
    """A file system whose `pipe` fails (PermissionError, like a write permission revoked) from its
    `fail_at`-th call on; with `rm_fails`, removing fails too. Everything else goes to `fs`."""

    def __init__(self, fs: object, fail_at: int, rm_fails: bool = False) -> None:
        self.fs, self.fail_at, self.rm_fails, self.calls = fs, fail_at, rm_fails, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.fs, name)

    def pipe(self, data: dict[str, bytes]) -> None:
        self.calls += 1
        if self.calls >= self.fail_at:
            raise PermissionError("Access Denied (injected)")
        self.fs.pipe(data)

    def rm(self, paths: list[str]) -> None:
        if self.rm_fails:
            raise PermissionError("Access Denied (injected on delete)")
        self.fs.rm(paths)


def failing_publish(monkeypatch: pytest.MonkeyPatch, rm_fails: bool) -> list[FailingPipes]:
    """Make `saferl publish` to a URL send 8 files a batch and fail at its third batch; the wrapper made."""
    from cube.store import publish

    made: list[FailingPipes] = []

    def filesystem(url: str) -> tuple[object, str]:
        fs, root = publish.filesystem.__wrapped__(url)
        made.append(FailingPipes(fs, fail_at=3, rm_fails=rm_fails))
        return made[-1], root

    filesystem.__wrapped__ = publish.filesystem
    monkeypatch.setattr(publish, "SINK_BATCH", 8)
    monkeypatch.setattr(publish, "filesystem", filesystem)
    return made


def test_a_failed_publish_removes_what_it_wrote(env: dict[str, str], local: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    made = failing_publish(monkeypatch, rm_fails=False)
    line = one_line_error(capsys, "publish", str(local), f"s3://{BUCKET}/failed.zarr")
    assert made[0].calls == 3 and "access denied" in line
    assert "24 object(s) it had written were removed" in line  # 3 batches of 8 tried (the last one failed)
    assert not [key for key in bucket_keys() if "/failed.zarr/" in f"/{key}"]
    monkeypatch.undo()
    assert main(["publish", str(local), f"s3://{BUCKET}/failed.zarr"]) == 0  # the URL is free again


def test_a_failed_publish_that_cannot_clean_up_is_refused_by_readers(
        env: dict[str, str], local: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    failing_publish(monkeypatch, rm_fails=True)
    url = f"s3://{BUCKET}/stuck.zarr"
    line = one_line_error(capsys, "publish", str(local), url)
    assert "could not be removed" in line and "remove that prefix" in line
    assert [key for key in bucket_keys() if "/stuck.zarr/" in f"/{key}"]  # chunks were left behind, no zarr.json
    monkeypatch.undo()
    assert "does not exist" in one_line_error(capsys, "report", url)
    assert "an unfinished publish" in one_line_error(capsys, "publish", str(local), url)


# --------------------------------------------------------------------------------------------- readers
def test_report_over_s3_equals_local_and_writes_nothing_there(local: Path, published_s3: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    before = bucket_keys()
    assert report_csv(capsys, published_s3) == report_csv(capsys, str(local))
    assert bucket_keys() == before


def test_report_over_http_equals_local_then_comes_from_the_local_cache(
        local: Path, published_http: str, env: dict[str, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    expected = report_csv(capsys, str(local))
    assert report_csv(capsys, published_http) == expected
    assert list(Path(env["SAFERL_CACHE_DIR"]).glob("remote/*/_derived/suffstats"))
    from cube.stats import suffstats

    def no_pass(*args: object, **kwargs: object) -> None:
        raise AssertionError("the second report of a URL must come from the local cache")

    monkeypatch.setattr(suffstats, "compute_suffstats", no_pass)
    assert report_csv(capsys, published_http) == expected


def test_file_url_is_the_local_store(local: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report_csv(capsys, local.as_uri()) == report_csv(capsys, str(local))


def test_credentials_in_a_url_are_never_printed(published_http: str, capsys: pytest.CaptureFixture[str]) -> None:
    with_secret = published_http.replace("http://", "http://reader:s3cret@")
    for argv in (("validate", with_secret), ("status", with_secret), ("report", with_secret, "--boot", "50")):
        rc, out, err = run_cli(capsys, *argv)
        assert rc == 0 and "s3cret" not in out + err, err
        assert argv[0] == "report" or "http://127.0.0.1" in out  # the URL is shown, without its user info


def test_validate_status_plot_export_over_http(published_http: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(capsys, "validate", published_http)
    assert rc == 0 and "valid saferl cube" in out, err
    rc, out, err = run_cli(capsys, "status", published_http)
    assert rc == 0 and "complete" in out, err
    rc, _, err = run_cli(capsys, "plot", published_http, "cdf", "--out", str(tmp_path / "cdf.png"))
    assert rc == 0 and (tmp_path / "cdf.png").stat().st_size > 0, err
    rc, _, err = run_cli(capsys, "export", published_http, str(tmp_path / "cube.nc"))
    assert rc == 0 and (tmp_path / "cube.nc").stat().st_size > 0, err


def test_render_over_http_equals_local(local: Path, published_http: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`saferl render` of a saved view reads a URL as every other reader (its URL was once cut to 'http:/')."""
    view = tmp_path / "summary.saferl-view.toml"
    view.write_text('view = "summary"\n\n[options]\nboot = 50\n')
    for name, cube in (("remote", published_http), ("local", str(local))):
        rc, _, err = run_cli(capsys, "render", str(view), "--cube", cube, "--out", str(tmp_path / f"{name}.md"))
        assert rc == 0, err

    def body(name: str) -> list[str]:  # the first line records the cube (its URL or path)
        return (tmp_path / f"{name}.md").read_text().splitlines()[1:]

    assert body("remote") and body("remote") == body("local")
    assert '"cube":"' + published_http in (tmp_path / "remote.md").read_text().splitlines()[0]


def test_tui_shows_the_local_numbers_over_http(local: Path, published_http: str) -> None:
    from textual.widgets import DataTable

    from saferl_tui.app import build_app
    from tests.tuiwait import until_quiet

    def summary(source: str | Path) -> list[list[str]]:
        async def go() -> list[list[str]]:
            app = build_app(source, boot=40)
            async with app.run_test(size=(120, 40)) as pilot:
                await until_quiet(pilot)
                table = app.main_screen.query_one("#summary-table", DataTable)
                return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]

        return asyncio.run(go())

    remote = summary(published_http)
    assert remote and remote == summary(local)


def test_first_table_at_100ms_a_request(local: Path, published_http: str, http_root: tuple[Path, str],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Through a proxy adding 100 ms to every request: the report's chunk requests go out concurrently, and
    its table equals the local one. The time to the first table is printed (bench/remote_latency.py
    measures it on the demo cube and the remote / local ratio at 1/24 scale)."""
    import subprocess
    import sys
    import time

    from tests.latency_proxy import LatencyProxy

    expected = report_csv(capsys, str(local))
    name = published_http.rsplit("/", 1)[1]
    with LatencyProxy(str(http_root[0]), delay_s=0.1) as proxy:  # serves the folder; the reader: a process
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "cube.cli", "report", f"{proxy.url}/{name}", "--format", "csv",
                               "--boot", "200", "--no-cache"], capture_output=True, text=True, timeout=300)
        seconds = time.perf_counter() - start
    assert done.returncode == 0 and done.stdout == expected, done.stderr
    assert proxy.max_in_flight >= 8, f"chunk requests went out {proxy.max_in_flight} at a time"
    objects = sum(1 for p in (http_root[0] / name).rglob("*") if p.is_file())
    assert proxy.requests <= objects, f"{proxy.requests} requests for {objects} objects: some read twice"
    with capsys.disabled():
        print(f"\nfirst table over 100 ms/request: {seconds:.1f} s ({proxy.requests} requests, "
              f"{proxy.max_in_flight} at once at most)")


def test_a_pass_prefetches_every_episode_chunk_once(published_http: str, http_root: tuple[Path, str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`prefetch_pass` starts one request per reward/cost chunk on the server; the pass takes each over (none
    left pending); a cube larger than PREFETCH_BYTES is not prefetched."""
    from cube.stats.suffstats import load_suffstats
    from cube.store import snapshot
    from cube.store.location import prefetch_pass

    folder = http_root[0] / published_http.rsplit("/", 1)[1]
    chunks = [p for name in ("reward", "cost") for p in (folder / name / "c").rglob("*") if p.is_file()]
    url = published_http.replace("127.0.0.1", "localhost")  # a URL of its own: nothing of it kept or pending yet
    assert prefetch_pass(url) == len(chunks) > 0
    assert sum(key[0] == url for key in snapshot.PENDING) == len(chunks)
    load_suffstats(url, cache=False)
    assert not [key for key in snapshot.PENDING if key[0] == url]
    monkeypatch.setattr(snapshot, "PREFETCH_BYTES", 0)
    assert prefetch_pass(url) == 0


# --------------------------------------------------------------------------------------------- errors
def one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    rc, _, err = run_cli(capsys, *argv)
    lines = err.strip().splitlines()
    assert rc != 0 and len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("argv", [
    ("demo", "s3://results/new.zarr"),
    ("train", "--out", "s3://results/new.zarr", "--preset", "smoke"),
    ("import", "episodes", "runs.csv", "--out", "https://user:secret@example.org/x.zarr?token=abc"),
])
def test_writers_refuse_a_url(env: dict[str, str], capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    line = one_line_error(capsys, *argv)
    assert "read-only" in line and "secret" not in line and "token" not in line
    assert "new.zarr" not in bucket_keys()


def test_writer_api_refuses_a_url() -> None:
    from cube import CubeWriter, Recorder
    from cube.errors import CubeError

    with pytest.raises(CubeError, match="read-only"):
        Recorder("s3://results/x.zarr", algo="ppo", task="goal", bound=25, seed=0)
    with pytest.raises(CubeError, match="read-only"):
        CubeWriter("gs://results/x.zarr")


def test_a_url_that_does_not_exist(env: dict[str, str], published_http: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert "does not exist" in one_line_error(capsys, "report", f"s3://{BUCKET}/nothing.zarr")
    missing = published_http.replace("cube.zarr", "no.zarr")
    assert "does not exist" in one_line_error(capsys, "status", missing)
    rc, _, err = run_cli(capsys, "validate", missing)  # validate's own form: the problem, then INVALID
    assert rc == 1 and "does not exist" in err and "Traceback" not in err
    assert "does not exist" in one_line_error(capsys, "report", "s3://no-such-bucket-here/cube.zarr")


def test_a_bucket_without_permission(env: dict[str, str], local: Path, http_root: tuple[Path, str],
                                    capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import boto3

    client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"])
    client.create_bucket(Bucket="locked")
    client.put_object(Bucket="locked", Key="cube.zarr/zarr.json", Body=b"{}")
    client.put_bucket_policy(Bucket="locked", Policy=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Deny", "Principal": "*", "Action": "s3:*",
         "Resource": ["arn:aws:s3:::locked", "arn:aws:s3:::locked/*"]}]}))
    assert "access denied" in one_line_error(capsys, "report", "s3://locked/cube.zarr")
    assert "access denied" in one_line_error(capsys, "publish", str(local), "s3://locked/new.zarr")
    assert "access denied" in one_line_error(capsys, "report", f"{http_root[1]}/private/cube.zarr")


def test_a_truncated_chunk_on_the_server(local: Path, http_root: tuple[Path, str], env: dict[str, str],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    root, base = http_root
    assert main(["publish", str(local), str(root / "cut.zarr")]) == 0
    chunk = next(p for p in sorted((root / "cut.zarr" / "cost").rglob("*")) if p.is_file() and p.name != "zarr.json")
    chunk.write_bytes(chunk.read_bytes()[:5])
    line = one_line_error(capsys, "report", f"{base}/cut.zarr", "--no-cache")
    assert f"chunk cost/{chunk.relative_to(root / 'cut.zarr' / 'cost').as_posix()}" in line and "damaged" in line


def test_status_watch_refuses_a_snapshot(published_http: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert "never changes" in one_line_error(capsys, "status", published_http, "--watch")


def test_readme_share_a_cube_works_as_written(env: dict[str, str], local: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """README's "Share a cube" publish and report lines, against the moto server (its bucket for `my-lab`)."""
    import re
    import shlex

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = re.search(r"## Share a cube\n+```bash\n(.*?)```", readme, re.S)
    assert block is not None
    lines = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    run = [line for line in lines if line.startswith(("saferl publish", "saferl report"))]
    assert [line.split()[1] for line in run] == ["publish", "report"]
    for line in run:
        argv = shlex.split(line.replace("demo/results.zarr", str(local)).replace("s3://my-lab", f"s3://{BUCKET}"))
        rc, out, err = run_cli(capsys, *argv[1:])
        assert rc == 0, err
    assert "\\begin{table" in out  # the LaTeX Table 2
