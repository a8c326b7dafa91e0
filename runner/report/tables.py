"""The report's tables, each one list of columns that both templates lay out (report.md.j2 and report.html.j2
render any `Table` with one macro each). Pure: the cells are text, with what HTML styles (bold, a link to a
configuration's section, a status) marked on them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from runner.model import BaselineResult, Step
from runner.report import formatting as fmt
from runner.report.fleet import FleetRow
from runner.report.profiles import ConnectionCost, ProfileComparison, ProfileRow
from runner.report.rows import ConfigRow, EnvRow, FixedLoad, StepRow, anchor
from runner.report.series import Rate, Ratio, Series
from runner.report.sizing import Recommendation

__all__ = ["Cell", "Column", "Table", "fleet_table", "knee_table", "ratio_table", "series_table", "step_table", "table"]

T = TypeVar("T")


@dataclass(frozen=True)
class Cell:
    """One cell's text; `strong`, `link` (an anchor on the page) and `status` (a configuration's status) are
    how the HTML shows it, the Markdown shows the text."""

    text: str
    strong: bool = False
    link: str | None = None
    status: str | None = None


@dataclass(frozen=True)
class Column(Generic[T]):
    """A column: its header, whether it holds numbers (right-aligned), and its cell for one item."""

    header: str
    cell: Callable[[T], Cell | str]
    numeric: bool = True


@dataclass(frozen=True)
class Row:
    cells: tuple[Cell, ...]
    css: str = ""  # the HTML row's class: "limit" for a window at or past the threshold


@dataclass(frozen=True)
class Header:
    text: str
    numeric: bool


@dataclass(frozen=True)
class Table:
    """A table ready to lay out: `id` and `css` are the HTML table's id and class."""

    id: str
    headers: tuple[Header, ...]
    rows: tuple[Row, ...]
    css: str = ""


def table(
    id_: str,
    columns: Sequence[Column[T]],
    items: Iterable[T],
    *,
    css: str = "",
    row_css: Callable[[T], str] | None = None,
) -> Table:
    """The items laid out in the columns; `row_css(item)` gives each row's HTML class."""

    def cells(item: T) -> tuple[Cell, ...]:
        return tuple(c if isinstance(c, Cell) else Cell(c) for c in (column.cell(item) for column in columns))

    rows = tuple(Row(cells(item), row_css(item) if row_css else "") for item in items)
    return Table(id_, tuple(Header(c.header, c.numeric) for c in columns), rows, css)


def _status(status: str) -> Cell:
    return Cell(status, status=status)


def series_table(series: Series) -> Table:
    """The knee and knee per core at each CPU limit of the sizing series, each against the smallest limit."""
    ratios = dict(series.scaling.per_core)
    smallest = fmt.cpu(series.smallest.cores)

    def ratio(rate: Rate) -> Ratio | None:
        return ratios.get(rate.cores)

    def per_core_interval(rate: Rate) -> str:
        interval = rate.per_core_interval
        return fmt.interval(*interval) if interval else "-"

    columns: list[Column[Rate]] = [
        Column("Envoy CPU", lambda r: Cell(fmt.cpu(r.cores), link=anchor(r.config))),
        Column("Sized from", lambda r: r.source, numeric=False),
        Column("RPS", lambda r: Cell(fmt.rps(r.rps), strong=True)),
        Column("95% CI", lambda r: fmt.interval(r.low, r.high) if r.source == "knee" else "-"),
        Column("RPS per core", lambda r: Cell(fmt.rps(r.per_core), strong=True)),
        Column("95% CI per core", per_core_interval),
        Column(f"Per core vs {smallest}", lambda r: fmt.times(x.value) if (x := ratio(r)) else fmt.times(1.0)),
        Column("95% CI of the ratio", lambda r: fmt.interval(x.low, x.high) if (x := ratio(r)) else "-"),
        Column("Interval from", lambda r: r.interval_source, numeric=False),
    ]
    return table("series-table", columns, series.rates)


