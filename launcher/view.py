"""How the CLI shows things: a live stage table per host on a terminal (plain lines off it),
tables, the leaderboard. Only the CLI uses this module; core modules report through a Reporter."""
from __future__ import annotations

import threading
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from launcher import runfiles
from launcher.progress_lines import describe, epoch_lines, search_summary
from launcher.report import values
from launcher.text import clock, printable
from trainer.spec import results

UNWRAPPED = 100_000     # columns off a terminal: nothing is cut or wrapped, whatever COLUMNS says
THIS_MACHINE = "this machine"   # the row of work done here (no host is called so: a name has no space)
LOCAL_LINE_S = 10.0     # off a terminal, a line about work here at most this often
HARDWARE_EVERY_S = 30   # off a terminal, a host's hardware line at most this often


def _console(stderr: bool) -> Console:
    """On a terminal, its width; off one (a log file, CI, nohup), tables and lines print whole."""
    on_terminal = Console(stderr=stderr).is_terminal
    return Console(stderr=stderr, highlight=False, width=None if on_terminal else UNWRAPPED)


out, err = _console(False), _console(True)


def say(text: str) -> None:
    """A line for the user on stdout; what came from a host or a file made safe to print."""
    out.print(printable(text), markup=False, soft_wrap=True)


def shout(text: str) -> None:
    """A warning or an error on stderr, made safe to print the same way."""
    err.print(printable(text), markup=False, soft_wrap=True)


def table(title: str, columns: list[str], rows: list[list[str]], box=None, **column_kw) -> Table:
    """Cells are literal text: what hosts send holds [brackets] that are not rich markup."""
    t = Table(title=printable(title), **({"box": box} if box else {}))
    for column in columns:
        t.add_column(column, **{"overflow": "fold", **column_kw.get(column, {})})
    for row in rows:
        t.add_row(*(Text(printable(str(cell))) for cell in row))
    return t


