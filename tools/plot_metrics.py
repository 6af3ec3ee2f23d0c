#!/usr/bin/python3
"""Plots the curves of one or more runs from their metrics.jsonl (the `metrics` hook).

  tools/plot_metrics.py WORK_DIR [WORK_DIR...] [--label NAME...] [-o FILE.png]

Panels, each present when some run has the data: train loss against
iterations (raw, faint, and smoothed like TensorBoard's EMA, --smooth), the
learning rate, every val/ and test/ metric against iterations (top axis in
epochs for epoch-based runs), step time (time, data_time), throughput (any
of throughput, samples/s, samples_per_s, tokens/s, tokens_per_s) and every
other train scalar (grad_norm, memory_mb, ...).
Several work_dirs overlay, one colour each, labelled by --label (one per
work_dir) or the work_dir's name. A WORK_DIR may also be the .jsonl file.
Writes FILE.png (default: WORK_DIR/metrics.png of the first run).

Uses Debian's python3-matplotlib with the Agg backend (no display needed),
hence /usr/bin/python3 rather than whatever python3 is first on PATH.
"""
import argparse
import json
import math
import os
import sys

THROUGHPUT_KEYS = ("throughput", "samples/s", "samples_per_s", "tokens/s", "tokens_per_s")
STEP_TIME_KEYS = ("time", "data_time")
FIXED_KEYS = ("mode", "epoch", "iter")


class UsageError(Exception):
    pass


