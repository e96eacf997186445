"""`saferl plot` and cube.render.figures: the figures' content checked through matplotlib's objects (panels,
curves, bands, labels, reference lines, numbers equal to cube.stats), the CLI, the missing-matplotlib
message."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from cube import stats  # noqa: E402
from cube.cli import main  # noqa: E402
from cube.errors import CubeError  # noqa: E402
from cube.render import aggregate_figures as A  # noqa: E402
from cube.render import figures as F  # noqa: E402
from cube.render import style  # noqa: E402
from cube.render.maker import FigureMaker, PlotOptions  # noqa: E402
from cube.selection import Selection  # noqa: E402
from cube.stats import curves  # noqa: E402
from cube.stats.learning_curves import aggregate_learning_curve  # noqa: E402
from cube.stats.metrics import METRIC, SETTING, tier_label  # noqa: E402
from saferl_tui import exports  # noqa: E402

BOOT = 200
ALGOS = ("ppo", "ppo_lag", "p3o", "focops")


@pytest.fixture(scope="module")
def maker(small_demo_cube: Path) -> FigureMaker:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return FigureMaker(small_demo_cube, options=PlotOptions(boot=BOOT, baseline="ppo"))


def _by_gid(fig, prefix: str, kind=None) -> list:
    out = []
    for ax in fig.axes:
        for art in [*ax.lines, *ax.collections, *ax.patches, *ax.texts]:
            gid = art.get_gid() or ""
            if gid.startswith(prefix) and (kind is None or isinstance(art, kind)):
                out.append(art)
    return out


def _band(poly: PolyCollection, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y1, y2) of a fill_between(x, y1, y2) polygon without gaps."""
    v = poly.get_paths()[0].vertices
    fwd, back = v[1:n + 1], v[n + 2:2 * n + 2][::-1]
    return fwd[:, 0], fwd[:, 1], back[:, 1]


def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.texts] + [t.get_text() for ax in fig.axes for t in ax.texts]


def test_cdf_figure_matches_stats(maker: FigureMaker):
    fig = maker.figure("cdf")
    cdf = stats.cdf_curves(maker.ss, boot=BOOT, rng_seed=0)
    settings = list(cdf["setting"].values)
    assert [ax.get_title() for ax in fig.axes] == [SETTING[s].label for s in settings]
    assert len(fig.axes) == 3
    kappa = cdf["kappa"].values
    for ax, s in zip(fig.axes, settings, strict=True):
        lines = [ln for ln in ax.lines if (ln.get_gid() or "").startswith("line:")]
        bands = [c for c in ax.collections if isinstance(c, PolyCollection) and (c.get_gid() or "").startswith("band:")]
        assert len(lines) == len(bands) == 4
        for a in ALGOS:
            (ln,) = [x for x in lines if x.get_gid() == f"line:{a}:{s}"]
            np.testing.assert_allclose(ln.get_ydata(), cdf["cdf"].sel(algo=a, setting=s).values)
            (band,) = [b for b in bands if b.get_gid() == f"band:{a}:{s}"]
            x, lo, hi = _band(band, kappa.size)
            np.testing.assert_allclose(x, kappa)
            np.testing.assert_allclose(lo, cdf["ci_low"].sel(algo=a, setting=s).values)
            np.testing.assert_allclose(hi, cdf["ci_high"].sel(algo=a, setting=s).values)
        (k0,) = [ln for ln in ax.lines if ln.get_gid() == "kappa0"]
        assert k0.get_linestyle() == "--" and list(k0.get_xdata()) == [0.0, 0.0]
        assert ax.get_xlim()[1] == pytest.approx(2.0)
    assert "CDF" in fig.axes[0].get_ylabel()
    assert "kappa" in fig._supxlabel.get_text()
    # the baseline is grey and dashed
    (ppo,) = _by_gid(fig, "line:ppo:train")
    assert to_hex(ppo.get_color()) == to_hex(style.BASELINE_COLOR) and ppo.get_linestyle() == "--"