class RichReporter:
    """Each host's stage and training progress: a live table with a bar per host on a terminal;
    off it, plain lines: one per change of stage and one per finished epoch, no control characters."""

    def __init__(self, hosts: list[str]):
        from rich.live import Live
        self.stages = {h: ("waiting", "") for h in hosts}
        self.bars: dict[str, tuple] = {}
        self.sending: dict[str, float] = {}     # host → fraction of a transfer under way
        self.search_line = ""                   # the search's progress, as one line
        self.whole = None                       # a parallel search's progress (trainer/spec/progress.SearchProgress)
        self.here: tuple[float, str] | None = None   # work on this machine the hosts wait for: (fraction, text)
        self.hardware: dict[str, str] = {}      # host → its telemetry line (launcher/telemetry)
        self._printed: dict[str, tuple] = {}
        self.live = Live(self._table(), console=out, refresh_per_second=4, transient=False) if out.is_terminal else None
        self._lock = threading.Lock()

    def _table(self) -> Table:
        from rich.progress_bar import ProgressBar
        t = Table(show_header=True, header_style="bold")
        hardware = ("hardware",) if self.hardware else ()
        for column in ("host", "stage", "search", "detail", *hardware):
            t.add_column(column, overflow="fold")
        for host, (stage, detail) in self.stages.items():
            p, text = self.bars.get(host, (None, ""))
            done = p.fraction if p else self.sending.get(host)
            bar = ProgressBar(total=1.0, completed=done, width=20) if done is not None else Text("")
            t.add_row(Text(host), Text(stage), bar, Text(printable(text or detail)),
                      *[Text(self.hardware.get(host, "")) for _ in hardware])
        if self.search_line:
            t.add_row(Text("all"), Text("search"), Text(""), Text(self.search_line), *[Text("") for _ in hardware])
        if self.here:
            t.add_row(Text(THIS_MACHINE), Text("image"), ProgressBar(total=1.0, completed=self.here[0], width=20),
                      Text(self.here[1]), *[Text("") for _ in hardware])
        return t

    def stage(self, host: str, stage: str, detail: str = "") -> None:
        stage, detail = printable(stage), printable(detail)
        with self._lock:
            if self.stages.get(host) == (stage, detail):
                return
            self.stages[host] = (stage, detail)
            self.sending.pop(host, None)
            if self.live:
                self.live.update(self._table())
            elif self._printed.get(host) != (stage, _without_clock(detail)):
                self._printed[host] = (stage, _without_clock(detail))
                say(f"{host}: {stage}" + (f" ({detail})" if detail else ""))

    def progress(self, host: str, progress, restarts: int = 0) -> None:
        with self._lock:
            eta = self.whole.host_eta_seconds(host) if self.whole is not None and progress.scope == "host" else None
            self.bars[host] = (progress, printable(describe(progress, restarts, eta)))
            if progress.search:
                self._say_search(search_summary(progress.search), progress.eta_seconds())
            if self.live:
                self.live.update(self._table())
                return
            # A restarted search counts its epochs again: start over after a restart.
            mark, seen_restarts = self._printed.get(f"{host}/epoch", ((0, 0), 0))
            now_restarts = max(restarts, progress.restarts)
            lines, mark = epoch_lines(progress, mark if now_restarts == seen_restarts else (0, 0), restarts, eta)
            self._printed[f"{host}/epoch"] = (mark, now_restarts)
            for line in lines:
                say(f"{host}: {line}")

    def search(self, whole) -> None:
        """A parallel search's progress, from the chief's queue (trainer/spec/progress.SearchProgress)."""
        with self._lock:
            self.whole = whole
            self._say_search(search_summary(whole.summary()) + (f" ({whole.note})" if whole.note else ""),
                             whole.eta_seconds())
            if self.live:
                self.live.update(self._table())

    def _say_search(self, summary: str, eta) -> None:
        """The search line: on a terminal with its ETA; off it, a line when the counts change."""
        summary = printable(summary)
        self.search_line = summary + (f"; ETA {clock(eta)}" if eta is not None else "")
        if not self.live and summary != self._printed.get("search"):
            self._printed["search"] = summary
            say(f"search: {self.search_line}")

    def transfer(self, host: str, what: str, done: int, total: int, elapsed_s: float) -> None:
        """On a terminal, the host's row shows bytes, rate and ETA; off it, transfers stay quiet."""
        if self.live:
            from launcher.reporter import transfer_detail
            with self._lock:
                self.stages[host] = (self.stages.get(host, ("", ""))[0], transfer_detail(what, done, total, elapsed_s))
                self.sending[host] = min(done / total, 1.0) if total else 0.0
                self.live.update(self._table())

    def local(self, what: str, done: int, total: int, elapsed_s: float) -> None:
        """Work here the hosts wait for: a row of its own with a bar on a terminal; off it, a whole
        line at most every LOCAL_LINE_S seconds, and one when it ends."""
        from launcher.reporter import rate_detail
        text = printable(f"{what}: {rate_detail(done, total, elapsed_s)}")
        with self._lock:
            if self.live:       # the row goes once the work is done: the hosts' rows go on from there
                self.here = (min(done / total, 1.0), text) if done < total else None
                self.live.update(self._table())
                return
            last = self._printed.get(f"{THIS_MACHINE}/{what}")
            if done >= total or last is None or elapsed_s - last >= LOCAL_LINE_S:
                self._printed[f"{THIS_MACHINE}/{what}"] = elapsed_s
                say(f"{THIS_MACHINE}: {text}")

    def telemetry(self, host: str, line: str) -> None:
        """A host's hardware now: a column of the live table; off a terminal a line at most every
        HARDWARE_EVERY_S (the warnings come at once, through `warn`)."""
        import time
        line = printable(line)
        with self._lock:
            self.hardware[host] = line
            if self.live:
                self.live.update(self._table())
            elif time.monotonic() - self._printed.get(f"{host}/hardware", (-1e9,))[0] >= HARDWARE_EVERY_S:
                self._printed[f"{host}/hardware"] = (time.monotonic(),)
                say(f"{host}: hardware: {line}")

    def warn(self, host: str | None, message: str) -> None:
        shout(f"warning: {host + ': ' if host else ''}{message}")

    def __enter__(self):
        if self.live:
            self.live.start()
        return self

    def __exit__(self, *exc):
        if self.live:
            self.live.stop()


def _without_clock(detail: str) -> str:
    """A `run:` program's detail without its running clock: off a terminal, a line per new log line."""
    import re
    return re.sub(r"^\d+:\d\d:\d\d since the start; ", "", detail)


def up_table(cluster, report) -> Table:
    def dataset(host: str) -> list[str]:
        if not report.datasets:
            return []
        return [report.datasets[host].summary() if host in report.datasets else "no data_dir"]
    rows = [[h.name, f"{report.bytes_pushed[h.name]:,} B", report.images[h.name].summary(), *dataset(h.name),
             report.started[h.name]] for h in cluster.hosts]
    columns = ["host", "bundle sent", "image"] + (["dataset"] if report.datasets else []) + ["container"]
    return table(f"cluster {cluster.name}, run {report.run_id}", columns, rows)