def ratio_table(ratios: Sequence[Ratio]) -> Table:
    """Ratios between configurations measured in the same run, with their intervals."""
    columns: list[Column[Ratio]] = [
        Column("Figure", lambda r: r.label, numeric=False),
        Column("Ratio", lambda r: Cell(fmt.times(r.value), strong=True)),
        Column("95% CI", lambda r: fmt.interval(r.low, r.high)),
        Column("From", lambda r: r.source, numeric=False),
        Column("Compared", lambda r: r.compared, numeric=False),
    ]
    return table("ratio-table", columns, ratios)


def knee_table(rows: Sequence[ConfigRow]) -> Table:
    """Every configuration: resources, knee with its interval and source, per core, capacity, status."""
    several = {axis: len({key(r) for r in rows}) > 1 for axis, key in _AXES.items()}
    columns: list[Column[ConfigRow]] = [Column("Envoy CPU", lambda r: Cell(fmt.cpu(r.cpu_cores), link=r.anchor))]
    columns += [Column("Profile", lambda r: r.profile, numeric=False)] if several["profile"] else []
    columns += [Column("Arrivals", lambda r: r.config.arrivals, numeric=False)] if several["arrivals"] else []
    columns += [Column("Pods", lambda r: str(r.config.envoy.replicas))] if several["pods"] else []
    columns += [
        Column("Memory", lambda r: r.config.envoy.memory),
        Column("Concurrency", lambda r: fmt.concurrency(r.config.envoy.concurrency, r.config.envoy.threads)),
        Column("nginx replicas", lambda r: str(r.config.backend.replicas)),
    ]
    columns += [Column("Contour", lambda r: r.contour, numeric=False)] if any(r.contour != "-" for r in rows) else []
    columns += [
        Column("Knee RPS", lambda r: Cell(fmt.rps(r.knee.rps if r.knee else None), strong=True)),
        Column("95% CI", lambda r: fmt.interval(r.knee.low, r.knee.high) if r.knee else "-"),
        Column("Interval from", _interval_from, numeric=False),
        Column("RPS per core", lambda r: fmt.rps(r.config.knee_per_core)),
        Column("CPU per request", lambda r: fmt.microseconds(r.cpu_per_request_us)),
        Column("Capacity RPS", _capacity),
        Column("Capacity over knee", lambda r: fmt.signed_share(r.config.capacity_over_knee)),
        Column("Status", lambda r: _status(r.config.status), numeric=False),
        Column("Reason", lambda r: r.config.reason or "", numeric=False),
    ]
    return table("knee-table", columns, rows)


_AXES: dict[str, Callable[[ConfigRow], str]] = {
    "profile": lambda r: r.profile,
    "arrivals": lambda r: r.config.arrivals,
    "pods": lambda r: str(r.config.envoy.replicas),
}


def _interval_from(row: ConfigRow) -> str:
    knee = row.knee
    return fmt.interval_source(knee) if knee is not None else "-"


def _capacity(row: ConfigRow) -> str:
    """ "1,280 (<1,330)": served up to the first figure, broken at the second; "-" when not measured."""
    capacity = row.capacity
    if capacity is None:
        return "-"
    return fmt.rps(capacity.rps) + (f" (<{fmt.rps(capacity.broken_at)})" if capacity.broken_at else " (not broken)")


def step_table(row: ConfigRow, rounds: bool) -> Table:
    """One configuration's windows by offered load, with each window's regime and, with rounds, its round."""
    columns: list[Column[StepRow]] = [Column("Step", lambda s: str(s.number))]
    columns += [Column("Round", lambda s: s.window, numeric=False)] if rounds else []
    columns += [
        Column("Users", lambda s: str(s.step.users)),
        Column("Offered RPS", lambda s: fmt.rps(s.step.target_rps)),
        Column("RPS", lambda s: Cell(fmt.rps(s.step.rps), strong=True)),
        Column("Envoy RPS", lambda s: fmt.rps(s.step.envoy_rps)),
        Column("CPU utilization", lambda s: s.cpu_range),
    ]
    if any(len(s.step.pods) > 1 for s in row.steps):  # the window's CPU is its busiest pod's: each pod's beside it
        columns.append(Column("Each pod", _each_pod))
    if any(p.hottest_worker_share is not None for s in row.steps for p in s.step.pods):
        columns.append(Column("Hottest worker", _hottest_worker))
    columns += [
        Column("CPU per request", lambda s: fmt.microseconds(s.step.cpu_per_request_us)),
        Column("Regime", lambda s: s.regime, numeric=False),
        Column("p95", lambda s: fmt.ms(s.step.p95_ms)),
        Column("p99", lambda s: fmt.ms(s.step.p99_ms)),
        Column("Failures", lambda s: fmt.percent(s.step.fail_ratio, 1)),
        Column("Analysis", lambda s: s.analysis, numeric=False),
    ]
    return table("", columns, row.steps, css="steps", row_css=lambda s: "limit" if s.at_limit else "")


