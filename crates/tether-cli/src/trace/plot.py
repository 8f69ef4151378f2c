# Draws `tether trace summary --plot`: the data (JSON on stdin) are the
# waiting matrix (share of each program's time spent waiting, by the
# program waited for) and every wait of every process; the PNG is argv[1].
import json
import sys

try:
    import matplotlib
except ImportError:
    sys.exit("matplotlib is missing (pip install matplotlib, or make deps)")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

data = json.load(sys.stdin)
programs, ids, matrix = data["programs"], data["ids"], data["matrix"]
columns = programs + ["(unknown)"]
colour = {pid: plt.cm.tab10(i % 10) for i, pid in enumerate(ids)}
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 1.8 + 0.45 * max(len(programs), len(data["processes"]))),
                                  gridspec_kw={"width_ratios": [1, 2]})
left.imshow(matrix, cmap="Reds", vmin=0, vmax=100, aspect="auto")
left.set_xticks(range(len(columns)), columns, rotation=30, ha="right")
left.set_yticks(range(len(programs)), programs)
left.set_xlabel("waited for")
left.set_ylabel("waiting")
left.set_title("share of time spent waiting")
for r, row in enumerate(matrix):
    for c, value in enumerate(row):
        left.text(c, r, f"{value:.0f}%", ha="center", va="center", fontsize=9,
                  color="white" if value > 50 else "black")
rows = {name: i for i, name in enumerate(data["processes"])}
for w in data["waits"]:
    right.broken_barh([(w["start_ms"], max(w["ms"], 0.01))], (rows[w["process"]] - 0.4, 0.8),
                      color=colour.get(w["on"], "lightgray"))
right.set_yticks(range(len(rows)), list(rows))
right.invert_yaxis()
right.set_xlabel("ms since the first span (universe rank 0's clock)")
right.set_title("waits, coloured by the program waited for")
handles = [matplotlib.patches.Patch(color=colour[pid], label=name) for pid, name in zip(ids, programs)]
handles.append(matplotlib.patches.Patch(color="lightgray", label="(unknown)"))
right.legend(handles=handles, fontsize=8, loc="upper right")
fig.tight_layout()
fig.savefig(sys.argv[1], dpi=110)