def test_cdf_full_range_is_figure_a1(maker: FigureMaker):
    fig = maker.figure("cdf", xmax=None)
    assert all(ax.get_xlim()[1] > 2 for ax in fig.axes)
    assert all(ax.get_xscale() == "asinh" for ax in fig.axes)  # smooth: no kink where symlog switched


def test_curves_figure(maker: FigureMaker):
    fig = maker.figure("curves", task="goal")
    bounds = maker.ss["bound"].values
    assert len(fig.axes) == 3 * len(bounds)  # reward, cost, multiplier per bound
    grid = np.array(fig.axes).reshape(3, len(bounds))
    assert METRIC["R"].tex in grid[0, 0].get_ylabel() and METRIC["C"].tex in grid[1, 0].get_ylabel()
    assert "multiplier" in grid[2, 0].get_ylabel()
    tc = curves.training_curves(stats.iterate_metrics(maker.ss, "train"), 5, ("R", "C"))
    for bi, d in enumerate(bounds):
        (bound,) = [ln for ln in grid[1, bi].lines if ln.get_gid() == "bound"]
        assert list(bound.get_ydata()) == [d, d] and bound.get_linestyle() == "--"
        assert not [ln for ln in grid[0, bi].lines if ln.get_gid() == "bound"]
        reward_lines = [ln for ln in grid[0, bi].lines if (ln.get_gid() or "").startswith("line:")]
        assert len(reward_lines) == 4
        (ln,) = [x for x in reward_lines if x.get_gid() == f"line:p3o:goal:{d:g}:R"]
        np.testing.assert_allclose(ln.get_ydata(), tc["R_mean"].sel(algo="p3o", task="goal", bound=d).values)
        # one band per curve: mean +- 1 sigma
        (band,) = _by_gid(fig, f"band:p3o:goal:{d:g}:C", PolyCollection)
        _, lo, hi = _band(band, tc.sizes["iterate"])
        sel = tc.sel(algo="p3o", task="goal", bound=d)
        np.testing.assert_allclose(hi - lo, 2 * sel["C_std"].values)
        # PPO has no multiplier: three multiplier curves
        assert len([x for x in grid[2, bi].lines if (x.get_gid() or "").startswith("line:")]) == 3
    assert "policy iterate" in grid[2, 0].get_xlabel()


def test_hist_figure(maker: FigureMaker):
    fig = maker.figure("hist", task="circle")
    bounds = maker.ss["bound"].values
    assert len(fig.axes) == len(ALGOS) * len(bounds)
    for ax in fig.axes:
        (bound,) = [ln for ln in ax.lines if ln.get_gid() == "bound"]
        assert bound.get_xdata()[0] in bounds
    # the seed-mean shares of each mode sum to 1 (every episode lands in a bin)
    for offset, mode in enumerate(("expl", "greedy")):
        (steps,) = _by_gid(fig, f"hist:p3o:circle:15:{mode}")
        heights, edges = steps.get_data()[:2]
        assert heights.size == 2 * maker.options.bins and edges.size == heights.size + 1
        assert not heights[1 - offset::2].any()  # the other mode's half-bins
        assert heights.sum() == pytest.approx(1.0)
    assert "cost" in fig.axes[-1].get_xlabel()
    legend = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert any("greedy" in t for t in legend) and any("exploration (N = 10" in t for t in legend)


def test_intervals_figure(maker: FigureMaker):
    fig = maker.figure("intervals")
    agg = stats.aggregate_table(maker.ss, boot=BOOT, rng_seed=0)
    assert len(fig.axes) == agg.sizes["setting"] * agg.sizes["metric"]
    for s in agg["setting"].values:
        for a in ALGOS:
            (tier,) = _by_gid(fig, f"tier:{a}:{s}")
            assert tier.get_text() == tier_label(int(agg["tier"].sel(algo=a, setting=s)))
        for m in ("R", "Dnorm"):
            (bar,) = _by_gid(fig, f"ci:{s}:{m}:focops")
            one = agg.sel(algo="focops", setting=s, metric=m)
            assert bar.get_x() == pytest.approx(float(one["ci_low"]))
            assert bar.get_width() == pytest.approx(float(one["ci_high"] - one["ci_low"]))
    titles = [ax.get_title() for ax in fig.axes[: agg.sizes["metric"]]]
    texs = [METRIC[m].tex.replace(r"\alpha", "0.1") for m in agg["metric"].values]  # CVaR says its alpha
    assert all(tex in t for tex, t in zip(texs, titles, strict=True)) and "CVaR}_{0.1}" in titles[-1]


