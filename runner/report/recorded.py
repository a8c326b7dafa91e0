"""What a run recorded, as the report reads it. A run records what it decided with on each result (the
Accept-Encoding its clients sent, the scrape interval its guards judged with) and the report renders that;
runs saved before these were recorded fall back to the run's resolved scenario (scenario.yaml), once, here."""

from __future__ import annotations

from runner.model import RunSummary
from runner.scenario import Scenario

__all__ = ["with_fallbacks"]


def with_fallbacks(summary: RunSummary, scenario: Scenario | None) -> RunSummary:
    """`summary`, with what results saved by earlier versions lack taken from the run's `scenario`: the
    Accept-Encoding the clients sent (a profile's own, else load.accept_encoding, as runner.locust.LocustOptions
    chooses) and the scrape interval the guards judged with. Without a scenario they stay None (the report says
    the encoding was not recorded). A copy: `summary` itself is not changed."""
    if scenario is None:
        return summary
    load = scenario.load
    configs = [
        config.model_copy(
            update={
                "accept_encoding": config.accept_encoding or config.profile.accept_encoding or load.accept_encoding,
                "scrape_interval_s": config.scrape_interval_s or scenario.prometheus.scrape_interval_s,
            }
        )
        for config in summary.configs
    ]
    memory = summary.memory
    if memory is not None and memory.accept_encoding is None:
        memory = memory.model_copy(update={"accept_encoding": load.accept_encoding})
    return summary.model_copy(update={"configs": configs, "memory": memory})