def metrics_path(work_dir):
    if os.path.isfile(work_dir) and work_dir.endswith(".jsonl"):
        return work_dir
    path = os.path.join(work_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        raise UsageError("%s: no such file (is %s the work_dir of a run with the `metrics` hook?)"
                         % (path, work_dir))
    return path


def load_run(path):
    """Rows by mode: {"train": [...], "val": [...], "test": [...]}."""
    rows = {"train": [], "val": [], "test": []}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise UsageError("%s:%d: not a JSON object: %s" % (path, n, e))
            if not isinstance(row, dict) or row.get("mode") not in rows or "iter" not in row:
                raise UsageError("%s:%d: not a metrics line (needs mode train/val/test and iter)"
                                 % (path, n))
            rows[row["mode"]].append(row)
    if not any(rows.values()):
        raise UsageError("%s: no metrics lines" % path)
    return rows


def series(rows, key):
    """(iterations, values) of `key`, skipping lines without it and nulls (NaN/inf)."""
    xs, ys = [], []
    for row in rows:
        value = row.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            xs.append(row["iter"])
            ys.append(float(value))
    return xs, ys


def smooth(values, weight):
    """TensorBoard's scalar smoothing: a debiased exponential moving average."""
    out, last, debias = [], 0.0, 0.0
    for v in values:
        last = last * weight + (1 - weight) * v
        debias = debias * weight + (1 - weight)
        out.append(last / debias)
    return out


def iters_per_epoch(rows):
    """For epoch-based runs: iterations per epoch from the val/test lines, else None."""
    for row in rows["val"] + rows["test"]:
        if row.get("epoch", 0) > 0:
            return row["iter"] / row["epoch"]
    return None


def eval_keys(runs, mode):
    keys = []
    for rows in runs:
        for row in rows[mode]:
            for key in row:
                if key not in FIXED_KEYS and key not in keys:
                    keys.append(key)
    return keys


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work_dirs", nargs="+", metavar="WORK_DIR")
    parser.add_argument("--label", nargs="+", default=None, metavar="NAME",
                        help="one name per WORK_DIR (default: the work_dir's name)")
    parser.add_argument("-o", "--output", default=None, metavar="FILE.png")
    parser.add_argument("--smooth", type=float, default=0.9,
                        help="EMA weight of the smoothed loss, 0 <= w < 1 (default 0.9)")
    args = parser.parse_args(argv)
    if args.label is not None and len(args.label) != len(args.work_dirs):
        raise UsageError("%d --label names for %d work_dirs" % (len(args.label), len(args.work_dirs)))
    if not 0 <= args.smooth < 1:
        raise UsageError("--smooth must be in [0, 1), got %r" % args.smooth)

    paths = [metrics_path(w) for w in args.work_dirs]  # every error before any plotting
    runs = [load_run(p) for p in paths]
    labels = args.label or [os.path.basename(os.path.normpath(w)) or w for w in args.work_dirs]
    output = args.output or os.path.join(os.path.dirname(paths[0]), "metrics.png")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise UsageError("%s: matplotlib is not importable (%s): install python3-matplotlib "
                         "(tools/install-deps.sh) and run with /usr/bin/python3"
                         % (sys.executable, e))

    # Each panel: (title, y label, [(run index, key, kind)]) drawn by draw().
    panels = []
    if any(series(r["train"], "loss")[0] for r in runs):
        panels.append(("train loss", "loss", "loss", "train"))
    if any(series(r["train"], "lr")[0] for r in runs):
        panels.append(("learning rate", "lr", "lr", "train"))
    for mode in ("val", "test"):
        for key in eval_keys(runs, mode):
            panels.append(("%s/%s" % (mode, key), key, key, mode))
    if any(series(r["train"], k)[0] for r in runs for k in STEP_TIME_KEYS):
        panels.append(("step time", "seconds", STEP_TIME_KEYS, "train"))
    if any(series(r["train"], k)[0] for r in runs for k in THROUGHPUT_KEYS):
        panels.append(("throughput", "per second", THROUGHPUT_KEYS, "train"))
    # Any other train scalar (grad_norm, memory_mb, what a strategy adds).
    drawn = ("loss", "lr") + STEP_TIME_KEYS + THROUGHPUT_KEYS
    for key in eval_keys(runs, "train"):
        if key not in drawn:
            panels.append(("train " + key, key, key, "train"))
    if not panels:
        raise UsageError("%s: no loss, lr, val/test metric, step time or throughput to plot"
                         % ", ".join(paths))

    columns = 2 if len(panels) > 1 else 1
    rows_n = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows_n, columns, figsize=(6.4 * columns, 3.6 * rows_n), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (title, ylabel, keys, mode) in zip(axes.flat, panels):
        for i, rows in enumerate(runs):
            color = colors[i % len(colors)]
            if keys == "loss" and mode == "train":
                xs, ys = series(rows["train"], "loss")
                if xs:
                    ax.plot(xs, ys, color=color, alpha=0.25, linewidth=0.8)
                    ax.plot(xs, smooth(ys, args.smooth), color=color, linewidth=1.6,
                            label="%s (smoothed %.2g)" % (labels[i], args.smooth))
            elif isinstance(keys, tuple):
                styles = ["-", "--", ":", "-."]
                for k, key in enumerate(keys):
                    xs, ys = series(rows["train"], key)
                    if xs:
                        ax.plot(xs, ys, color=color, linestyle=styles[k % len(styles)],
                                linewidth=1.0, label="%s %s" % (labels[i], key))
            else:
                xs, ys = series(rows[mode], keys)
                if xs:
                    ax.plot(xs, ys, color=color, marker="o" if mode != "train" else None,
                            markersize=3, linewidth=1.4, label=labels[i])
                    if mode != "train" and len(runs) == 1:
                        ax.annotate("%.4g" % ys[-1], (xs[-1], ys[-1]), textcoords="offset points",
                                    xytext=(0, -14), ha="center", fontsize=8)
        ax.set_title(title)
        ax.set_xlabel("iteration")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        if title == "learning rate":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
        ipe = iters_per_epoch(runs[0])
        if mode in ("val", "test") and ipe:
            top = ax.secondary_xaxis("top", functions=(lambda x, ipe=ipe: x / ipe,
                                                       lambda e, ipe=ipe: e * ipe))
            top.set_xlabel("epoch")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(" vs ".join(labels) if len(labels) > 1 or args.label
                 else "%s (%s)" % (labels[0], paths[0]))
    fig.tight_layout()
    try:
        fig.savefig(output, dpi=110)
    except OSError as e:
        raise UsageError("%s: cannot write: %s" % (output, e.strerror or e))
    print("plot_metrics: wrote %s (%d panels, %d run%s)"
          % (output, len(panels), len(runs), "s" if len(runs) > 1 else ""))


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except UsageError as e:
        print("plot_metrics: error: %s" % e, file=sys.stderr)
        sys.exit(2)