def test_poi_figure(maker: FigureMaker):
    fig = maker.figure("poi")
    pairs = A.poi_pairs(maker.ss["algo"].values, "ppo")
    assert len(pairs) == 6 and all(y != "ppo" or x != "ppo" for x, y in pairs)
    assert all(y == "ppo" for x, y in pairs if "ppo" in (x, y))
    assert len(fig.axes) == 3 * len(stats.METRICS)
    for ax in fig.axes:
        assert [ln.get_xdata()[0] for ln in ax.lines if ln.get_gid() == "half"] == [0.5]
    x, y = pairs[0]
    poi = stats.probability_of_improvement(maker.ss, x, y, boot=BOOT, rng_seed=0)
    (bar,) = _by_gid(fig, f"ci:train:V:{x}:{y}")
    assert bar.get_x() == pytest.approx(float(poi["ci_low"].sel(setting="train", metric="V")))


def test_aggregate_curve_figure(maker: FigureMaker):
    fig = maker.figure("aggregate-curve")
    visible = [ax for ax in fig.axes if ax.axison]
    assert len(visible) == len(stats.METRICS) == len(fig.axes)  # 2 x 3 panels, the legend above them
    curve = aggregate_learning_curve(maker.ss, boot=BOOT, rng_seed=0)
    (band,) = _by_gid(fig, "band:ppo_lag:V", PolyCollection)
    x, lo, hi = _band(band, curve.sizes["iterate"])
    np.testing.assert_allclose(lo, curve["ci_low"].sel(algo="ppo_lag", metric="V").values)
    np.testing.assert_allclose(hi, curve["ci_high"].sel(algo="ppo_lag", metric="V").values)
    assert len(_by_gid(fig, "line:")) == 4 * len(stats.METRICS)
    assert any(METRIC["Dplus"].tex in ax.get_ylabel() for ax in visible)
    assert r"IQM $\text{CVaR}_{0.1}$" in visible[-1].get_ylabel()
    (cvar,) = _by_gid(fig, "band:ppo_lag:CVaR", PolyCollection)
    np.testing.assert_allclose(_band(cvar, curve.sizes["iterate"])[1],
                               curve["ci_low"].sel(algo="ppo_lag", metric="CVaR").values)


def test_colours_fixed_across_figures_and_selections(maker: FigureMaker, small_demo_cube: Path):
    want = style.algo_colors(ALGOS, "ppo")
    assert want["ppo"] == style.BASELINE_COLOR and len(set(want.values())) == 4
    figs = {k: maker.figure(k) for k in ("cdf", "aggregate-curve")}
    figs["curves"] = maker.figure("curves", task="goal")
    for fig in figs.values():
        for ln in _by_gid(fig, "line:p3o"):
            assert to_hex(ln.get_color()) == want["p3o"]
    sub = FigureMaker(small_demo_cube, Selection(algos=("p3o", "ppo_lag")), PlotOptions(boot=20))
    assert sub.colors["p3o"] == want["p3o"] and sub.colors["ppo_lag"] == want["ppo_lag"]


def test_synthetic_mark_and_paper_style(maker: FigureMaker):
    for kind in style.KINDS:
        fig = maker.figure(kind, task="goal") if kind in ("curves", "hist") else maker.figure(kind)
        assert "SYNTHETIC" in _texts(fig), kind
        assert fig.get_figwidth() == pytest.approx(6.75)
    fig = maker.figure("cdf")
    assert fig.axes[0].title.get_fontfamily() == ["serif"]
    real = maker.ss.copy()
    real.attrs["synthetic"] = False
    plain = FigureMaker(maker.source, options=PlotOptions(boot=20), ss=real)
    assert "SYNTHETIC" not in _texts(plain.figure("intervals"))