def _each_pod(row: StepRow) -> str:
    """Each pod's utilization against its own limit: "45% / 43%"."""
    return " / ".join(fmt.percent(p.cpu_utilization_mean) for p in row.step.pods)


def _hottest_worker(row: StepRow) -> str:
    """The busiest pod's hottest worker thread: its share of what one thread can use, and over the mean worker."""
    pods = [p for p in row.step.pods if p.hottest_worker_share is not None]
    if not pods:
        return "-"
    pod = max(pods, key=lambda p: p.hottest_worker_share or 0.0)
    spread = f" ({fmt.times(pod.worker_spread)} the mean)" if pod.worker_spread is not None else ""
    return f"{fmt.percent(pod.hottest_worker_share)}{spread}"


def fleet_table(rows: Sequence[FleetRow]) -> Table:
    """Each configuration of several pods: its knee per pod and the fleet's, the imbalance, and the scale-out
    efficiency against the same pod alone."""

    def efficiency_ci(row: FleetRow) -> str:
        return fmt.interval(row.efficiency.low, row.efficiency.high) if row.efficiency else "-"

    def fleet_ci(row: FleetRow) -> str:
        knee = row.config.valid_knee
        return fmt.interval(knee.low, knee.high) if knee is not None else "-"

    columns: list[Column[FleetRow]] = [
        Column("Envoy CPU per pod", lambda r: Cell(fmt.cpu(r.config.envoy.cpu_cores), link=anchor(r.config))),
        Column("Pods", lambda r: str(r.pods)),
        Column("Worker threads per pod", lambda r: fmt.concurrency(r.config.envoy.concurrency)),
        Column("Knee per pod", lambda r: Cell(fmt.rps(r.pod_knee.rps if r.pod_knee else None), strong=True)),
        Column("95% CI per pod", lambda r: fmt.interval(r.pod_knee.low, r.pod_knee.high) if r.pod_knee else "-"),
        Column("Fleet knee", lambda r: fmt.rps(r.config.valid_knee.rps if r.config.valid_knee else None)),
        Column("95% CI of the fleet", fleet_ci),
        Column("Imbalance", lambda r: fmt.times(r.imbalance)),
        Column("One pod's knee", lambda r: fmt.rps(r.single_knee.rps if r.single_knee else None)),
        Column("Scale-out efficiency", lambda r: Cell(fmt.times(r.efficiency_value), strong=True)),
        Column("95% CI of the efficiency", efficiency_ci),
    ]
    return table("fleet-table", columns, rows)


def examples_table(examples: Sequence[Recommendation]) -> Table:
    """Envoy resources for round targets, each with how it was sized."""
    columns: list[Column[Recommendation]] = [
        Column("Target RPS", lambda e: fmt.rps(e.target_rps)),
        Column("Knee needed", lambda e: fmt.rps(e.required_rps)),
        Column("Envoy CPU", lambda e: Cell(e.cpu, strong=True)),
        Column("Cores within the 95% CI", lambda e: fmt.interval(*e.cores_interval) if e.cores_interval else "-"),
        Column("Envoy memory", lambda e: e.memory),
        Column("Sized from", lambda e: e.sized_from, numeric=False),
    ]
    return table("examples-table", columns, examples)