def status_table(cluster, states) -> Table:
    rows = [[st.host, st.state, "" if st.exit_code is None else st.exit_code,
             "" if st.uptime_s is None else f"{st.uptime_s:.0f} s", st.restarts, st.run, st.last_line or st.error]
            for st in states]
    return table(f"cluster {cluster.name}", ["host", "state", "exit", "uptime", "restarts", "run", "last progress"], rows)


def leases_table(states) -> Table:
    """Every lease on every host, this cluster's and others', live or stale (status.HostStatus.leases):
    `its host` is the holder's name for the machine; hosts on one machine list the same leases."""
    rows = [[st.host, lease["cluster"] + (" (this cluster)" if lease["own"] else ""), lease["host"], lease["owner"],
             lease["run"] or "-", lease["launcher"], lease["since"], lease["gpus"], lease["ports"], lease["state"]]
            for st in states for lease in st.leases]
    waiting = list(dict.fromkeys(w for st in states for w in st.waiting))
    title = "leases" + ("" if rows else ": none") + (f"; waiting (`up --queue`): {'; '.join(waiting)}" if waiting else "")
    return table(title, ["host", "cluster", "its host", "user", "run", "from", "since", "GPUs", "ports", "state"], rows)


def leaderboard(run_dir: Path) -> Table | None:
    if not runfiles.is_file(run_dir, runfiles.RESULTS):
        return None
    try:
        rows = results.ranked(runfiles.load_results(run_dir)["candidates"])
    except results.ResultsError:
        return None
    from launcher.telemetry.live import trial_columns
    hardware, figures = trial_columns(rows)         # GPU-hours, utilisation, energy, CPU-hours (telemetry)
    cells = [[i, r["candidate"], f"{r['val_accuracy']:.4f}", f"{r['val_loss']:.4f}", f"{r['train_seconds']:.1f}",
              f"{r['images_per_second']:.0f}", f"{r['params']:,}", *more, r.get("host", ""), values.state_text(r)]
             for (i, r), more in zip(enumerate(rows, start=1), figures)]
    columns = ["rank", "trial", "val_acc", "val_loss", "train s", "img/s", "params", *hardware, "host", "state"]
    searched = values.texts(rows)           # the values that won (and lost), beside each trial
    if any(searched):
        columns.insert(2, "values")
        for row, text in zip(cells, searched):
            row.insert(2, text)
    # Trial names whole (up to 22 characters) before any other column folds, but no wider than the
    # longest; no lines between the columns: eleven columns then fit a terminal of 120 columns (132 before).
    trial_width = min(22, max(len(printable(r["candidate"])) for r in rows)) if rows else None
    kw = {c: {"justify": "left" if c in ("trial", "values", "host") else "right", "overflow": "fold",
              "min_width": trial_width if c == "trial" else None} for c in columns}
    return table(f"leaderboard: {run_dir}", columns, cells, box=box.SIMPLE_HEAD, **kw)


def lost_trials(run_dir: Path) -> list[str]:
    """After a parallel search: each host the chief stopped hearing from, and where its trial went."""
    try:
        doc = runfiles.load_results(run_dir)
    except results.ResultsError:
        return []
    retried = {r["candidate"]: r for r in doc["candidates"] if r.get("state") == "retried"}
    lines = []
    for host, retries in doc.get("search", {}).get("lost", {}).items():
        for name in retries:
            lost = next((r["candidate"] for r in retried.values() if r.get("retried_as") == name), name.split("~")[0])
            lines.append(printable(f"{host} stopped answering the chief's queue: its trial {lost} went to another host as {name}"))
    return lines


def log_line_printer(hosts: list[str]):
    """`host | line`, the host coloured on a terminal (as docker compose logs does)."""
    colours = ["cyan", "yellow", "green", "magenta", "blue", "red", "bright_cyan", "bright_yellow"]
    width = max(len(h) for h in hosts)
    style = {h: colours[i % len(colours)] for i, h in enumerate(hosts)}

    def emit(host: str, line: str) -> None:
        prefix = f"{host.ljust(width)} | "
        if out.is_terminal:
            out.print(Text(prefix, style=style.get(host, "")) + Text(printable(line)), soft_wrap=True)
        else:
            print(prefix + printable(line), flush=True)
    return emit