def test_pdf_embeds_truetype_fonts(maker: FigureMaker, tmp_path: Path):
    out = F.save_figure(maker.figure("cdf"), tmp_path / "cdf.pdf")
    data = out.read_bytes()
    assert data.startswith(b"%PDF") and b"/FontFile2" in data and b"/Type3" not in data
    svg = F.save_figure(maker.figure("cdf"), tmp_path / "cdf.svg")
    assert b"<svg" in svg.read_bytes()[:500]


def test_plot_all_writes_every_file(small_demo_cube: Path, tmp_path: Path, capsys):
    out = tmp_path / "figs"
    rc = main(["plot", str(small_demo_cube), "all", "--out", str(out), "--boot", "50", "--baseline", "ppo",
               "--format", "png", "--style", "screen"])
    assert rc == 0
    want = {"cdf.png", "cdf_full.png", "curves_goal.png", "curves_circle.png", "hist_goal.png", "hist_circle.png",
            "intervals.png", "poi.png", "aggregate_curve.png", "profile.png", "front.png", "aggregate_curve.csv"}
    assert {p.name for p in out.iterdir()} == want
    assert all((out / n).stat().st_size > 1000 for n in want)
    assert (out / "cdf.png").read_bytes()[:4] == b"\x89PNG"
    assert "wrote 12 files" in capsys.readouterr().out


def test_plot_single_kinds_and_curve_data(small_demo_cube: Path, tmp_path: Path, capsys):
    rc = main(["plot", str(small_demo_cube), "cdf", "--out", str(tmp_path / "f2.pdf"), "--boot", "20",
               "--algo", "ppo_lag,p3o", "--xmax", "none"])
    assert rc == 0 and (tmp_path / "f2.pdf").read_bytes()[:4] == b"%PDF"
    rc = main(["plot", str(small_demo_cube), "aggregate-curve", "--out", str(tmp_path / "c.csv"), "--boot", "20"])
    assert rc == 0
    assert (tmp_path / "c.csv").read_text().startswith("algo,metric,iterate,value,ci_low,ci_high,n_conditions")
    capsys.readouterr()


@pytest.mark.parametrize(("args", "msg"), [
    (["cdf", "--out", "x.txt"], "cannot tell the format"),
    (["cdf", "--baseline", "nope"], "--baseline nope"),
    (["cdf", "--algo", "nope"], "unknown algo"),
    (["cdf", "--xmax", "abc"], "--xmax"),
    (["poi", "--pair", "ppo"], "--pair"),
])
def test_plot_errors_are_one_line(small_demo_cube: Path, tmp_path: Path, capsys, monkeypatch, args, msg):
    monkeypatch.chdir(tmp_path)
    out = [] if "--out" in args else ["--out", str(tmp_path / "x.pdf")]
    rc = main(["plot", str(small_demo_cube), *args, *out, "--boot", "10"])
    err = capsys.readouterr().err
    assert rc == 2 and "error:" in err and msg in err
    assert "Traceback" not in err