def profile_table(comparison: ProfileComparison) -> Table:
    """Each profile's knee, its ratio to the first profile's, CPU per request and cores per 1,000 RPS."""
    columns: list[Column[ProfileRow]] = [
        Column("Envoy CPU", lambda p: fmt.cpu(p.row.cpu_cores)),
        Column("Profile", lambda p: p.row.profile, numeric=False),
        Column("Each request", lambda p: p.traffic, numeric=False),
        Column("Knee RPS", lambda p: Cell(fmt.rps(p.row.knee.rps if p.row.knee else None), strong=True)),
        Column("95% CI", lambda p: fmt.interval(p.row.knee.low, p.row.knee.high) if p.row.knee else "-"),
        Column(f"Knee vs {comparison.first}", lambda p: fmt.times(p.vs_first.value) if p.vs_first else "-"),
        Column("95% CI of the ratio", lambda p: fmt.interval(p.vs_first.low, p.vs_first.high) if p.vs_first else "-"),
        Column("CPU per request", lambda p: fmt.microseconds(p.row.cpu_per_request_us)),
        Column("New connections per request", lambda p: fmt.decimal(p.connections_per_request, 2)),
        Column("Envoy cores per 1,000 RPS", lambda p: fmt.decimal(p.cores_per_1k_rps, 3)),
        Column("Status", lambda p: _status(p.row.config.status), numeric=False),
    ]
    return table("profile-table", columns, comparison.rows)


def connection_cost_table(costs: Sequence[ConnectionCost]) -> Table:
    columns: list[Column[ConnectionCost]] = [
        Column("Envoy CPU", lambda c: fmt.cpu(c.cpu_cores)),
        Column("New connection per request", lambda c: c.new, numeric=False),
        Column("Keep-alive twin", lambda c: c.kept, numeric=False),
        Column("Envoy CPU per new connection", lambda c: Cell(fmt.microseconds(c.us_per_connection), strong=True)),
        Column("95% CI", lambda c: fmt.interval(c.interval.low, c.interval.high, " \u00b5s") if c.interval else "-"),
        Column(
            "In keep-alive requests",
            lambda c: f"{c.what} = {c.requests_equivalent:.1f} {c.kept} requests",
            numeric=False,
        ),
    ]
    return table("connection-cost-table", columns, costs)


def baseline_table(baseline: BaselineResult) -> Table:
    """nginx directly and through Envoy, with the same closed-loop users."""
    paths = (("nginx directly", baseline.direct, False), ("through Envoy", baseline.gateway, True))
    columns: list[Column[tuple[str, Step, bool]]] = [
        Column("Path", lambda p: p[0], numeric=False),
        Column("RPS", lambda p: Cell(fmt.rps(p[1].rps), strong=p[2])),
        Column("p95", lambda p: fmt.ms(p[1].p95_ms)),
        Column("Envoy CPU utilization", lambda p: fmt.percent(p[1].cpu_utilization_mean) if p[2] else "-"),
    ]
    return table("baseline-table", columns, paths)


def fixed_load_table(loads: Sequence[FixedLoad]) -> Table:
    """Envoy's CPU at each fixed offered load, per 1,000 RPS served."""
    columns: list[Column[FixedLoad]] = [
        Column("Configuration", lambda f: f.label, numeric=False),
        Column("Offered RPS", lambda f: fmt.rps(f.offered_rps)),
        Column("RPS", lambda f: fmt.rps(f.rps)),
        Column("Envoy CPU (cores)", lambda f: fmt.decimal(f.envoy_cores, 3)),
        Column("Utilization", lambda f: fmt.percent(f.utilization)),
        Column("Envoy cores per 1,000 RPS", lambda f: Cell(fmt.decimal(f.cores_per_1k_rps, 3), strong=True)),
    ]
    return table("fixed-load-table", columns, loads)


def environment_table(rows: Sequence[EnvRow]) -> Table:
    columns: list[Column[EnvRow]] = [
        Column("Object", lambda e: e.name, numeric=False),
        Column("Role", lambda e: e.role, numeric=False),
        Column("Description", lambda e: e.description, numeric=False),
    ]
    return table("environment-table", columns, rows)


def run_table(facts: Sequence[tuple[str, str]]) -> Table:
    columns: list[Column[tuple[str, str]]] = [
        Column("Run", lambda f: Cell(f[0], strong=True), numeric=False),
        Column("", lambda f: f[1], numeric=False),
    ]
    return table("run-table", columns, facts)