def test_missing_matplotlib_says_how_to_install(small_demo_cube: Path, tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    rc = main(["plot", str(small_demo_cube), "cdf", "--out", str(tmp_path / "x.pdf")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "matplotlib is not installed; pip install 'saferl[plot]'" in err
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1
    with pytest.raises(style.MatplotlibMissing):
        style.require_matplotlib()


def test_figure_for_view_writes_next_to_the_cube(small_demo_cube: Path, tmp_path: Path):
    import shutil

    cube = tmp_path / "c.zarr"
    shutil.copytree(small_demo_cube, cube)
    ss = stats.load_suffstats(cube)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = exports.figure_for_view("histograms", cube, Selection(algos=("ppo_lag", "focops")), ss=ss,
                                condition=("goal", 25.0), options=PlotOptions(boot=20))
    assert out == tmp_path / "c-figures" / "hist_goal_d25.pdf" and out.read_bytes()[:4] == b"%PDF"
    with pytest.raises(CubeError, match="no figure for view"):
        exports.figure_for_view("nonsense", cube)


def test_tui_and_figures_give_every_algorithm_the_same_colour(maker: FigureMaker) -> None:
    """One palette: the colour a figure draws an algorithm in is the colour the TUI shows it in (the
    figure's baseline aside, which figures draw grey)."""
    from matplotlib.colors import to_rgb

    from saferl_tui.views.format import algo_palette

    tui = algo_palette(maker.all_algos)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig = maker.figure("cdf")
    for a in maker.all_algos:
        (line,) = _by_gid(fig, f"line:{a}:train")
        drawn = tuple(round(255 * c) for c in to_rgb(line.get_color()))
        if a == maker.options.baseline:
            assert drawn == tuple(round(255 * c) for c in to_rgb(style.BASELINE_COLOR))
        else:
            assert drawn == tui[a], a
    assert len(set(tui.values())) == len(tui)  # distinct colours


def _means_only_cube(path: Path) -> Path:
    """Two algorithms x one condition x 3 seeds whose train "episodes" are per-epoch means (an import)."""
    from cube import CubeWriter, RunKey, create_store

    create_store(path, algos=["a", "b"], tasks=["t"], bounds=[10.0], seeds=range(3), n_iterates=4, n_episodes=1,
                 means_only_flags=True)
    writer = CubeWriter(path)
    rng = np.random.default_rng(0)
    for algo in ("a", "b"):
        for seed in range(3):
            key = RunKey(algo, "t", 10.0, seed)
            for j in range(4):
                writer.write_episodes(key, "train", j, rng.normal(5, 1, 1), rng.gamma(2.0, 5.0, 1))
            writer.set_means_only(key, "train")
            writer.set_run_manifest(key, status="complete")
    return path


def test_means_only_cubes_say_not_available_on_the_figure_and_the_terminal(tmp_path: Path, capsys) -> None:
    cube = _means_only_cube(tmp_path / "means.zarr")
    out = tmp_path / "cdf.png"
    assert main(["plot", str(cube), "cdf", "--out", str(out), "--boot", "20"]) == 0
    err = capsys.readouterr().err
    assert "not available" in err and "means of several episodes" in err and err.count("\n") >= 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        maker = FigureMaker(cube, options=PlotOptions(boot=20))
        for kind in ("cdf", "intervals", "aggregate-curve"):
            notes = [t for t in _by_gid(maker.figure(kind), "not-available") if "means only" in t.get_text()]
            assert notes, kind  # the empty panels (CDF; V and D_norm+) say why


@pytest.mark.parametrize("width_in", [3.25, 7.0])
def test_the_legend_fits_the_figure_width(width_in: float) -> None:
    """A one-panel figure (a column of a two-column paper, 234 pt) wraps its legend into more rows instead
    of cutting entries at both edges; a wide one keeps one row."""
    from matplotlib.lines import Line2D

    from cube.render.canvas import legend, new_figure

    algos = ["ppo", "ppo_lag", "p3o", "focops"]
    colors = style.algo_colors(algos)
    with style.styled("paper"):
        fig = new_figure("paper", width_in, 2.4)
        fig.add_subplot().plot([0, 1], [0, 1])
        extra = [(Line2D([], [], color="k"), "front (filled: on it; number: P(front))")]
        legend(fig, algos, colors, extra, baseline="ppo")
        fig.draw_without_rendering()
        box = fig.legends[0].get_window_extent()
        assert len(fig.legends) == 1
        assert box.x0 >= 0 and box.x1 <= fig.bbox.width, (box, fig.bbox.width)
        rows = {round(t.get_window_extent().y0) for t in fig.legends[0].get_texts()}
        assert (len(rows) > 1) == (width_in < 5), rows
